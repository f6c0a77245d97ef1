//! The energy view's one I/O: the summaries of the site's series, read from
//! the store in one snapshot, then the hours in which a counter fell read
//! again sample by sample (`refine.rs`), handed to the pure plan.
//!
//! It must not open SQLite itself (the store's read API does), nor compute
//! energy (`plan.rs` and the files it calls do).

use super::plan::{assemble, choose, reads, EnergyDevice, EnergyQuery, SiteEnergy};
use super::refine::{refinements, splice};
use crate::store::{StoreError, StoreHandle};

/// Why an energy question got no answer.
#[derive(Debug, thiserror::Error)]
pub enum EnergyError {
    #[error("reading the site's series: {0}")]
    Store(#[from] StoreError),
}

/// The site's energy for `q`, from `devices` (the site's, in config order).
pub async fn site_energy(
    store: &StoreHandle,
    devices: &[EnergyDevice],
    q: EnergyQuery,
) -> Result<SiteEnergy, EnergyError> {
    let chosen = choose(devices, q.prefer);
    let reads = reads(devices, &chosen, &q);
    let mut results = store
        .summaries(reads.iter().map(|r| r.query.clone()).collect())
        .await?;
    let again = refinements(&reads, &results);
    if !again.is_empty() {
        let refined = store
            .summaries(again.iter().map(|f| f.query.clone()).collect())
            .await?;
        splice(&mut results, &again, refined);
    }
    Ok(assemble(devices, chosen, &reads, &results, q))
}
