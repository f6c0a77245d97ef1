//! Reading 2030.5 XML: a document parsed into a tree (roxmltree) within
//! bounds, and elements read by their local name, in any order, with every
//! element this client does not know passed over (2030.5 section 4.2: a
//! client ignores what it does not understand). A value that is there but
//! wrong is an error that names its element path and the value.
//!
//! Pure: text in, values out.

use std::fmt;
use std::str::FromStr;

/// The most nodes one document may hold: a list page of 100 controls is
/// about 6,000; this bounds the tree at about 40 MB for a hostile body.
pub const MAX_NODES: u32 = 500_000;

/// What is wrong with a document, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct XmlError {
    /// The element path, e.g. `DERControlList/DERControl[2]/interval/start`.
    pub path: String,
    pub message: String,
}

impl fmt::Display for XmlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// A parsed document.
pub struct Doc<'i> {
    doc: roxmltree::Document<'i>,
}

impl<'i> Doc<'i> {
    pub fn parse(text: &'i str) -> Result<Doc<'i>, XmlError> {
        let options = roxmltree::ParsingOptions {
            // 2030.5 documents have no DTD; one is refused (entity expansion).
            allow_dtd: false,
            nodes_limit: MAX_NODES,
        };
        roxmltree::Document::parse_with_options(text, options)
            .map(|doc| Doc { doc })
            .map_err(|e| XmlError {
                path: String::new(),
                message: format!("not well-formed XML: {e}"),
            })
    }

    /// The root element, which must be named `name`.
    pub fn root(&self, name: &str) -> Result<El<'_, 'i>, XmlError> {
        let root = self.doc.root_element();
        let found = root.tag_name().name();
        if found != name {
            return Err(XmlError {
                path: String::new(),
                message: format!("expected a {name} document, found {found}"),
            });
        }
        Ok(El {
            node: root,
            path: name.to_string(),
        })
    }

    /// The CSIP-AUS namespace the document declares, if any.
    pub fn csipaus_namespace(&self) -> Option<String> {
        self.doc
            .descendants()
            .filter(roxmltree::Node::is_element)
            .flat_map(|n| n.namespaces())
            .map(|ns| ns.uri())
            .find(|uri| uri.starts_with("https://csipaus.org/ns"))
            .map(str::to_string)
    }
}

/// One element and its path from the root.
#[derive(Clone)]
pub struct El<'a, 'i> {
    node: roxmltree::Node<'a, 'i>,
    path: String,
}

impl<'a, 'i> El<'a, 'i> {
    pub fn path(&self) -> &str {
        &self.path
    }

    fn error(&self, message: impl Into<String>) -> XmlError {
        XmlError {
            path: self.path.clone(),
            message: message.into(),
        }
    }

    fn at(&self, node: roxmltree::Node<'a, 'i>, index: Option<usize>) -> El<'a, 'i> {
        let name = node.tag_name().name();
        let path = match index {
            Some(i) => format!("{}/{name}[{i}]", self.path),
            None => format!("{}/{name}", self.path),
        };
        El { node, path }
    }

    /// The first child element named `name`.
    pub fn child(&self, name: &str) -> Option<El<'a, 'i>> {
        self.node
            .children()
            .find(|n| n.is_element() && n.tag_name().name() == name)
            .map(|n| self.at(n, None))
    }

    /// Every child element named `name`, each with its index in the path.
    pub fn children(&self, name: &str) -> Vec<El<'a, 'i>> {
        self.node
            .children()
            .filter(|n| n.is_element() && n.tag_name().name() == name)
            .enumerate()
            .map(|(i, n)| self.at(n, Some(i)))
            .collect()
    }

    /// The element's own text, trimmed.
    pub fn text(&self) -> &'a str {
        self.node.text().unwrap_or("").trim()
    }

    /// The text of child `name`, if there is one.
    pub fn text_of(&self, name: &str) -> Option<&'a str> {
        self.child(name).map(|c| c.text())
    }

    /// An attribute, if present.
    pub fn attr(&self, name: &str) -> Option<&'a str> {
        self.node.attribute(name)
    }

    /// The child `name` parsed as a number, or `None` when absent.
    pub fn number<T: FromStr>(&self, name: &str) -> Result<Option<T>, XmlError> {
        let Some(c) = self.child(name) else {
            return Ok(None);
        };
        c.as_number().map(Some)
    }

    /// The child `name` as a number, which must be there.
    pub fn required<T: FromStr>(&self, name: &str) -> Result<T, XmlError> {
        self.number(name)?
            .ok_or_else(|| self.error(format!("has no {name}")))
    }

    /// This element's text as a number.
    pub fn as_number<T: FromStr>(&self) -> Result<T, XmlError> {
        let t = self.text();
        t.parse::<T>()
            .map_err(|_| self.error(format!("{t:?} is not a whole number in range")))
    }

    /// The child `name` as `xs:boolean` (`true`, `false`, `1`, `0`).
    pub fn boolean(&self, name: &str) -> Result<Option<bool>, XmlError> {
        let Some(c) = self.child(name) else {
            return Ok(None);
        };
        match c.text() {
            "true" | "1" => Ok(Some(true)),
            "false" | "0" => Ok(Some(false)),
            other => Err(c.error(format!("{other:?} is not a boolean"))),
        }
    }

    /// The child `name` as a hex bitmap (HexBinary8 to 32, any case, any
    /// length up to eight digits).
    pub fn hex(&self, name: &str) -> Result<Option<u32>, XmlError> {
        let Some(c) = self.child(name) else {
            return Ok(None);
        };
        parse_hex(c.text()).map(Some).map_err(|m| c.error(m))
    }

    /// The attribute `name` as a number, or `None` when absent.
    pub fn attr_number<T: FromStr>(&self, name: &str) -> Result<Option<T>, XmlError> {
        let Some(v) = self.attr(name) else {
            return Ok(None);
        };
        v.trim().parse::<T>().map(Some).map_err(|_| {
            self.error(format!(
                "attribute {name}={v:?} is not a whole number in range"
            ))
        })
    }

    /// The attribute `name` as a hex bitmap.
    pub fn attr_hex(&self, name: &str) -> Result<Option<u32>, XmlError> {
        let Some(v) = self.attr(name) else {
            return Ok(None);
        };
        parse_hex(v)
            .map(Some)
            .map_err(|m| self.error(format!("attribute {name}: {m}")))
    }

    /// The `href` of child link `name` (`TimeLink`, `EndDeviceListLink`, ...).
    pub fn link(&self, name: &str) -> Result<Option<String>, XmlError> {
        let Some(c) = self.child(name) else {
            return Ok(None);
        };
        match c.attr("href").map(str::trim) {
            Some(h) if !h.is_empty() => Ok(Some(h.to_string())),
            _ => Err(c.error("a link without an href")),
        }
    }

    /// This element's own `href` attribute.
    pub fn href(&self) -> Option<String> {
        self.attr("href")
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(str::to_string)
    }
}

