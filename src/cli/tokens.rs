//! `sitegate token list`: the API tokens a config holds, by name, with
//! their scopes and the start of their hash; a placeholder hash is said to
//! let nobody in. Only hashes are in the config, so no token is shown.

use std::path::Path;
use std::process::ExitCode;

use sitegate::config::{AuthMode, Config};

use super::{load_config, say};

/// The listing of `config`'s tokens, a line each after a heading line.
pub fn listing(config: &Config, file: &Path) -> Vec<String> {
    let tokens = &config.http.tokens;
    let auth = match config.http.auth {
        AuthMode::Tokens => "auth = \"tokens\"",
        AuthMode::None => "auth = \"none\" (tokens are not asked for)",
    };
    let mut out = vec![format!(
        "{} token{} in {}, {auth}",
        tokens.len(),
        if tokens.len() == 1 { "" } else { "s" },
        file.display()
    )];
    let width = tokens.iter().map(|t| t.name.len()).max().unwrap_or(0);
    for t in tokens {
        let scopes: Vec<&str> = t.scopes.iter().map(|s| s.as_str()).collect();
        let mut line = format!(
            "{:width$}  {:16}  sha256 {}…",
            t.name,
            scopes.join(","),
            &hex::encode(t.sha256)[..16]
        );
        if t.is_placeholder() {
            line.push_str(&format!(
                "  placeholder: no token matches it (`sitegate token new --name {}`)",
                t.name
            ));
        }
        out.push(line);
    }
    out
}

pub fn token_list(file: &Path) -> ExitCode {
    let config = match load_config(file) {
        Ok(c) => c,
        Err(code) => return code,
    };
    for line in listing(&config, file) {
        say(&line);
    }
    ExitCode::SUCCESS
}
