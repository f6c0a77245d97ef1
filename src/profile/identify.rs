//! How a profile recognises its device: one register (or a short string block)
//! whose value only that vendor's devices hold, such as a model code or a type
//! designation. `sitegate scan` reads it on units without a SunSpec map and
//! proposes the profile when it matches; the simulator fills it in so that a
//! simulated device is found like a real one.
//!
//! Pure: no Modbus I/O here.

use crate::register::codec::{self, Absent, ValueType, WordOrder};
use crate::register::plan::{Span, Table};

/// What the identification register must hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IdentifyMatch {
    /// A number (model code, device class): any of `values`.
    Number {
        ty: ValueType,
        order: WordOrder,
        values: Vec<i64>,
    },
    /// An ASCII string over `words` registers that starts with `prefix`
    /// (ignoring case and leading blanks).
    Text { words: u16, prefix: String },
}

/// The `[identify]` section of a profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identify {
    pub table: Table,
    pub addr: u16,
    pub expect: IdentifyMatch,
}

impl Identify {
    /// The registers to read.
    pub fn span(&self) -> Span {
        let words = match &self.expect {
            IdentifyMatch::Number { ty, .. } => ty.words(),
            IdentifyMatch::Text { words, .. } => *words,
        };
        Span::new(self.table, self.addr, words)
    }

    /// What the registers say, readably (a number or the string), or `None`
    /// when there are too few words.
    pub fn read(&self, words: &[u16]) -> Option<String> {
        match &self.expect {
            IdentifyMatch::Number { ty, order, .. } => {
                codec::decode(words, *ty, *order, Absent::Never).map(|v| format!("{v}"))
            }
            IdentifyMatch::Text { words: n, .. } => {
                let w = words.get(..usize::from(*n))?;
                Some(codec::decode_string(w).unwrap_or_default())
            }
        }
    }

    /// Whether the registers identify the profile's device.
    pub fn matches(&self, words: &[u16]) -> bool {
        let Some(seen) = self.read(words) else {
            return false;
        };
        match &self.expect {
            IdentifyMatch::Number { values, .. } => seen
                .parse::<f64>()
                .is_ok_and(|v| values.iter().any(|x| *x as f64 == v)),
            IdentifyMatch::Text { prefix, .. } => seen
                .trim_start()
                .to_ascii_lowercase()
                .starts_with(&prefix.to_ascii_lowercase()),
        }
    }

    /// Register words a matching device holds (the first value, or the prefix).
    pub fn example(&self) -> Vec<u16> {
        match &self.expect {
            IdentifyMatch::Number { ty, order, values } => values
                .first()
                .and_then(|v| codec::encode(*v as f64, *ty, *order).ok())
                .unwrap_or_default(),
            IdentifyMatch::Text { words, prefix } => {
                codec::encode_string(prefix, usize::from(*words))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn number(values: Vec<i64>) -> Identify {
        Identify {
            table: Table::Holding,
            addr: 11,
            expect: IdentifyMatch::Number {
                ty: ValueType::U32,
                order: WordOrder::HighFirst,
                values,
            },
        }
    }

    #[test]
    fn numbers_match_any_listed_value() {
        let id = number(vec![1648, 1653]);
        assert!(id.matches(&[0, 1653]));
        assert!(!id.matches(&[0, 1654]));
        assert!(!id.matches(&[0]), "too few words");
        assert_eq!(id.example(), vec![0, 1648]);
        assert_eq!(id.span(), Span::new(Table::Holding, 11, 2));
    }

    #[test]
    fn text_matches_a_prefix_ignoring_case() {
        let id = Identify {
            table: Table::Input,
            addr: 0x8960,
            expect: IdentifyMatch::Text {
                words: 6,
                prefix: "B23".into(),
            },
        };
        assert!(id.matches(&codec::encode_string("b23 312-100", 6)));
        assert!(!id.matches(&codec::encode_string("B21 312-100", 6)));
        assert_eq!(id.read(&id.example()).as_deref(), Some("B23"));
    }
}
