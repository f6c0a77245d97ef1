//! `http.tls`: `"self-signed"`, or a table `{ cert_file, key_file }`, and
//! `http.tls_names`. Shapes only: the files are read by `Config::file_problems`
//! (`https::pem`), the self-signed certificate is made by `https::self_signed`.

use std::path::PathBuf;

use super::super::problem::Problem;
use super::super::HttpTls;

const SHAPE: &str = "tls = \"self-signed\", or tls = { cert_file = \"/etc/sitegate/cert.pem\", key_file = \"/etc/sitegate/key.pem\" }";

pub(super) fn resolve_tls(
    raw: Option<&toml::Value>,
    names: &[String],
    problems: &mut Vec<Problem>,
) -> Option<HttpTls> {
    for (i, n) in names.iter().enumerate() {
        if !valid_name(n) {
            problems.push(Problem::new(
                format!("http.tls_names[{i}]"),
                format!("{n:?} is not a DNS name (letters, digits, '-' and '.', e.g. \"controller.local\")"),
            ));
        }
    }
    let raw = raw?;
    match raw {
        toml::Value::String(s) if s == "self-signed" => Some(HttpTls::SelfSigned {
            names: names.to_vec(),
        }),
        toml::Value::String(s) => {
            problems.push(Problem::new(
                "http.tls",
                format!("{s:?} is not a certificate source: {SHAPE}"),
            ));
            None
        }
        toml::Value::Table(t) => {
            let file = |key: &str, problems: &mut Vec<Problem>| match t.get(key) {
                Some(toml::Value::String(p)) if !p.trim().is_empty() => Some(PathBuf::from(p)),
                Some(other) => {
                    problems.push(Problem::new(
                        format!("http.tls.{key}"),
                        format!("expected a file path, found {other}"),
                    ));
                    None
                }
                None => {
                    problems.push(Problem::new(
                        format!("http.tls.{key}"),
                        format!("missing: {SHAPE}"),
                    ));
                    None
                }
            };
            for key in t.keys() {
                if key != "cert_file" && key != "key_file" {
                    problems.push(Problem::new(format!("http.tls.{key}"), "unknown key"));
                }
            }
            if !names.is_empty() {
                problems.push(Problem::new(
                    "http.tls_names",
                    "names are for a self-signed certificate; a certificate file has its own",
                ));
            }
            let cert_file = file("cert_file", problems);
            let key_file = file("key_file", problems);
            Some(HttpTls::Files {
                cert_file: cert_file?,
                key_file: key_file?,
            })
        }
        other => {
            problems.push(Problem::new(
                "http.tls",
                format!("expected \"self-signed\" or a table, found {other}: {SHAPE}"),
            ));
            None
        }
    }
}

/// A DNS name as a certificate may hold it.
fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}
