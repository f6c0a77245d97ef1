//! Writes that steer: the model-123 limit, the model-124 window, revert timers,
//! SoC limits, and the simulated clock.
