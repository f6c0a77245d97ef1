//! `logging.level`: which filters are taken. A level name, or comma-separated
//! directives `target=level` whose target is sitegate itself (or one of its
//! modules, `sitegate::modbus`) or one of the crates it logs through
//! ([`CRATES`]). Anything else is refused: a tracing filter reads a bare word
//! it does not know (`loud`) as a target, which matches nothing, and the agent
//! would then log nothing at all.
//!
//! Pure: it parses text; the subscriber is built in `logging/`.

/// The levels a filter may name, lowest verbosity first.
pub const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// The crates besides sitegate whose log lines a directive may tune: the
/// Modbus and serial transports, the MQTT client, TLS, and the HTTP server.
pub const CRATES: [&str; 7] = [
    "tokio_modbus",
    "tokio_serial",
    "rumqttc",
    "rustls",
    "hyper",
    "hyper_util",
    "axum",
];

fn is_level(word: &str) -> bool {
    LEVELS.iter().any(|l| l.eq_ignore_ascii_case(word))
}

/// Whether `target` is sitegate, one of its modules, or one of [`CRATES`]
/// (or a module of one).
fn known_target(target: &str) -> bool {
    let mut parts = target.split("::");
    let Some(krate) = parts.next() else {
        return false;
    };
    let known = krate == "sitegate" || CRATES.contains(&krate);
    known
        && parts.all(|p| {
            !p.is_empty()
                && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !p.starts_with(|c: char| c.is_ascii_digit())
        })
}

/// Checks one filter; the message says what is wrong with it, naming the
/// levels and the crates a directive may name.
pub fn check(level: &str) -> Result<(), String> {
    let refuse = |what: String| {
        Err(format!(
            "{what}; a filter is a level ({}) or comma-separated directives target=level whose target is sitegate, a module of it (sitegate::modbus) or one of {}",
            LEVELS.join(", "),
            CRATES.join(", ")
        ))
    };
    if level.trim().is_empty() {
        return refuse(format!("{level:?} names no level"));
    }
    for directive in level.split(',').map(str::trim) {
        if directive.is_empty() {
            return refuse(format!("{level:?} has an empty directive"));
        }
        match directive.split_once('=') {
            None if is_level(directive) => {}
            None => {
                return refuse(format!(
                    "{level:?}: {directive:?} is not a level (it would be read as a target and silence every log line)"
                ))
            }
            Some((target, lvl)) => {
                if !known_target(target.trim()) {
                    return refuse(format!(
                        "{level:?}: {:?} is not sitegate, a module of it, or a crate it logs through",
                        target.trim()
                    ));
                }
                if !is_level(lvl.trim()) {
                    return refuse(format!(
                        "{level:?}: {:?} in {directive:?} is not a level",
                        lvl.trim()
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn levels_and_known_targets_pass_the_rest_is_refused() {
        for ok in [
            "info",
            "DEBUG",
            "off",
            "sitegate=debug",
            "sitegate::modbus=trace,info",
            "tokio_modbus=warn",
            "rumqttc=error, sitegate::uplink::link=debug, warn",
        ] {
            assert_eq!(check(ok), Ok(()), "{ok}");
        }
        for bad in [
            "loud",
            "",
            " ",
            "info,",
            "sitegate=loud",
            "tokio=debug",
            "sitegate::=debug",
            "sitegate::9x=debug",
            "[span]=debug",
            "sitegate[x]=debug",
            "verbose=info",
        ] {
            let e = check(bad).expect_err(bad);
            assert!(e.contains("off, error, warn, info, debug, trace"), "{e}");
        }
    }
}
