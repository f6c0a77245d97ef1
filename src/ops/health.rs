//! Whether the agent is healthy on a config on trial: it runs (this code
//! runs in it, behind an API that answers), the uplink is connected again
//! when `[mqtt]` is configured, and every device that was online before the
//! change is online again. Pure: the observations are passed in.
//!
//! It must not wait, restore or record anything.

/// `Ok` when healthy; otherwise what is missing, as one sentence.
pub fn verdict(
    watch: &[String],
    online: impl Fn(&str) -> bool,
    uplink: Option<bool>,
) -> Result<(), String> {
    let mut missing = Vec::new();
    if uplink == Some(false) {
        missing.push("the MQTT uplink is not connected".to_string());
    }
    let down: Vec<&str> = watch
        .iter()
        .map(String::as_str)
        .filter(|d| !online(d))
        .collect();
    if !down.is_empty() {
        missing.push(format!(
            "device{} {} online before the change {} not online",
            if down.len() == 1 { "" } else { "s" },
            down.join(", "),
            if down.len() == 1 { "is" } else { "are" },
        ));
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_what_is_missing() {
        let watch = vec!["dvc_a".to_string(), "dvc_b".to_string()];
        assert_eq!(verdict(&watch, |_| true, Some(true)), Ok(()));
        assert_eq!(verdict(&watch, |_| true, None), Ok(()));
        assert_eq!(verdict(&[], |_| false, None), Ok(()));
        assert_eq!(
            verdict(&watch, |d| d == "dvc_a", Some(true)),
            Err("device dvc_b online before the change is not online".into())
        );
        assert_eq!(
            verdict(&watch, |_| false, Some(false)),
            Err("the MQTT uplink is not connected; devices dvc_a, dvc_b online before the change are not online".into())
        );
    }
}
