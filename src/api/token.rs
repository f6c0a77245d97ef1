//! API tokens: making new ones, hashing, and comparing hashes in constant time.
//!
//! The plaintext of a token exists only in [`NewToken`] (printed once by the CLI)
//! and in requests; the config holds its SHA-256. Nothing here reads config or
//! requests: `auth.rs` does that.

use sha2::{Digest, Sha256};

use crate::config::Scope;

/// What every token starts with: easy to spot in logs and secret scanners.
pub const TOKEN_PREFIX: &str = "sgt_";

/// A freshly made token: the plaintext to hand out and the hash to configure.
#[derive(Clone, PartialEq, Eq)]
pub struct NewToken {
    /// `sgt_` followed by 64 lowercase hex characters (32 random bytes).
    pub plaintext: String,
    /// SHA-256 of `plaintext`, 64 lowercase hex characters.
    pub sha256_hex: String,
}

impl std::fmt::Debug for NewToken {
    // Keeps the plaintext out of logs and panic messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewToken")
            .field("plaintext", &"<redacted>")
            .field("sha256_hex", &self.sha256_hex)
            .finish()
    }
}

/// Makes a token from 32 bytes of the operating system's randomness.
///
/// Fails only when the OS has no randomness to give, which the CLI reports.
pub fn new_token() -> Result<NewToken, getrandom::Error> {
    let mut secret = [0u8; 32];
    getrandom::fill(&mut secret)?;
    let plaintext = format!("{TOKEN_PREFIX}{}", hex::encode(secret));
    let sha256_hex = hex::encode(hash_token(&plaintext));
    Ok(NewToken {
        plaintext,
        sha256_hex,
    })
}

/// SHA-256 of a token's plaintext, as configured in `[[http.tokens]].sha256`.
pub fn hash_token(plaintext: &str) -> [u8; 32] {
    Sha256::digest(plaintext.as_bytes()).into()
}

/// Compares two hashes without an early exit, so the time taken does not say how
/// many leading bytes matched.
pub fn hashes_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The `[[http.tokens]]` block to paste into the config for a new token.
pub fn token_config_snippet(name: &str, scopes: &[Scope], token: &NewToken) -> String {
    // toml's Display quotes and escapes a string value.
    let name = toml::Value::String(name.to_string());
    let scopes: Vec<String> = scopes.iter().map(|s| format!("{:?}", s.as_str())).collect();
    format!(
        "[[http.tokens]]\nname = {name}\nsha256 = \"{}\"\nscopes = [{}]\n",
        token.sha256_hex,
        scopes.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_tokens_are_prefixed_random_and_hash_to_their_hex() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_ne!(a.plaintext, b.plaintext);
        assert!(a.plaintext.starts_with(TOKEN_PREFIX));
        assert_eq!(a.plaintext.len(), TOKEN_PREFIX.len() + 64);
        assert_eq!(hex::encode(hash_token(&a.plaintext)), a.sha256_hex);
        assert!(!format!("{a:?}").contains(&a.plaintext));
    }

    #[test]
    fn hash_matches_a_known_digest() {
        assert_eq!(
            hex::encode(hash_token("test")),
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
    }

    #[test]
    fn equal_hashes_compare_equal_and_one_bit_differs() {
        let a = hash_token("x");
        let mut b = a;
        assert!(hashes_equal(&a, &b));
        b[31] ^= 1;
        assert!(!hashes_equal(&a, &b));
    }

    #[test]
    fn snippet_is_config_that_parses_back() {
        let token = new_token().unwrap();
        let snippet = token_config_snippet("ops \"team\"", &[Scope::Read, Scope::Steer], &token);
        let text = format!(
            "[storage]\npath = \"/tmp/x.db\"\n[http]\nlisten = [\"127.0.0.1:8080\"]\n{snippet}"
        );
        let config = crate::config::parse(&text).unwrap();
        let t = &config.http.tokens[0];
        assert_eq!(t.name, "ops \"team\"");
        assert_eq!(t.scopes, vec![Scope::Read, Scope::Steer]);
        assert_eq!(t.sha256, hash_token(&token.plaintext));
    }
}
