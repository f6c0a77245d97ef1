//! 2030.5's XML, read and written: `read` parses bounded documents into
//! elements found by local name, `write` builds documents in schema order.
//! Neither knows a resource; `resource/` does.

pub mod read;
pub mod write;

pub use read::{Doc, El, XmlError};
pub use write::Writer;
