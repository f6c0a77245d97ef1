//! Strict query strings: every parameter known, none given twice.
//!
//! Handlers take `axum::extract::RawQuery` and call [`QueryParams::parse`] with the
//! names they accept, instead of axum's `Query`, whose serde path cannot tell a
//! duplicate or an unknown parameter apart from a good one. This file must not
//! know any endpoint's parameters.

use super::error::{ApiError, ErrorCode};

/// The decoded parameters of one query string, each name at most once.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct QueryParams {
    pairs: Vec<(String, String)>,
}

impl QueryParams {
    /// Decodes `raw` (without the `?`). A name outside `allowed` is 400
    /// `unknown_field`; a name given twice is 400 `invalid_value`. A bare name
    /// (`?dryRun`) has the empty value.
    pub fn parse(raw: Option<&str>, allowed: &[&str]) -> Result<Self, ApiError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (name, value) in form_urlencoded::parse(raw.unwrap_or("").as_bytes()) {
            // Empty segments (`?a=1&&b=2`, a lone `?`) never get here; a
            // segment with `=` and no name (`?=`, `?=x`) is a parameter
            // without a name: refused, with no field to name.
            if name.is_empty() {
                return Err(ApiError::new(
                    ErrorCode::UnknownField,
                    format!("a query parameter without a name (\"={value}\"); give name=value"),
                ));
            }
            if !allowed.contains(&name.as_ref()) {
                let accepted = if allowed.is_empty() {
                    "this endpoint takes none".to_string()
                } else {
                    format!("accepted: {}", allowed.join(", "))
                };
                return Err(ApiError::for_field(
                    ErrorCode::UnknownField,
                    name.as_ref(),
                    format!("unknown query parameter {name:?} ({accepted})"),
                ));
            }
            if pairs.iter().any(|(n, _)| *n == name) {
                return Err(ApiError::invalid_value(
                    name.as_ref(),
                    format!("the query parameter {name:?} is given more than once"),
                ));
            }
            pairs.push((name.into_owned(), value.into_owned()));
        }
        Ok(Self { pairs })
    }

    /// The value of `name`, if given (possibly empty).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `name`, trimmed; 400 `missing_field` when absent and
    /// `invalid_value` when empty.
    pub fn require(&self, name: &str) -> Result<&str, ApiError> {
        match self.get(name) {
            None => Err(ApiError::missing_field(name)),
            Some(v) => non_empty(name, v),
        }
    }

    /// Like [`require`](Self::require), but absence is fine.
    pub fn optional(&self, name: &str) -> Result<Option<&str>, ApiError> {
        self.get(name).map(|v| non_empty(name, v)).transpose()
    }

    /// A count such as `?limit=N`: 1 to `max`, `default` when absent;
    /// `invalid_value` naming the field and the value otherwise.
    pub fn count(&self, name: &str, max: usize, default: usize) -> Result<usize, ApiError> {
        match self.optional(name)? {
            None => Ok(default),
            Some(s) => s
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid_value(
                        name,
                        format!("{name} must be an integer from 1 to {max}, found {s:?}"),
                    )
                }),
        }
    }
}

fn non_empty<'a>(name: &str, value: &'a str) -> Result<&'a str, ApiError> {
    let value = value.trim();
    if value.is_empty() {
        Err(ApiError::invalid_value(
            name,
            format!("the query parameter {name:?} is empty"),
        ))
    } else {
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(raw: &str, allowed: &[&str]) -> ErrorCode {
        QueryParams::parse(Some(raw), allowed).unwrap_err().code()
    }

    #[test]
    fn decodes_known_parameters() {
        let q = QueryParams::parse(Some("a=x%2Cy&b=+z+&c"), &["a", "b", "c"]).unwrap();
        assert_eq!(q.get("a"), Some("x,y"));
        assert_eq!(q.require("b").unwrap(), "z");
        assert_eq!(q.get("c"), Some(""));
        assert_eq!(q.get("d"), None);
        assert!(QueryParams::parse(None, &[]).unwrap().get("a").is_none());
        assert!(QueryParams::parse(Some("&&"), &[]).is_ok());
    }

    #[test]
    fn a_parameter_without_a_name_is_refused_with_no_field() {
        for raw in ["=", "=x", "a=1&=", "=&a=1"] {
            let e = QueryParams::parse(Some(raw), &["a"]).unwrap_err();
            assert_eq!(
                (e.code(), e.field()),
                (ErrorCode::UnknownField, None),
                "{raw}"
            );
        }
    }

    #[test]
    fn refuses_unknown_duplicate_missing_and_empty() {
        let e = QueryParams::parse(Some("a=1&zz=2"), &["a"]).unwrap_err();
        assert_eq!((e.code(), e.field()), (ErrorCode::UnknownField, Some("zz")));
        assert_eq!(code("a=1&a=2", &["a"]), ErrorCode::InvalidValue);
        let q = QueryParams::parse(Some("a="), &["a", "b"]).unwrap();
        assert_eq!(q.require("a").unwrap_err().code(), ErrorCode::InvalidValue);
        assert_eq!(q.require("b").unwrap_err().code(), ErrorCode::MissingField);
        assert_eq!(q.optional("b").unwrap(), None);
        assert_eq!(q.optional("a").unwrap_err().code(), ErrorCode::InvalidValue);
    }
}
