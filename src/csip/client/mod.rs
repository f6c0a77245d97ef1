//! The CSIP-AUS client task of one site (filled in below).
pub mod polls;
pub mod readings;
