//! Site steering: partners' site-level signals turned into per-device setpoints
//! that the devices follow (`spec/steering.md`).
//!
//! Pure core: `timeline`, `signal` (the combined signal), `request` (bodies),
//! `alloc` (fulfilment rules), `decide` (what each device should get now).
//! I/O at the edges: `writer` (register recipes per protocol), the per-device
//! actuator task, the per-site control loop task, the service handle the API uses,
//! and persistence of timelines, audit and idempotency keys.
//!
//! Nothing here may command a device beyond its limits or the site's grid limits,
//! or leave a device steered after its signal's validity ended.

pub mod alloc;
pub mod decide;
pub mod request;
pub mod signal;
pub mod timeline;
pub mod value;
pub mod writer;

pub use request::{Endpoint, RejectCode, Rejection, SteeringRequest};
pub use signal::{Active, SiteSignal, StoredEntry};
pub use timeline::{Entry, Timeline};
pub use value::{Component, ComponentValue, CurtailmentValue, EssSetting};
