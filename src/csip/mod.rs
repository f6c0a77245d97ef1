//! The CSIP-AUS client: IEEE 2030.5 with Australia's profile (SA TS 5573),
//! through which a distribution network operator sets a site's dynamic
//! operating envelope (`docs/csip-aus.md`). It finds its EndDevice from the
//! server's DeviceCapability, registers, follows the DER programs, and
//! hands the controls in force to steering as the limits of source `csip`
//! (`../shared/spec/grid-operators.md`); it reports the DER and its
//! telemetry back, and answers each event.
//!
//! Pure cores: `identity` (lFDI, sFDI), `xml` and `resource` (the wire
//! format), `schedule` (which control is in force), `ramp`. I/O at the
//! edges: `tls` builds the TLS configuration, `http` the requests.
//!
//! Nothing here commands a device: steering holds the limits.

pub mod client;
pub mod http;
pub mod identity;
pub mod limits;
pub mod resource;
pub mod schedule;
pub mod site;
pub mod store;
pub mod tls;
pub mod xml;
