//! Small pure building blocks that several layers share: retry delays
//! ([`Backoff`], with the randomness of [`Jitter`]) and rate limits
//! ([`TokenBucket`]).
//!
//! Everything here is a plain function of the values it is given: the time
//! and the randomness are passed in, so callers test them exactly. Nothing here
//! may read a clock, sleep, log, or know any other layer of the agent.

mod backoff;
mod token_bucket;

pub use backoff::{Backoff, Jitter};
pub use token_bucket::TokenBucket;
