//! The one capability discovery and polling need from a link: read a span.

use super::error::ModbusError;
use super::plan::{self, Image, Span};

/// Reads registers from one device. Implemented by the bus link and by test fakes.
pub trait RegisterReader {
    fn read(
        &mut self,
        span: Span,
    ) -> impl std::future::Future<Output = Result<Vec<u16>, ModbusError>> + Send;
}

/// Plans the spans into requests, reads them all and returns the image.
pub async fn read_spans<R: RegisterReader>(
    r: &mut R,
    spans: &[Span],
    max_gap: u16,
) -> Result<Image, ModbusError> {
    let mut img = Image::new();
    for req in plan::plan(spans, max_gap) {
        let words = r.read(req).await?;
        img.insert(req, words);
    }
    Ok(img)
}
