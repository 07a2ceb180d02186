//! Each dialect's exact commands, and its parser against a recorded answer in the device's
//! shape (`fixtures/`, see the module comment for where the shapes come from).

use std::collections::BTreeMap;

use super::{DEVICE_TYPES, DeviceType};

fn lines(lines: &[&str]) -> Vec<String> {
    lines.iter().map(|line| (*line).to_owned()).collect()
}

/// What one recorded answer says: the first port on VLAN 101, the second on none.
fn expect(first: &str, second: &str) -> BTreeMap<String, Option<u16>> {
    BTreeMap::from([(first.to_owned(), Some(101)), (second.to_owned(), None)])
}

#[test]
fn open_vswitch_commands_and_read_back() {
    let ovs = DeviceType::Ovs;
    assert_eq!(
        ovs.set_access("p1", 101, None),
        lines(&[
            "ovs-vsctl set port p1 vlan_mode=access",
            "ovs-vsctl set port p1 tag=101",
        ])
    );
    assert_eq!(
        ovs.clear("p1", Some(101)),
        lines(&[
            "ovs-vsctl clear port p1 tag",
            "ovs-vsctl clear port p1 trunks",
            "ovs-vsctl clear port p1 vlan_mode",
        ])
    );
    assert_eq!(
        ovs.read(&["p1", "p2"]),
        lines(&["ovs-vsctl --format=json --columns=name,tag list port p1 p2"])
    );
    assert_eq!(
        ovs.wrap(&ovs.set_access("p1", 101, None)),
        "set -e\novs-vsctl set port p1 vlan_mode=access\novs-vsctl set port p1 tag=101\n"
    );
    let answer = include_str!("fixtures/ovs_list_port.json");
    assert_eq!(
        ovs.parse(&["p1", "p2"], answer).unwrap(),
        expect("p1", "p2")
    );
}

#[test]
fn cisco_ios_commands_and_read_back() {
    let ios = DeviceType::CiscoIos;
    assert_eq!(
        ios.wrap(&ios.set_access("GigabitEthernet1/0/1", 101, None)),
        "configure terminal\ninterface GigabitEthernet1/0/1\nswitchport access vlan 101\nend\n\
         copy running-config startup-config\n"
    );
    assert_eq!(
        ios.clear("GigabitEthernet1/0/1", Some(101)),
        lines(&[
            "interface GigabitEthernet1/0/1",
            "no switchport access vlan"
        ])
    );
    assert_eq!(
        ios.read(&["GigabitEthernet1/0/1"]),
        lines(&["show running-config interface GigabitEthernet1/0/1"])
    );
    let answer = include_str!("fixtures/cisco_ios_show_running_config.txt");
    let ports = ["GigabitEthernet1/0/1", "GigabitEthernet1/0/2"];
    assert_eq!(
        ios.parse(&ports, answer).unwrap(),
        expect(ports[0], ports[1])
    );
}

#[test]
fn cisco_nxos_commands_and_read_back() {
    let nxos = DeviceType::CiscoNxos;
    assert_eq!(
        nxos.set_access("Ethernet1/1", 101, None),
        lines(&[
            "interface Ethernet1/1",
            "switchport mode access",
            "switchport access vlan 101",
        ])
    );
    assert_eq!(
        nxos.clear("Ethernet1/1", Some(101)),
        lines(&["interface Ethernet1/1", "no switchport access vlan"])
    );
    assert_eq!(
        nxos.read(&["Ethernet1/1", "Ethernet1/2"]),
        lines(&[
            "show running-config interface Ethernet1/1",
            "show running-config interface Ethernet1/2",
        ])
    );
    let answer = include_str!("fixtures/cisco_nxos_show_running_config.txt");
    let ports = ["Ethernet1/1", "Ethernet1/2"];
    assert_eq!(
        nxos.parse(&ports, answer).unwrap(),
        expect(ports[0], ports[1])
    );
}

#[test]
fn arista_eos_commands_and_read_back() {
    let eos = DeviceType::AristaEos;
    assert_eq!(
        eos.wrap(&eos.set_access("Ethernet1", 101, None)),
        "configure\ninterface Ethernet1\nswitchport access vlan 101\nend\nwrite memory\n"
    );
    assert_eq!(
        eos.clear("Ethernet1", Some(101)),
        lines(&["interface Ethernet1", "no switchport access vlan"])
    );
    assert_eq!(
        eos.read(&["Ethernet1"]),
        lines(&["show running-config interfaces Ethernet1"])
    );
    let answer = include_str!("fixtures/arista_eos_show_running_config.txt");
    let ports = ["Ethernet1", "Ethernet2"];
    assert_eq!(
        eos.parse(&ports, answer).unwrap(),
        expect(ports[0], ports[1])
    );
}

#[test]
fn juniper_junos_commands_and_read_back() {
    let junos = DeviceType::Junos;
    assert_eq!(
        junos.wrap(&junos.set_access("ge-0/0/1", 101, Some(100))),
        "configure private\n\
         delete interfaces ge-0/0/1 unit 0 family ethernet-switching vlan members\n\
         set interfaces ge-0/0/1 unit 0 family ethernet-switching vlan members 101\n\
         commit and-quit\n"
    );
    assert_eq!(
        junos.clear("ge-0/0/1", Some(101)),
        lines(&["delete interfaces ge-0/0/1 unit 0 family ethernet-switching vlan members"])
    );
    assert_eq!(
        junos.read(&["ge-0/0/1"]),
        lines(&["show configuration interfaces ge-0/0/1 | display set"])
    );
    let answer = include_str!("fixtures/junos_show_configuration.txt");
    let ports = ["ge-0/0/1", "ge-0/0/2"];
    assert_eq!(
        junos.parse(&ports, answer).unwrap(),
        expect(ports[0], ports[1])
    );
}

