//! Tests of the simulated site over real sockets.
