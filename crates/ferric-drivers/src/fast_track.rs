//! Fast track (`reference/ironic.md` §3): when the agent is already running on a machine, a
//! ramdisk phase uses it as it is instead of rebooting the machine into a fresh one.
//!
//! A node is *fast-track-able* when fast track is on (site setting `fast_track`, or the node's
//! own `driver_info.fast_track`, which wins) and it has no `last_error`. It is actually fast
//! tracked when, in addition, the agent is alive — Ferric knows its URL and token and its
//! last heartbeat is younger than the agent heartbeat timeout — and the BMC says the machine
//! is on. Then:
//! - the `direct` deploy interface's `deploy` step and the preparation of cleaning skip the
//!   network-boot set-up and the reboot, and go straight to the agent's steps;
//! - cleaning and inspection leave the machine powered on with its agent (so the next phase
//!   can be fast tracked); only the network boot is removed.
//!
//! Aborts, failures and tear-down still power the machine off and forget the agent.

use std::time::Duration;

use chrono::{DateTime, Utc};
use ferric_model::resources::{Node, PowerState};
use serde_json::Value;

use crate::DriverError;
use crate::interfaces::PowerInterface;

/// `driver_internal_info` key of the agent's last heartbeat (RFC 3339), written by the
/// conductor.
pub const LAST_HEARTBEAT_KEY: &str = "agent_last_heartbeat";

/// The site's fast-track settings.
#[derive(Debug, Clone, Copy)]
pub struct FastTrackSettings {
    /// `fast_track`: off by default, as Ironic's `[deploy]fast_track`.
    pub enabled: bool,
    /// How old the agent's last heartbeat may be for it to count as alive
    /// (`agent_heartbeat_timeout`).
    pub timeout: Duration,
}

impl Default for FastTrackSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            timeout: Duration::from_secs(300),
        }
    }
}

/// Whether fast track is on for `node`: its `driver_info.fast_track` (a boolean, or the
/// strings `true`/`false`, `yes`/`no`, `1`/`0`) when set, else the site's setting.
pub fn enabled(node: &Node, site: bool) -> bool {
    match node.driver_info.get("fast_track") {
        Some(Value::Bool(value)) => *value,
        Some(Value::String(text)) => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "1" | "on" => true,
            "false" | "no" | "0" | "off" => false,
            _ => site,
        },
        _ => site,
    }
}

/// Whether the node's agent counts as alive at `now`: known URL and token, and a heartbeat
/// no older than `timeout`.
pub fn agent_alive(node: &Node, timeout: Duration, now: DateTime<Utc>) -> bool {
    let info = &node.driver_internal_info;
    let known = ["agent_url", "agent_secret_token"].iter().all(|key| {
        info.get(*key)
            .and_then(Value::as_str)
            .is_some_and(|v| !v.is_empty())
    });
    let Some(last) = info
        .get(LAST_HEARTBEAT_KEY)
        .and_then(Value::as_str)
        .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
    else {
        return false;
    };
    let age = now.signed_duration_since(last.with_timezone(&Utc));
    known && age >= chrono::Duration::zero() && age.to_std().is_ok_and(|age| age <= timeout)
}

/// Fast-track-able, before asking the BMC: enabled for the node, no `last_error`, and its
/// agent alive now.
pub fn candidate(node: &Node, settings: &FastTrackSettings) -> bool {
    keeps_agent(node, settings) && agent_alive(node, settings.timeout, Utc::now())
}

/// Whether the end of a ramdisk phase (cleaning, inspection) leaves the machine on with its
/// agent: fast track enabled for the node and no `last_error` (a failed phase powers off).
pub fn keeps_agent(node: &Node, settings: &FastTrackSettings) -> bool {
    enabled(node, settings.enabled) && node.last_error.as_deref().is_none_or(str::is_empty)
}

/// Whether this ramdisk phase may use the running agent instead of a reboot: a
/// [`candidate`] whose BMC says the machine is on. A BMC that cannot answer means no.
pub async fn usable(
    node: &Node,
    settings: &FastTrackSettings,
    power: &dyn PowerInterface,
) -> Result<bool, DriverError> {
    if !candidate(node, settings) {
        return Ok(false);
    }
    Ok(power.get_power_state(node).await? == PowerState::On)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(info: Value, internal: Value) -> Node {
        let mut node = Node::new(
            uuid::Uuid::nil(),
            "fake-hardware",
            ferric_model::ProvisionState::Manageable,
        );
        node.driver_info = info.as_object().cloned().unwrap_or_default();
        node.driver_internal_info = internal.as_object().cloned().unwrap_or_default();
        node
    }

    fn alive_agent(at: DateTime<Utc>) -> Value {
        json!({
            "agent_url": "http://10.0.0.5:9999",
            "agent_secret_token": "t".repeat(43),
            LAST_HEARTBEAT_KEY: at.to_rfc3339(),
        })
    }

    #[test]
    fn the_node_setting_wins_over_the_site_setting() {
        let plain = node(json!({}), json!({}));
        assert!(!enabled(&plain, false));
        assert!(enabled(&plain, true));
        assert!(enabled(
            &node(json!({"fast_track": true}), json!({})),
            false
        ));
        assert!(enabled(
            &node(json!({"fast_track": "Yes"}), json!({})),
            false
        ));
        assert!(!enabled(
            &node(json!({"fast_track": false}), json!({})),
            true
        ));
        assert!(!enabled(&node(json!({"fast_track": "0"}), json!({})), true));
        // Unreadable values fall back to the site's setting.
        assert!(enabled(
            &node(json!({"fast_track": "maybe"}), json!({})),
            true
        ));
    }

    #[test]
    fn an_agent_is_alive_only_with_a_recent_heartbeat_a_url_and_a_token() {
        let now = Utc::now();
        let timeout = Duration::from_secs(300);
        let recent = node(json!({}), alive_agent(now - chrono::Duration::seconds(299)));
        assert!(agent_alive(&recent, timeout, now));
        let stale = node(json!({}), alive_agent(now - chrono::Duration::seconds(301)));
        assert!(!agent_alive(&stale, timeout, now));
        let mut forgotten = recent.clone();
        forgotten.driver_internal_info.remove("agent_secret_token");
        assert!(!agent_alive(&forgotten, timeout, now));
        let mut no_url = recent.clone();
        no_url.driver_internal_info.remove("agent_url");
        assert!(!agent_alive(&no_url, timeout, now));
        let never = node(
            json!({}),
            json!({"agent_url": "http://x", "agent_secret_token": "t"}),
        );
        assert!(!agent_alive(&never, timeout, now));
        let future = node(json!({}), alive_agent(now + chrono::Duration::seconds(60)));
        assert!(!agent_alive(&future, timeout, now));
    }

    #[test]
    fn a_node_with_an_error_is_not_fast_tracked() {
        let settings = FastTrackSettings {
            enabled: true,
            ..FastTrackSettings::default()
        };
        let mut ready = node(json!({}), alive_agent(Utc::now()));
        assert!(candidate(&ready, &settings));
        ready.last_error = Some("cleaning failed".into());
        assert!(!candidate(&ready, &settings));
        let off = node(json!({"fast_track": false}), alive_agent(Utc::now()));
        assert!(!candidate(&off, &settings));
    }
}