#[test]
fn dell_os10_commands_and_read_back() {
    let os10 = DeviceType::DellOs10;
    assert_eq!(
        os10.wrap(&os10.set_access("ethernet1/1/1", 101, None)),
        "configure terminal\ninterface ethernet1/1/1\nswitchport mode access\n\
         switchport access vlan 101\nend\nwrite memory\n"
    );
    assert_eq!(
        os10.clear("ethernet1/1/1", Some(101)),
        lines(&["interface ethernet1/1/1", "no switchport access vlan"])
    );
    assert_eq!(
        os10.read(&["ethernet1/1/1"]),
        lines(&["show running-configuration interface ethernet1/1/1"])
    );
    let answer = include_str!("fixtures/dell_os10_show_running_configuration.txt");
    let ports = ["ethernet1/1/1", "ethernet1/1/2"];
    assert_eq!(
        os10.parse(&ports, answer).unwrap(),
        expect(ports[0], ports[1])
    );
}

#[test]
fn sonic_commands_and_read_back() {
    let sonic = DeviceType::Sonic;
    assert_eq!(
        sonic.wrap(&sonic.set_access("Ethernet0", 101, Some(100))),
        "set -e\nsudo config vlan member del 100 Ethernet0\n\
         sudo config vlan member add -u 101 Ethernet0\nsudo config save -y\n"
    );
    assert_eq!(
        sonic.set_access("Ethernet0", 101, None),
        lines(&["sudo config vlan member add -u 101 Ethernet0"])
    );
    assert_eq!(
        sonic.clear("Ethernet0", Some(101)),
        lines(&["sudo config vlan member del 101 Ethernet0"])
    );
    assert!(sonic.clear("Ethernet0", None).is_empty());
    assert_eq!(
        sonic.read(&["Ethernet0", "Ethernet4"]),
        lines(&["sonic-cfggen -d --var-json VLAN_MEMBER"])
    );
    // Ethernet4 is a tagged member only: no access VLAN.
    let answer = include_str!("fixtures/sonic_vlan_member.json");
    let ports = ["Ethernet0", "Ethernet4"];
    assert_eq!(
        sonic.parse(&ports, answer).unwrap(),
        expect(ports[0], ports[1])
    );
}

#[test]
fn cumulus_nvue_commands_and_read_back() {
    let cumulus = DeviceType::Cumulus;
    assert_eq!(
        cumulus.wrap(&cumulus.set_access("swp1", 101, None)),
        "set -e\nnv unset interface swp1 bridge domain br_default untagged\n\
         nv set interface swp1 bridge domain br_default access 101\n\
         nv config apply -y\nnv config save\n"
    );
    assert_eq!(
        cumulus.clear("swp1", Some(101)),
        lines(&[
            "nv unset interface swp1 bridge domain br_default access",
            "nv unset interface swp1 bridge domain br_default untagged",
        ])
    );
    assert_eq!(
        cumulus.read(&["swp1"]),
        lines(&[
            "echo '### swp1'",
            "nv show interface swp1 bridge domain br_default -o json",
        ])
    );
    let answer = include_str!("fixtures/cumulus_nv_show.txt");
    let ports = ["swp1", "swp2"];
    assert_eq!(
        cumulus.parse(&ports, answer).unwrap(),
        expect(ports[0], ports[1])
    );
}

#[test]
fn an_answer_that_misses_a_port_or_is_garbled_is_an_error_not_a_guess() {
    let answer = include_str!("fixtures/arista_eos_show_running_config.txt");
    let error = DeviceType::AristaEos
        .parse(&["Ethernet9"], answer)
        .unwrap_err();
    assert!(error.contains("Ethernet9"), "{error}");
    let error = DeviceType::Ovs
        .parse(&["p1"], "ovs-vsctl: no row")
        .unwrap_err();
    assert!(error.contains("not JSON"), "{error}");
    let error = DeviceType::CiscoIos
        .parse(&["Gi1"], "interface Gi1\n switchport access vlan 9999\n")
        .unwrap_err();
    assert!(error.contains("9999"), "{error}");
}

#[test]
fn device_errors_are_found_in_what_the_device_printed() {
    assert_eq!(
        DeviceType::CiscoIos.error_in("interface Gi9/9\n% Invalid input detected at '^' marker.\n"),
        Some("% Invalid input detected at '^' marker.".to_owned())
    );
    assert_eq!(
        DeviceType::Junos.error_in("error: configuration database locked by:\n"),
        Some("error: configuration database locked by:".to_owned())
    );
    assert_eq!(DeviceType::Ovs.error_in("101\n"), None);
}

#[test]
fn device_type_names_are_networking_generic_switch_names() {
    for device in DEVICE_TYPES {
        let parsed: DeviceType =
            serde_json::from_value(serde_json::Value::String(device.as_str().to_owned())).unwrap();
        assert_eq!(parsed, device);
        assert!(device.as_str().starts_with("netmiko_"));
    }
}
