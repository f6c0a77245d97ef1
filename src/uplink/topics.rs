//! The topic names of the uplink (`docs/mqtt.md`), built from one root `{prefix}/{gatewayId}`.
//!
//! Only this file spells topics. It is pure: no I/O, no client.

/// Every topic the uplink uses, under one root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topics {
    root: String,
}

impl Topics {
    /// `prefix` and `gateway_id` are validated by config (no wildcards).
    pub fn new(prefix: &str, gateway_id: &str) -> Self {
        Self {
            root: format!("{prefix}/{gateway_id}"),
        }
    }

    pub fn root(&self) -> &str {
        &self.root
    }

    /// Retained `{"online", ...}`; also the last will's topic.
    pub fn status(&self) -> String {
        format!("{}/status", self.root)
    }

    /// Retained device listing (the body of `GET /devices`).
    pub fn devices(&self) -> String {
        format!("{}/devices", self.root)
    }

    /// Measurement batches of one device.
    pub fn measurements(&self, device_reference: &str) -> String {
        format!("{}/devices/{device_reference}/measurements", self.root)
    }

    /// Retained steering state of one site.
    pub fn steering(&self, site_reference: &str) -> String {
        format!("{}/sites/{site_reference}/steering", self.root)
    }

    /// Where RPC requests arrive.
    pub fn rpc_request(&self) -> String {
        format!("{}/rpc/request", self.root)
    }

    /// Where the answer to request `id` goes when the request named no response
    /// topic. `id` must satisfy [`valid_rpc_id`].
    pub fn rpc_response(&self, id: &str) -> String {
        format!("{}/rpc/response/{id}", self.root)
    }

    /// Where operations-channel requests arrive (`/admin/...` only); its own
    /// subtree, so a broker ACL can grant it apart from `rpc/`.
    pub fn ops_request(&self) -> String {
        format!("{}/ops/request", self.root)
    }

    /// The answer to ops-channel request `id` without a response topic.
    pub fn ops_response(&self, id: &str) -> String {
        format!("{}/ops/response/{id}", self.root)
    }

    /// Every state an operation `id` enters (`docs/mqtt.md`, "Operations").
    pub fn ops_state(&self, id: &str) -> String {
        format!("{}/ops/state/{id}", self.root)
    }

    /// The chunks of the bundle of operation `id`.
    pub fn ops_bundle(&self, id: &str) -> String {
        format!("{}/ops/bundle/{id}", self.root)
    }
}

/// An RPC id becomes a topic level: it must be non-empty, at most 128 bytes, and
/// free of `/`, `+`, `#` and NUL.
pub fn valid_rpc_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 128 && !id.contains(['/', '+', '#', '\0'])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_follow_the_contract() {
        let t = Topics::new("sitegate", "ctrl-1");
        assert_eq!(t.status(), "sitegate/ctrl-1/status");
        assert_eq!(t.devices(), "sitegate/ctrl-1/devices");
        assert_eq!(
            t.measurements("dvc_pv1"),
            "sitegate/ctrl-1/devices/dvc_pv1/measurements"
        );
        assert_eq!(
            t.steering("ste_home"),
            "sitegate/ctrl-1/sites/ste_home/steering"
        );
        assert_eq!(t.rpc_request(), "sitegate/ctrl-1/rpc/request");
        assert_eq!(t.rpc_response("r1"), "sitegate/ctrl-1/rpc/response/r1");
        assert_eq!(t.ops_request(), "sitegate/ctrl-1/ops/request");
        assert_eq!(t.ops_response("o1"), "sitegate/ctrl-1/ops/response/o1");
        assert_eq!(t.ops_state("o1"), "sitegate/ctrl-1/ops/state/o1");
        assert_eq!(t.ops_bundle("o1"), "sitegate/ctrl-1/ops/bundle/o1");
    }

    #[test]
    fn rpc_ids_that_would_break_a_topic_are_refused() {
        assert!(valid_rpc_id("abc-123_x.y"));
        for bad in ["", "a/b", "a+", "#", "x\0"] {
            assert!(!valid_rpc_id(bad), "{bad:?}");
        }
        assert!(!valid_rpc_id(&"x".repeat(129)));
    }
}
