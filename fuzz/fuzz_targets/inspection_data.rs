//! What an inspection ramdisk posts (`/v1/continue_inspection`, the inspection service's
//! `/v1/continue`): the agent's inventory and plugin data, processed for a node whose root
//! device hints may also be anything an operator wrote, then looked up by MAC and BMC address
//! and run through introspection rules. Input: a JSON payload, or `[properties, payload]`.
//! Invariant: no panic; every port to add has a canonical MAC.
#![no_main]

use std::sync::LazyLock;

use ferric_inspector::mac::normalize_mac;
use ferric_inspector::process::{self, AddPorts, ProcessingConfig};
use ferric_inspector::rules::{Rule, apply_rules};
use ferric_model::ProvisionState;
use ferric_model::resources::{Node, Port};
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};
use uuid::Uuid;

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    [
        json!({
            "conditions": [
                {"op": "ge", "field": "inventory.cpu.count", "value": 2},
                {"op": "in-net", "field": "inventory.interfaces[*].ipv4_address",
                 "value": "10.0.0.0/24", "multiple": "any"},
                {"op": "matches", "field": "data://inventory.system_vendor.manufacturer",
                 "value": "QEM."}
            ],
            "actions": [
                {"action": "set-attribute", "path": "/extra/vendor",
                 "value": "{data[inventory][system_vendor][manufacturer]}"},
                {"action": "extend-attribute", "path": "/extra/disks",
                 "value": "{data[inventory][disks][0][name]}"},
                {"action": "add-trait", "name": "CUSTOM_QEMU"},
                {"action": "set-capability", "name": "boot_mode", "value": "uefi"}
            ]
        }),
        json!({
            "conditions": [
                {"op": "contains", "field": "inventory.interfaces[*].name", "value": "eth",
                 "multiple": "all"},
                {"op": "is-empty", "field": "inventory.bmc_address"},
                {"op": "eq", "field": "node://properties.cpu_arch", "value": "x86_64"}
            ],
            "actions": [{"action": "remove-trait", "name": "CUSTOM_QEMU"}]
        }),
    ]
    .iter()
    .map(|body| Rule::from_body(body).expect("a valid rule"))
    .collect()
});

fuzz_target!(|data: &[u8]| {
    let Some((&flags, json)) = data.split_first() else {
        return;
    };
    let Ok(input) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let (properties, payload) = match input {
        Value::Array(mut pair) if pair.len() == 2 => {
            let payload = pair.pop().unwrap_or_default();
            (pair.pop().unwrap_or_default(), payload)
        }
        payload => (Value::Null, payload),
    };
    let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::Inspecting);
    if let Value::Object(properties) = properties {
        node.properties = properties;
    }
    let ports = [Port::new(Uuid::nil(), node.uuid, "52:54:00:00:00:01")];
    let config = ProcessingConfig {
        add_ports: [
            AddPorts::Pxe,
            AddPorts::Active,
            AddPorts::All,
            AddPorts::Disabled,
        ][usize::from(flags & 3)],
        overwrite_existing: flags & 4 != 0,
        disk_partitioning_spacing: flags & 8 != 0,
        require_interfaces: flags & 16 != 0,
    };
    for mac in process::payload_macs(&payload) {
        assert_eq!(normalize_mac(&mac).as_deref(), Some(mac.as_str()));
    }
    let _ = process::payload_bmc_addresses(&payload);
    if let Ok(processed) = process::process(&node, &ports, &payload, &config) {
        for (mac, _) in &processed.new_ports {
            assert_eq!(normalize_mac(mac).as_deref(), Some(mac.as_str()));
        }
        node.properties = processed.properties;
    }
    let _ = apply_rules(&RULES, &mut node, &payload);
});
