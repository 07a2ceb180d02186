//! The interface's reasoning without a switch: which switch interface and VLAN each port
//! gets, what it refuses and why, and that a port already where a hook would put it costs no
//! session (the switch here is an address nobody answers on, so any session would fail).

use std::sync::Arc;

use ferric_model::ProvisionState;
use ferric_model::resources::{Node, Port};
use serde_json::json;
use uuid::Uuid;

use super::*;

const FILE: &str = r#"
[networks]
idle = 10
provisioning = 100
cleaning = 101

[tenant_networks]
tenant-a = 200

[ssh]
attempts = 1
retry_delay_ms = 0
connect_timeout = 1

[[switches]]
name = "leaf-1"
switch_id = "52:54:00:00:5E:01"
address = "127.0.0.1"
port = 1
user = "ferric"
private_key_file = "/nonexistent/key"
device_type = "netmiko_arista_eos"
"#;

fn interface(ports: Vec<Port>) -> IronicNetworking {
    let mut settings = NetworkSettings::from_toml(FILE).unwrap();
    settings.ssh.state_dir = Some(tempfile::tempdir().unwrap().keep());
    IronicNetworking {
        hub: Some(Arc::new(SwitchHub::new(settings).unwrap())),
        ports,
    }
}

fn port(link: serde_json::Value, extra: serde_json::Value) -> Port {
    let mut port = Port::new(Uuid::new_v4(), Uuid::new_v4(), "52:54:00:12:34:56");
    port.local_link_connection = link.as_object().unwrap().clone();
    port.extra = extra.as_object().unwrap().clone();
    port
}

fn node() -> Node {
    Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Available)
}

#[test]
fn ports_name_their_switch_by_id_or_name_and_bonds_share_their_lag() {
    let by_id = port(
        json!({"switch_id": "52:54:00:00:5e:01", "port_id": "Ethernet1"}),
        json!({}),
    );
    let mut vif = port(
        json!({"switch_info": "leaf-1", "port_id": "Ethernet2"}),
        json!({}),
    );
    vif.internal_info
        .insert(TENANT_VIF_KEY.into(), json!("tenant-a"));
    let bond = |port_id: &str| {
        port(
            json!({"switch_info": "leaf-1", "port_id": port_id}),
            json!({"switchport": {"mode": "access", "native_vlan": 300, "lag_name": "Port-Channel7"}}),
        )
    };
    let unmanaged = port(json!({"network_type": "unmanaged"}), json!({}));
    let managed = interface(vec![
        by_id,
        vif,
        bond("Ethernet3"),
        bond("Ethernet4"),
        unmanaged,
    ])
    .managed()
    .unwrap();
    let seen: Vec<(String, Option<u16>, usize)> = managed
        .iter()
        .map(|managed| {
            (
                managed.interface.clone(),
                managed.tenant_vlan,
                managed.ports.len(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            ("Ethernet1".to_owned(), None, 1),
            ("Ethernet2".to_owned(), Some(200), 1),
            ("Port-Channel7".to_owned(), Some(300), 2),
        ]
    );
}

#[test]
fn what_cannot_be_configured_is_refused_naming_the_port_and_the_field() {
    let refused = |port: Port| {
        let uuid = port.uuid;
        let error = interface(vec![port]).managed().unwrap_err().to_string();
        assert!(
            error.contains(&uuid.to_string()) || error.contains("bond"),
            "{error}"
        );
        error
    };
    let unknown = refused(port(
        json!({"switch_id": "aa:bb", "port_id": "Ethernet1"}),
        json!({}),
    ));
    assert!(unknown.contains("not in switch_config_file"), "{unknown}");
    let injected = refused(port(
        json!({"switch_info": "leaf-1", "port_id": "Ethernet1; reload"}),
        json!({}),
    ));
    assert!(injected.contains("may hold only"), "{injected}");
    let trunk = refused(port(
        json!({"switch_info": "leaf-1", "port_id": "Ethernet1"}),
        json!({"switchport": {"mode": "trunk", "native_vlan": 5}}),
    ));
    assert!(trunk.contains("trunk"), "{trunk}");
    let mut vif = port(
        json!({"switch_info": "leaf-1", "port_id": "Ethernet1"}),
        json!({}),
    );
    vif.internal_info
        .insert(TENANT_VIF_KEY.into(), json!("tenant-z"));
    let unknown_vif = refused(vif);
    assert!(unknown_vif.contains("tenant-z") && unknown_vif.contains("[tenant_networks]"));
    let without = IronicNetworking {
        hub: None,
        ports: Vec::new(),
    };
    assert!(
        without
            .managed()
            .unwrap_err()
            .to_string()
            .contains("switch_config_file")
    );
}

#[tokio::test]
async fn a_port_already_where_a_hook_puts_it_costs_no_session() {
    let cabled = port(
        json!({"switch_info": "leaf-1", "port_id": "Ethernet1"}),
        json!({}),
    );
    let uuid = cabled.uuid.to_string();
    let networking = interface(vec![cabled]);
    let mut node = node();
    let record = |network: &str, vlan: u16| {
        json!({"leaf-1|Ethernet1": {"switch": "leaf-1", "interface": "Ethernet1",
            "network": network, "vlan": vlan, "ports": [uuid]}})
    };
    node.driver_internal_info
        .insert(RECORD_KEY.into(), record("cleaning", 101));
    // Already on cleaning; nothing recorded on provisioning to remove.
    networking
        .add_network(&mut node, Network::Cleaning)
        .await
        .unwrap();
    networking
        .remove_network(&mut node, Network::Provisioning)
        .await
        .unwrap();
    // A move needs the switch, which does not answer: the failure names it, the port and the
    // command, and the record says the port's state is unknown.
    let error = networking
        .add_network(&mut node, Network::Provisioning)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("Switch leaf-1 (127.0.0.1:1): moving port Ethernet1 to the provisioning network (VLAN 100) failed: cannot reach it over SSH"), "{error}");
    assert!(
        error.contains("`interface Ethernet1; switchport access vlan 100`"),
        "{error}"
    );
    assert!(
        error.contains("The state of Ethernet1 is unknown"),
        "{error}"
    );
    assert_eq!(records(&node)["leaf-1|Ethernet1"].network, "unknown");
}

#[test]
fn the_switch_file_is_checked() {
    let settings = NetworkSettings::from_toml(FILE).unwrap();
    assert_eq!(settings.vlan(Network::Inspection), Some(100));
    assert_eq!(settings.vlan(Network::Cleaning), Some(101));
    assert_eq!(settings.vlan(Network::Idle), Some(10));
    let bad_vlan = NetworkSettings::from_toml("[networks]\nprovisioning = 5000\n").unwrap_err();
    assert!(bad_vlan.contains("5000"), "{bad_vlan}");
    let no_credentials = NetworkSettings::from_toml(
        "[networks]\nprovisioning = 5\n[[switches]]\nname = \"a\"\naddress = \"h\"\nuser = \"u\"\n\
         device_type = \"netmiko_ovs_linux\"\n",
    )
    .unwrap_err();
    assert!(
        no_credentials.contains("private_key_file"),
        "{no_credentials}"
    );
    let unknown_device = NetworkSettings::from_toml(
        "[networks]\nprovisioning = 5\n[[switches]]\nname = \"a\"\naddress = \"h\"\nuser = \"u\"\n\
         password_file = \"/p\"\ndevice_type = \"netmiko_hp_comware\"\n",
    )
    .unwrap_err();
    assert!(
        unknown_device.contains("netmiko_hp_comware"),
        "{unknown_device}"
    );
}
