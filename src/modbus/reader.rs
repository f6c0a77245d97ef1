//! The one capability discovery and polling need from a link: read a span; and
//! the read loop they share, which splits a request the device refuses.

use super::error::ModbusError;
use crate::register::plan::{self, Image, Span};

/// Reads registers from one device. Implemented by the bus link and by test fakes.
pub trait RegisterReader {
    fn read(
        &mut self,
        span: Span,
    ) -> impl std::future::Future<Output = Result<Vec<u16>, ModbusError>> + Send;
}

/// Reads every request of `requests` into an image. A request the device
/// answers with "illegal data address" is replaced in place by smaller ones
/// ([`plan::split_refused`] over `needed`: first without the holes it read
/// through, then span by span; a single refused span is dropped, its points
/// stay without values) and read at once; `on_split` hears of each
/// replacement. Any other failure ends the read. `requests` keeps the split
/// plan, so a caller that reuses it asks the smaller requests from then on.
/// `needed` is asked only when a request is refused (a poll's plan is read
/// every second; its spans are needed about never).
pub async fn read_splitting<R: RegisterReader>(
    r: &mut R,
    requests: &mut Vec<Span>,
    needed: impl Fn() -> Vec<Span>,
    mut on_split: impl FnMut(Span, &[Span]),
) -> Result<Image, ModbusError> {
    let mut img = Image::new();
    let mut i = 0;
    while i < requests.len() {
        let req = requests[i];
        match r.read(req).await {
            Ok(words) => {
                img.insert(req, words);
                i += 1;
            }
            Err(e) if e.is_illegal_address() => {
                let parts = plan::split_refused(req, &needed());
                on_split(req, &parts);
                requests.splice(i..=i, parts);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(img)
}

/// Plans the spans into requests (joined across holes of at most `max_gap`)
/// and reads them all, splitting the ones the device refuses.
pub async fn read_spans<R: RegisterReader>(
    r: &mut R,
    spans: &[Span],
    max_gap: u16,
) -> Result<Image, ModbusError> {
    let mut requests = plan::plan(spans, max_gap);
    read_splitting(
        r,
        &mut requests,
        || spans.to_vec(),
        |req, parts| {
            tracing::debug!(
                table = ?req.table,
                addr = req.addr,
                len = req.len,
                replaced_by = ?parts,
                "device refused a read (illegal data address); splitting it"
            );
        },
    )
    .await
}
