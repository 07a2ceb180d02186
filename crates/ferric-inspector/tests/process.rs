//! Processing of ramdisk payloads (`ferric_inspector::process`) on fixture inventories.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

use ferric_inspector::process::{AddPorts, ProcessingConfig, ProcessingError, process};
use ferric_model::ProvisionState;
use ferric_model::resources::{Node, Port};
use serde_json::{Value, json};
use uuid::Uuid;

fn fixture() -> Value {
    serde_json::from_str(include_str!("fixtures/qemu.json")).unwrap()
}

fn node() -> Node {
    Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::InspectWait)
}

#[test]
fn scheduler_properties_come_from_the_inventory() {
    let processed = process(&node(), &[], &fixture(), &ProcessingConfig::default()).unwrap();
    assert_eq!(processed.properties["cpus"], 2);
    assert_eq!(processed.properties["cpu_arch"], "x86_64");
    assert_eq!(processed.properties["memory_mb"], 2048);
    // The smallest disk of at least 4 GiB is vdb (10 GiB), minus 1 GiB for partitioning.
    assert_eq!(processed.properties["local_gb"], 9);
    assert_eq!(processed.root_disk.unwrap()["name"], "/dev/vdb");
    // lo is dropped.
    assert_eq!(processed.interfaces.len(), 2);
    assert!(processed.inventory.contains_key("cpu"));
    assert!(!processed.plugin_data.contains_key("inventory"));
    assert_eq!(processed.plugin_data["root_disk"]["name"], "/dev/vdb");
}

#[test]
fn existing_properties_stay_unless_overwriting_is_configured() {
    let mut node = node();
    node.properties.insert("cpus".into(), 64.into());
    node.properties.insert("color".into(), "blue".into());
    let kept = process(&node, &[], &fixture(), &ProcessingConfig::default()).unwrap();
    assert_eq!(kept.properties["cpus"], 64);
    assert_eq!(kept.properties["color"], "blue");
    assert!(!kept.updated.contains(&"cpus"));
    assert!(kept.updated.contains(&"memory_mb"));

    let config = ProcessingConfig {
        overwrite_existing: true,
        ..ProcessingConfig::default()
    };
    let replaced = process(&node, &[], &fixture(), &config).unwrap();
    assert_eq!(replaced.properties["cpus"], 2);
    assert_eq!(replaced.properties["color"], "blue");
}

#[test]
fn root_device_hints_choose_the_disk() {
    let mut node = node();
    node.properties
        .insert("root_device".into(), json!({"serial": "disk-a"}));
    let processed = process(&node, &[], &fixture(), &ProcessingConfig::default()).unwrap();
    assert_eq!(processed.properties["local_gb"], 19);

    node.properties.insert(
        "root_device".into(),
        json!({"size": ">= 15", "rotational": true}),
    );
    let processed = process(&node, &[], &fixture(), &ProcessingConfig::default()).unwrap();
    assert_eq!(processed.root_disk.unwrap()["name"], "/dev/vda");

    node.properties
        .insert("root_device".into(), json!({"name": "/dev/nvme0n1"}));
    let error = process(&node, &[], &fixture(), &ProcessingConfig::default()).unwrap_err();
    assert!(
        matches!(error, ProcessingError::NoRootDisk { .. }),
        "{error}"
    );

    let config = ProcessingConfig {
        disk_partitioning_spacing: false,
        ..ProcessingConfig::default()
    };
    let processed = process(&self::node(), &[], &fixture(), &config).unwrap();
    assert_eq!(processed.properties["local_gb"], 10);
}

