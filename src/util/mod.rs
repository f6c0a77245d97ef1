//! Small pure building blocks that several layers share: retry delays
//! ([`Backoff`], with the randomness of [`Jitter`]) and rate limits
//! ([`TokenBucket`]), and the directories systemd gives the service
//! ([`first_dir`]).
//!
//! Everything here is a plain function of the values it is given: the time
//! and the randomness are passed in, so callers test them exactly. Nothing here
//! may read a clock, sleep, log, or know any other layer of the agent.

mod backoff;
mod systemd_dir;
mod token_bucket;

pub use backoff::{Backoff, Jitter};
pub use systemd_dir::first_dir;
pub use token_bucket::TokenBucket;