fn parse_hex(t: &str) -> Result<u32, String> {
    let t = t.trim();
    if t.is_empty() || t.len() > 8 || !t.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("{t:?} is not a hex bitmap of at most 32 bits"));
    }
    u32::from_str_radix(t, 16).map_err(|e| format!("{t:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"<DERControlList xmlns="urn:ieee:std:2030.5:ns" xmlns:csipaus="https://csipaus.org/ns" all="2" results="2">
        <DERControl href="/derc/1" responseRequired="03"><mRID>AB</mRID><unknownThing><deep/></unknownThing>
          <interval><start>1700000000</start><duration>600</duration></interval>
          <DERControlBase><csipaus:opModExpLimW><multiplier>1</multiplier><value>150</value></csipaus:opModExpLimW><opModConnect>1</opModConnect></DERControlBase>
        </DERControl>
        <DERControl><mRID>CD</mRID><interval><start>soon</start></interval></DERControl>
    </DERControlList>"#;

    #[test]
    fn elements_are_found_by_local_name_in_any_order_with_paths() {
        let doc = Doc::parse(DOC).unwrap();
        let root = doc.root("DERControlList").unwrap();
        assert_eq!(root.attr_number::<u32>("all").unwrap(), Some(2));
        let controls = root.children("DERControl");
        assert_eq!(controls.len(), 2);
        let c = &controls[0];
        assert_eq!(c.href().as_deref(), Some("/derc/1"));
        assert_eq!(c.attr_hex("responseRequired").unwrap(), Some(3));
        let interval = c.child("interval").unwrap();
        assert_eq!(interval.required::<i64>("start").unwrap(), 1_700_000_000);
        let base = c.child("DERControlBase").unwrap();
        assert_eq!(base.boolean("opModConnect").unwrap(), Some(true));
        let exp = base.child("opModExpLimW").unwrap();
        assert_eq!(
            exp.path(),
            "DERControlList/DERControl[0]/DERControlBase/opModExpLimW"
        );
        assert_eq!(
            doc.csipaus_namespace().as_deref(),
            Some("https://csipaus.org/ns")
        );
    }

    #[test]
    fn a_bad_value_names_its_path_and_value() {
        let doc = Doc::parse(DOC).unwrap();
        let root = doc.root("DERControlList").unwrap();
        let bad = root.children("DERControl")[1].child("interval").unwrap();
        let e = bad.required::<i64>("start").unwrap_err();
        assert_eq!(e.path, "DERControlList/DERControl[1]/interval/start");
        assert!(e.message.contains("\"soon\""), "{e}");
        let e = bad.required::<u32>("duration").unwrap_err();
        assert_eq!(
            e.to_string(),
            "DERControlList/DERControl[1]/interval: has no duration"
        );
    }

    #[test]
    fn malformed_documents_and_wrong_roots_are_refused() {
        assert!(Doc::parse("<DERControlList><oops></DERControlList>")
            .err()
            .unwrap()
            .message
            .starts_with("not well-formed XML"));
        let doc = Doc::parse("<Time><currentTime>1</currentTime></Time>").unwrap();
        assert_eq!(
            doc.root("DeviceCapability").err().unwrap().message,
            "expected a DeviceCapability document, found Time"
        );
        // A DTD could expand entities without bound: refused.
        let dtd = r#"<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x "xx">]><a>&x;</a>"#;
        assert!(Doc::parse(dtd).is_err());
    }

    #[test]
    fn hex_bitmaps_take_any_case_and_length_up_to_eight_digits() {
        let doc = Doc::parse("<a><b>49</b><c>0000001f</c><d>1F</d><e>123456789</e><f>zz</f></a>")
            .unwrap();
        let a = doc.root("a").unwrap();
        assert_eq!(a.hex("b").unwrap(), Some(0x49));
        assert_eq!(a.hex("c").unwrap(), Some(0x1f));
        assert_eq!(a.hex("d").unwrap(), Some(0x1f));
        assert!(a.hex("e").is_err());
        assert!(a.hex("f").is_err());
        assert_eq!(a.hex("g").unwrap(), None);
    }
}
