//! The hardware types as data (`reference/ironic.md` §7): per type, the implementations it
//! supports for each interface kind (the first the default) and the `driver_info` keys it
//! understands. Below both the site's enabled implementations (`enabled.rs`), which are
//! checked against these tables, and [`Drivers`](crate::Drivers) (`hardware.rs`), which holds
//! the site's settings and builds a node's interfaces.

use ferric_model::resources::InterfaceKind;

/// A hardware type: a name and, per interface kind, the implementations it supports, the
/// first being the default.
#[derive(Debug)]
pub struct HardwareType {
    pub name: &'static str,
    supported: [&'static [&'static str]; 13],
    /// The `driver_info` keys it understands, with what each means.
    properties: &'static [(&'static str, &'static str)],
}

impl HardwareType {
    /// The implementations of `kind` this type supports, default first.
    pub fn supported(&self, kind: InterfaceKind) -> &'static [&'static str] {
        self.supported[kind as usize]
    }

    /// The `driver_info` keys this type understands (`GET /v1/drivers/{name}/properties`).
    pub fn properties(&self) -> &'static [(&'static str, &'static str)] {
        self.properties
    }

    /// The implementation a node of this type gets for `kind` when it names none and the
    /// site enables everything (the site's choice is
    /// [`Drivers::default_interface`](crate::Drivers::default_interface)).
    pub fn default_interface(&self, kind: InterfaceKind) -> &'static str {
        self.supported(kind).first().copied().unwrap_or("")
    }
}

// Index order follows `InterfaceKind`: bios, boot, console, deploy, firmware, inspect,
// management, network, power, raid, rescue, storage, vendor.
const FAKE_HARDWARE: HardwareType = HardwareType {
    name: "fake-hardware",
    supported: [
        &["fake", "no-bios"],
        &["fake", "ipxe", "pxe"],
        &["fake", "no-console"],
        &["fake", "direct", "ramdisk", "custom-agent", "autodetect"],
        &["fake", "no-firmware"],
        &["fake", "no-inspect", "agent", "inspector"],
        &["fake"],
        &["noop", "flat", "ironic-networking"],
        &["fake"],
        &["fake", "no-raid"],
        &["fake", "no-rescue", "agent"],
        &["noop", "fake"],
        &["fake", "no-vendor"],
    ],
    properties: FAKE_PROPERTIES,
};

const FAKE_PROPERTIES: &[(&str, &str)] = &[
    (
        "fake_delay",
        "Seconds (fractional allowed, at most 60) every fake operation takes. Optional.",
    ),
    (
        "fake_fail",
        "Comma-separated operations that fail: validate, power, management, deploy, clean, \
         service, inspect, rescue, unrescue, tear_down, bios, firmware, raid, vendor. \
         Optional.",
    ),
    (
        "fake_wait",
        "Comma-separated operations that wait for a callback instead of finishing: deploy, \
         clean, service, inspect, rescue, firmware. Optional.",
    ),
];

// Power and boot device are the operator's job (that is the point of the type), so its power
// interface records what it is told; it network-boots the agent and deploys through it like
// any other type, or with the fake deploy interface for demos.
const MANUAL_MANAGEMENT: HardwareType = HardwareType {
    name: "manual-management",
    supported: [
        &["no-bios"],
        &["fake", "ipxe", "pxe"],
        &["no-console"],
        &["fake", "direct", "autodetect"],
        &["no-firmware"],
        &["no-inspect", "agent", "inspector"],
        &["noop", "fake"],
        &["noop", "flat", "ironic-networking"],
        &["fake"],
        &["no-raid", "agent"],
        &["no-rescue", "agent"],
        &["noop"],
        &["no-vendor"],
    ],
    properties: FAKE_PROPERTIES,
};

// The BMC types network-boot the agent and deploy through it by default, as Ironic's do;
// `fake` boot and deploy remain for demos on real BMCs without a boot server.
// As Ironic's stock configuration: BIOS and inspection (out of band) through Redfish by
// default, firmware updates only for nodes that ask for the `redfish` firmware interface.
const REDFISH: HardwareType = HardwareType {
    name: "redfish",
    supported: [
        &["redfish", "no-bios"],
        &[
            "ipxe",
            "pxe",
            "http",
            "http-ipxe",
            "fake",
            "redfish-virtual-media",
            "redfish-https",
        ],
        &["no-console"],
        &["direct", "fake", "ramdisk", "custom-agent", "autodetect"],
        &["no-firmware", "redfish"],
        &["redfish", "no-inspect", "agent", "inspector"],
        &["redfish", "noop"],
        &["noop", "flat", "ironic-networking"],
        &["redfish"],
        &["no-raid", "agent", "redfish"],
        &["no-rescue", "agent"],
        &["noop"],
        &["no-vendor"],
    ],
    properties: crate::redfish::PROPERTIES,
};

const IPMI: HardwareType = HardwareType {
    name: "ipmi",
    supported: [
        &["no-bios"],
        &["ipxe", "pxe", "http", "http-ipxe", "fake"],
        &["no-console", "ipmitool-socat"],
        &["direct", "fake", "ramdisk", "custom-agent", "autodetect"],
        &["no-firmware"],
        &["no-inspect", "agent", "inspector"],
        &["ipmitool", "noop"],
        &["noop", "flat", "ironic-networking"],
        &["ipmitool"],
        &["no-raid", "agent"],
        &["no-rescue", "agent"],
        &["noop"],
        &["no-vendor"],
    ],
    properties: crate::ipmi::PROPERTIES,
};

/// Every hardware type Ferric knows, enabled or not.
pub const HARDWARE_TYPES: [&HardwareType; 4] =
    [&FAKE_HARDWARE, &MANUAL_MANAGEMENT, &REDFISH, &IPMI];
