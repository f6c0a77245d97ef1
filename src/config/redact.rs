//! The config as it may be shown outside the controller: its TOML structure
//! with every secret value replaced by [`REDACTED`]. The secrets are the API
//! tokens' hashes (`http.tokens[].sha256`) and the MQTT password
//! (`mqtt.password`); key and certificate files are named by their paths,
//! which stay, and their contents are never in the config.
//!
//! Pure: it must not read files, nor decide who may see what.

/// What a secret value is replaced with.
pub const REDACTED: &str = "<redacted>";

/// Replaces every secret in `table` with [`REDACTED`]; returns their paths.
pub fn redact(table: &mut toml::Table) -> Vec<String> {
    let mut paths = Vec::new();
    if let Some(toml::Value::Table(http)) = table.get_mut("http") {
        if let Some(toml::Value::Array(tokens)) = http.get_mut("tokens") {
            for (i, token) in tokens.iter_mut().enumerate() {
                if let Some(t) = token.as_table_mut() {
                    if hide(t, "sha256") {
                        paths.push(format!("http.tokens[{i}].sha256"));
                    }
                }
            }
        }
    }
    if let Some(toml::Value::Table(mqtt)) = table.get_mut("mqtt") {
        if hide(mqtt, "password") {
            paths.push("mqtt.password".into());
        }
    }
    paths
}

fn hide(table: &mut toml::Table, key: &str) -> bool {
    match table.get_mut(key) {
        Some(v) => {
            *v = toml::Value::String(REDACTED.into());
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_and_passwords_go_paths_stay() {
        let mut t: toml::Table = r#"
[http]
[[http.tokens]]
name = "a"
sha256 = "00ff"
[[http.tokens]]
name = "b"
sha256 = "11ee"
[mqtt]
url = "mqtts://broker"
password = "hunter2"
client_key_file = "/etc/sitegate/key.pem"
"#
        .parse()
        .expect("toml");
        let paths = redact(&mut t);
        assert_eq!(
            paths,
            [
                "http.tokens[0].sha256",
                "http.tokens[1].sha256",
                "mqtt.password"
            ]
        );
        let text = toml::to_string(&t).expect("render");
        for secret in ["00ff", "11ee", "hunter2"] {
            assert!(!text.contains(secret), "{text}");
        }
        assert!(text.contains("/etc/sitegate/key.pem"), "{text}");
        assert!(text.contains("name = \"b\""), "{text}");
    }
}
