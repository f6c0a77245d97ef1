//! The evidence log: every event of a grid operator's source (`modbus`, a
//! relay signal, `eebus`, `csip`), with its limit, start, end and the most
//! the site imported and exported meanwhile, kept two years in the agent's
//! database and exported as CSV (`sitegate grid-events`,
//! `../shared/spec/grid-operators.md`, "Evidence"). An operator may ask a
//! site to prove that it honoured a limit; this is the proof.
//!
//! `tracker` decides (pure), `csv` renders (pure), `store` keeps, `task`
//! follows each steered site once a second, `metrics` shows the limits and
//! counts the events. Nothing here changes a limit.

pub mod csv;
pub mod metrics;
pub mod store;
pub mod task;
pub mod tracker;

pub use tracker::Event;
