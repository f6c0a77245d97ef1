//! The 2030.5 and CSIP-AUS resources the client reads and writes, as plain
//! data, each with its parser (from a document) or its encoder (to one).
//! `discovery` holds the way to the device's own resources, `program` the
//! controls, `der` what the client says of its DER, `mirror` its
//! telemetry, `response` its answers to events.
//!
//! Pure: text in, values out, and back. No I/O and no clock.

pub mod der;
pub mod discovery;
pub mod mirror;
pub mod program;
pub mod response;

use super::xml::{El, XmlError};

/// One page of a list resource.
#[derive(Clone, Debug, PartialEq)]
pub struct Page<T> {
    /// Items in the whole list.
    pub all: u32,
    /// Items in this page.
    pub results: u32,
    /// The list's `pollRate`, s.
    pub poll_rate_s: Option<u32>,
    pub items: Vec<T>,
}

/// A list page from `root`, each item named `item` read by `f`.
pub fn page<T>(
    root: &El<'_, '_>,
    item: &str,
    f: impl Fn(&El<'_, '_>) -> Result<T, XmlError>,
) -> Result<Page<T>, XmlError> {
    let items = root
        .children(item)
        .iter()
        .map(f)
        .collect::<Result<Vec<T>, XmlError>>()?;
    let results = root.attr_number::<u32>("results")?;
    let all = root.attr_number::<u32>("all")?;
    let n = u32::try_from(items.len()).unwrap_or(u32::MAX);
    Ok(Page {
        all: all.unwrap_or(n),
        results: results.unwrap_or(n),
        poll_rate_s: root.attr_number("pollRate")?,
        items,
    })
}

/// The `href` of an item, which a listed resource must have.
pub fn href_of(el: &El<'_, '_>) -> Result<String, XmlError> {
    el.href().ok_or_else(|| XmlError {
        path: el.path().to_string(),
        message: "has no href".into(),
    })
}
