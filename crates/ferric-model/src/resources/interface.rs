//! The thirteen driver interface kinds a node composes (`reference/ironic.md` §7) and the node
//! field that names each one's implementation (`power_interface`, `deploy_interface`, …).

use std::fmt;

/// One kind of driver interface. A node's `driver` (its hardware type) supports a list of
/// implementations per kind; the node's `<kind>_interface` field picks one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InterfaceKind {
    Bios,
    Boot,
    Console,
    Deploy,
    Firmware,
    Inspect,
    Management,
    Network,
    Power,
    Raid,
    Rescue,
    Storage,
    Vendor,
}

impl InterfaceKind {
    /// Every kind, in the alphabetical order Ironic lists them in.
    pub const ALL: [InterfaceKind; 13] = [
        Self::Bios,
        Self::Boot,
        Self::Console,
        Self::Deploy,
        Self::Firmware,
        Self::Inspect,
        Self::Management,
        Self::Network,
        Self::Power,
        Self::Raid,
        Self::Rescue,
        Self::Storage,
        Self::Vendor,
    ];

    /// The name used in API fields (`<name>_interface`) and step objects (`"interface"`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Bios => "bios",
            Self::Boot => "boot",
            Self::Console => "console",
            Self::Deploy => "deploy",
            Self::Firmware => "firmware",
            Self::Inspect => "inspect",
            Self::Management => "management",
            Self::Network => "network",
            Self::Power => "power",
            Self::Raid => "raid",
            Self::Rescue => "rescue",
            Self::Storage => "storage",
            Self::Vendor => "vendor",
        }
    }

    /// The kind named `name` (`"deploy"`), if any.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// The core kinds must work for a node to be deployable; the others may be no-ops.
    pub const fn is_core(self) -> bool {
        matches!(
            self,
            Self::Boot | Self::Deploy | Self::Management | Self::Network | Self::Power
        )
    }
}

impl fmt::Display for InterfaceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProvisionState;
    use crate::resources::Node;
    use uuid::Uuid;

    #[test]
    fn names_round_trip_and_fields_are_distinct() {
        let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::Enroll);
        for kind in InterfaceKind::ALL {
            assert_eq!(InterfaceKind::from_name(kind.as_str()), Some(kind));
            node.set_interface(kind, Some(format!("impl-{kind}")));
        }
        for kind in InterfaceKind::ALL {
            assert_eq!(node.interface(kind), Some(format!("impl-{kind}").as_str()));
        }
        assert_eq!(InterfaceKind::from_name("nope"), None);
    }
}
