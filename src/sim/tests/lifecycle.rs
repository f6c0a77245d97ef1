//! Servers going away and coming back, devices refusing writes, write events.
