//! The CSIP-AUS client: IEEE 2030.5 with Australia's profile (SA TS 5573),
//! through which a distribution network operator sets a site's dynamic
//! operating envelope (`docs/csip-aus.md`). It finds its EndDevice from the
//! server's DeviceCapability, registers, follows the DER programs, and
//! hands the controls in force to steering as the limits of source `csip`
//! (`../shared/spec/grid-operators.md`); it reports the DER and its
//! telemetry back, and answers each event.
//!
//! Pure cores: `xml` and `resource` (the wire format), `schedule` (which
//! control is in force), `limits` (from controls to steering's limits, with
//! their ramps), `site` (the site as one DER). I/O at the edges: `tls`
//! builds the TLS configuration, `http` makes the requests, `store` keeps
//! the schedule, `client` is the task. The device's identity (lFDI, sFDI)
//! is `config::csip::identity`'s, read with the certificate.
//!
//! Nothing here commands a device: steering holds the limits.
pub mod client;
pub mod http;
pub mod limits;
pub mod resource;
pub mod schedule;
pub mod site;
pub mod status;
pub mod store;
pub mod tls;
pub mod xml;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::Config;
use crate::steering::SteeringService;
use crate::telemetry::Live;

/// Starts one client per `[csip_aus]` table; returns their statuses (the
/// metrics' collector). A table whose certificate files cannot be used
/// still starts: its client keeps the stored schedule in force and says
/// why it cannot connect.
pub fn start(
    config: &Config,
    steering: &SteeringService,
    live: &Arc<Live>,
    store: store::CsipStore,
    tracker: &TaskTracker,
    cancel: &CancellationToken,
) -> status::Statuses {
    let mut statuses = Vec::new();
    let count = config.csip.len();
    for (i, c) in config.csip.iter().enumerate() {
        let Ok(site) = steering.site(&c.site) else {
            tracing::warn!(site = %c.site, "[csip_aus] names a site steering does not run: no client");
            continue;
        };
        let material = crate::config::csip_files::load(c, i, count).map_err(|problems| {
            problems
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        });
        let (lfdi, sfdi) = material
            .as_ref()
            .map(|m| (m.identity.lfdi.clone(), m.identity.sfdi))
            .unwrap_or_default();
        let status = status::Status::new(
            &c.site,
            &lfdi,
            sfdi,
            format!(
                "https://{}:{}{}",
                c.server.host, c.server.port, c.server.path
            ),
        );
        statuses.push(status.clone());
        tracker.spawn(client::run(
            client::Parts {
                config: c.clone(),
                material,
                site: site.clone(),
                live: live.clone(),
                steering: steering.clone(),
                store: store.clone(),
                status,
            },
            cancel.child_token(),
        ));
    }
    status::Statuses(statuses)
}
