//! Writing 2030.5 XML: elements in the order the caller gives (the schema's),
//! text escaped, the 2030.5 namespace as the default and CSIP-AUS's under
//! the `csipaus` prefix.
//!
//! Pure: builds a string.

use std::fmt::{Display, Write};

/// The 2030.5 namespace.
pub const SEP: &str = "urn:ieee:std:2030.5:ns";
/// CSIP-AUS's namespace when a server has not shown its own.
pub const CSIPAUS: &str = "https://csipaus.org/ns";

/// One document being written.
pub struct Writer {
    out: String,
    open: Vec<&'static str>,
}

impl Writer {
    /// A document whose root is `root`, declaring the 2030.5 namespace and
    /// CSIP-AUS's as `csipaus_ns`.
    pub fn new(root: &'static str, csipaus_ns: &str) -> Writer {
        let mut w = Writer {
            out: String::with_capacity(512),
            open: Vec::new(),
        };
        let _ = write!(
            w.out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{root} xmlns=\"{SEP}\" xmlns:csipaus=\"{}\">",
            escape(csipaus_ns)
        );
        w.open.push(root);
        w
    }

    /// Opens `name`.
    pub fn open(&mut self, name: &'static str) -> &mut Writer {
        let _ = write!(self.out, "<{name}>");
        self.open.push(name);
        self
    }

    /// Closes the innermost open element.
    pub fn close(&mut self) -> &mut Writer {
        if let Some(name) = self.open.pop() {
            let _ = write!(self.out, "</{name}>");
        }
        self
    }

    /// `<name>value</name>`.
    pub fn leaf(&mut self, name: &'static str, value: impl Display) -> &mut Writer {
        let text = value.to_string();
        let _ = write!(self.out, "<{name}>{}</{name}>", escape(&text));
        self
    }

    /// `<name>value</name>` when there is a value.
    pub fn maybe(&mut self, name: &'static str, value: Option<impl Display>) -> &mut Writer {
        if let Some(v) = value {
            self.leaf(name, v);
        }
        self
    }

    /// The document, every open element closed.
    pub fn finish(mut self) -> String {
        while !self.open.is_empty() {
            self.close();
        }
        self.out
    }
}

/// A bitmap as HexBinary: upper case, an even number of digits, at least two.
pub fn hex(value: u32, min_digits: usize) -> String {
    let digits = format!("{value:X}");
    let width = digits.len().max(min_digits);
    format!("{digits:0>w$}", w = width + width % 2)
}

fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csip::xml::read::Doc;

    #[test]
    fn a_written_document_reads_back_with_its_namespaces() {
        let mut w = Writer::new("EndDevice", CSIPAUS);
        w.leaf("lFDI", "AB<&>")
            .open("csipaus:ConnectionPointLink")
            .close();
        w.maybe("postRate", Some(60))
            .maybe("changedTime", None::<i64>);
        let text = w.finish();
        let doc = Doc::parse(&text).unwrap();
        let root = doc.root("EndDevice").unwrap();
        assert_eq!(root.text_of("lFDI"), Some("AB<&>"));
        assert_eq!(root.number::<u32>("postRate").unwrap(), Some(60));
        assert!(root.child("changedTime").is_none());
        assert!(root.child("ConnectionPointLink").is_some());
        assert_eq!(doc.csipaus_namespace().as_deref(), Some(CSIPAUS));
    }

    #[test]
    fn hex_bitmaps_have_an_even_number_of_digits() {
        assert_eq!(hex(0x49, 2), "49");
        assert_eq!(hex(0x3, 2), "03");
        assert_eq!(hex(0x100, 2), "0100");
        assert_eq!(hex(0x1f, 8), "0000001F");
        assert_eq!(hex(0, 2), "00");
    }
}
