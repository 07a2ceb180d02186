//! The API side of `cargo xtask bench-fleet-deploy` (`fleet_deploy.rs`): each machine's node
//! and port enrolled, what each deploy writes, the fake BMC's power button, and the nodes read
//! back (whether a new agent has heartbeated).

use std::collections::HashMap;

use anyhow::Context;
use serde_json::{Value, json};

use super::machine::Machine;
use super::rack::{self, AGENT_PORT, API_URL, IMAGE_URL, SWITCH};
use crate::{bench_http, fleet};

/// The microversion the tests enroll nodes at (`crates/ferric/tests/glance.rs`).
const VERSION: (&str, &str) = ("X-OpenStack-Ironic-API-Version", "1.68");

/// The switch a machine's port is cabled to: the first half of the rack on one, the second
/// half on another, so that peer delivery has two groups to find.
fn switch_id(index: usize, machines: usize) -> &'static str {
    if index * 2 < machines {
        "52:54:00:00:fb:01"
    } else {
        "52:54:00:00:fb:02"
    }
}

/// Enrolls one machine's node (direct deploy, its disk as the root device) and its port,
/// cabled to one of the rack's two switches; returns the node's UUID.
pub(super) fn enroll(
    agent: &ureq::Agent,
    machine: &Machine,
    machines: usize,
) -> anyhow::Result<String> {
    let index = machine.index;
    let node = json!({
        "name": format!("ffb-{index:02}"),
        "driver": "fake-hardware",
        "deploy_interface": "direct",
        "properties": {"root_device": {"name": machine.disk().display().to_string()}},
    });
    let url = format!("{API_URL}/v1/nodes");
    let (_, created) = fleet::send(&format!("POST {url}"), || {
        agent
            .post(&url)
            .header(VERSION.0, VERSION.1)
            .send_json(&node)
    })?;
    let uuid = created["uuid"]
        .as_str()
        .context("the created node has no uuid")?
        .to_owned();
    let port = json!({
        "node_uuid": uuid,
        "address": rack::agent_mac(index),
        "local_link_connection": {
            "switch_id": switch_id(index, machines),
            "port_id": format!("p{index}"),
            "switch_info": SWITCH,
        },
    });
    let url = format!("{API_URL}/v1/ports");
    fleet::send(&format!("POST {url}"), || {
        agent
            .post(&url)
            .header(VERSION.0, VERSION.1)
            .send_json(&port)
    })?;
    Ok(uuid)
}

/// What the next deploy writes, and the node's own say on peer delivery for it. Set before
/// every deploy: undeploy clears `instance_info`, as in Ironic.
pub(super) fn set_instance_info(
    agent: &ureq::Agent,
    uuid: &str,
    checksum: &str,
    peer: bool,
) -> anyhow::Result<()> {
    let url = format!("{API_URL}/v1/nodes/{uuid}");
    let patch: Vec<Value> = [
        ("image_source", json!(IMAGE_URL)),
        ("image_os_hash_algo", json!("sha256")),
        ("image_os_hash_value", json!(checksum)),
        ("image_peer_delivery", json!(peer)),
    ]
    .into_iter()
    .map(|(key, value)| json!({"op": "add", "path": format!("/instance_info/{key}"), "value": value}))
    .collect();
    fleet::send(&format!("PATCH {url}"), || {
        agent
            .patch(&url)
            .header(VERSION.0, VERSION.1)
            .send_json(&patch)
    })?;
    Ok(())
}

/// The fake BMC's power button: fast track uses a running agent only on a machine that is on.
pub(super) fn power_on(agent: &ureq::Agent, uuid: &str) -> anyhow::Result<()> {
    let url = format!("{API_URL}/v1/nodes/{uuid}/states/power");
    fleet::send(&format!("PUT {url}"), || {
        agent
            .put(&url)
            .header(VERSION.0, VERSION.1)
            .send_json(json!({"target": "power on"}))
    })?;
    Ok(())
}

/// Every node, by UUID, with the fields the bench watches.
pub(super) fn list(agent: &ureq::Agent) -> anyhow::Result<HashMap<String, Value>> {
    let mut nodes = HashMap::new();
    let mut url = Some(format!(
        "{API_URL}/v1/nodes?fields=uuid,provision_state,power_state,last_error,\
         driver_internal_info&limit=1000"
    ));
    while let Some(current) = url {
        let (_, body) = bench_http::timed_get(agent, &current)?;
        for node in body["nodes"].as_array().into_iter().flatten() {
            if let Some(uuid) = node["uuid"].as_str() {
                nodes.insert(uuid.to_owned(), node.clone());
            }
        }
        url = body["next"].as_str().map(str::to_owned);
    }
    Ok(nodes)
}

/// When the node last heard from an agent (`null` if never): an agent's heartbeat is new
/// once this differs from what it was before the agent started.
pub(super) fn last_heartbeat(node: Option<&Value>) -> Value {
    node.map_or(Value::Null, |node| {
        node["driver_internal_info"]["agent_last_heartbeat"].clone()
    })
}

/// Whether machine `index`'s node is on and has heard from its new agent: the agent's URL is
/// the machine's and the last heartbeat is not the one from before the agent started.
pub(super) fn has_heartbeated(node: Option<&Value>, before: &Value, index: usize) -> bool {
    let Some(node) = node else {
        return false;
    };
    let url = format!("https://{}:{AGENT_PORT}", rack::agent_ip(index));
    let heartbeat = last_heartbeat(Some(node));
    node["power_state"] == "power on"
        && node["driver_internal_info"]["agent_url"] == url.as_str()
        && !heartbeat.is_null()
        && heartbeat != *before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_the_rack_is_on_each_switch() {
        let switches: Vec<_> = (0..4).map(|index| switch_id(index, 4)).collect();
        assert_eq!(switches[..2], ["52:54:00:00:fb:01"; 2]);
        assert_eq!(switches[2..], ["52:54:00:00:fb:02"; 2]);
        assert_eq!(switch_id(0, 1), "52:54:00:00:fb:01");
    }

    #[test]
    fn a_heartbeat_counts_once_new_and_from_the_machines_agent() {
        let node = json!({
            "power_state": "power on",
            "driver_internal_info": {
                "agent_url": "https://10.231.1.11:9999",
                "agent_last_heartbeat": "2026-01-01T00:00:02Z",
            },
        });
        let old = json!("2026-01-01T00:00:01Z");
        assert!(has_heartbeated(Some(&node), &old, 1));
        assert!(has_heartbeated(Some(&node), &Value::Null, 1));
        assert!(!has_heartbeated(
            Some(&node),
            &json!("2026-01-01T00:00:02Z"),
            1
        ));
        assert!(!has_heartbeated(Some(&node), &old, 2));
        assert!(!has_heartbeated(None, &old, 1));
        let mut off = node.clone();
        off["power_state"] = json!("power off");
        assert!(!has_heartbeated(Some(&off), &old, 1));
    }
}