#[test]
fn ports_follow_add_ports() {
    let pxe = process(&node(), &[], &fixture(), &ProcessingConfig::default()).unwrap();
    assert_eq!(pxe.new_ports, vec![("52:54:00:12:34:01".to_owned(), true)]);

    let all = ProcessingConfig {
        add_ports: AddPorts::All,
        ..ProcessingConfig::default()
    };
    let processed = process(&node(), &[], &fixture(), &all).unwrap();
    assert_eq!(
        processed.new_ports,
        vec![
            ("52:54:00:12:34:01".to_owned(), true),
            ("52:54:00:12:34:02".to_owned(), false)
        ]
    );

    // Ports that exist are not created again.
    let node = node();
    let existing = Port::new(Uuid::new_v4(), node.uuid, "52:54:00:12:34:01");
    let processed = process(&node, &[existing], &fixture(), &all).unwrap();
    assert_eq!(
        processed.new_ports,
        vec![("52:54:00:12:34:02".to_owned(), false)]
    );

    let disabled = ProcessingConfig {
        add_ports: AddPorts::Disabled,
        ..ProcessingConfig::default()
    };
    assert!(
        process(&node, &[], &fixture(), &disabled)
            .unwrap()
            .new_ports
            .is_empty()
    );

    // Without a PXE MAC, `pxe` falls back to the NICs with an address.
    let mut payload = fixture();
    payload.as_object_mut().unwrap().remove("boot_interface");
    payload["inventory"]["boot"]
        .as_object_mut()
        .unwrap()
        .remove("pxe_interface");
    let processed = process(&node, &[], &payload, &ProcessingConfig::default()).unwrap();
    assert_eq!(
        processed.new_ports,
        vec![("52:54:00:12:34:01".to_owned(), true)]
    );
}

#[test]
fn bad_data_and_ramdisk_errors_fail_with_their_message() {
    let mut payload = fixture();
    payload["error"] = json!("Disk /dev/vda is on fire");
    let error = process(&node(), &[], &payload, &ProcessingConfig::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "The inspection ramdisk reported an error: Disk /dev/vda is on fire"
    );

    let mut payload = fixture();
    payload["inventory"]["interfaces"] = json!([{"name": "lo", "mac_address": "00:00:00:00:00:00"},
                                                 {"name": "eth0", "mac_address": "not-a-mac"}]);
    let error = process(&node(), &[], &payload, &ProcessingConfig::default()).unwrap_err();
    assert!(matches!(error, ProcessingError::Invalid(_)), "{error}");
    // Out-of-band data (a BMC listing no usable NIC) may go without: no ports, the rest done.
    let optional = ProcessingConfig {
        require_interfaces: false,
        ..ProcessingConfig::default()
    };
    let processed = process(&node(), &[], &payload, &optional).unwrap();
    assert!(processed.interfaces.is_empty() && processed.new_ports.is_empty());
    assert_eq!(processed.properties["cpus"], 2);
    payload["inventory"]
        .as_object_mut()
        .unwrap()
        .remove("interfaces");
    assert!(process(&node(), &[], &payload, &optional).is_ok());

    for payload in [json!([]), json!({"inventory": "x"}), json!({})] {
        assert!(process(&node(), &[], &payload, &ProcessingConfig::default()).is_err());
    }
}

#[test]
fn no_disk_means_zero_local_gb() {
    let mut payload = fixture();
    payload["inventory"]["disks"] = json!([]);
    let processed = process(&node(), &[], &payload, &ProcessingConfig::default()).unwrap();
    assert_eq!(processed.properties["local_gb"], 0);
    assert!(processed.root_disk.is_none());
}

#[test]
fn lldp_a_nic_reported_is_parsed_into_plugin_data() {
    let mut payload = fixture();
    assert!(
        !process(&node(), &[], &payload, &ProcessingConfig::default())
            .unwrap()
            .plugin_data
            .contains_key("parsed_lldp"),
        "no LLDP, no parsed_lldp"
    );
    let interfaces = payload["inventory"]["interfaces"].as_array_mut().unwrap();
    let nic = interfaces
        .iter_mut()
        .find(|interface| interface["name"] != "lo")
        .unwrap();
    // Chassis ID (MAC), port ID (interface name), TTL, system name, End: as the lab sends.
    nic["lldp"] = json!([
        [1, "04b27988e572d7"],
        [2, "056665727269632d74617033"],
        [3, "0078"],
        [5, "6665727269632d65326521"],
        [0, ""],
    ]);
    let name = nic["name"].as_str().unwrap().to_owned();
    let processed = process(&node(), &[], &payload, &ProcessingConfig::default()).unwrap();
    assert_eq!(
        processed.plugin_data["parsed_lldp"],
        json!({name.clone(): {
            "switch_chassis_id": "b2:79:88:e5:72:d7",
            "switch_port_id": "ferric-tap3",
            "switch_system_name": "ferric-e2e!",
        }})
    );
    // The raw TLVs stay in the stored inventory.
    assert_eq!(
        processed.inventory["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|interface| interface["name"] == name.as_str())
            .unwrap()["lldp"][0],
        json!([1, "04b27988e572d7"])
    );
}
