//! The network interface (`reference/ironic.md` §7, Ironic's `NetworkInterface`): what moves a
//! node's switch ports between Ferric's networks as the node goes through its life. The
//! conductor calls its hooks where Ironic's conductor and deploy interfaces do:
//!
//! | when | hooks |
//! |---|---|
//! | inspection starts / ends | `add_inspection_network` / `remove_inspection_network` |
//! | cleaning is prepared / finished or failed | `add_cleaning_network` / `remove_cleaning_network` |
//! | deploying is prepared | `unconfigure_tenant_networks`, `add_provisioning_network` |
//! | Ironic's `switch_to_tenant_network` point (before the first deploy step of priority below 30, or the flow's end) | `remove_provisioning_network`, `configure_tenant_networks` |
//! | a failed or aborted deployment is cleaned up | `remove_provisioning_network` |
//! | servicing is prepared / finished | `unconfigure_tenant_networks`, `add_servicing_network` / `remove_servicing_network`, `configure_tenant_networks` |
//! | rescue starts / the rescue ramdisk is up or unrescue | `unconfigure_tenant_networks`, `add_rescuing_network` / `remove_rescuing_network`, `configure_tenant_networks` |
//! | undeploy (tear-down) | `unconfigure_tenant_networks`, `remove_provisioning_network` |
//!
//! Ironic's `vif_attach`/`vif_detach` are not hooks here: attaching a VIF is the API's record on
//! a port (`tenant_vif_port_id`, `ferric-api`'s `v1/vifs.rs`), and the switch follows at the
//! next `configure_tenant_networks`; an interface that must know the VIF's network checks it in
//! `validate`, which a deployment's start runs. Verifying (`manage`) and adoption call none: Ironic's do not either (the ports are wherever
//! the site left them, its idle network). `flat` and `noop` implement every hook as nothing,
//! which is what they always were; `ironic-networking` (`switch/`) drives the switches.
//!
//! Every hook takes the node mutably: an interface that changes ports records where it left
//! each one in the node's `driver_internal_info`, saved with the node by the conductor, so the
//! node's record (and history, for a failure) says where its ports are.

use async_trait::async_trait;
use ferric_model::resources::Node;

use crate::DriverError;
use crate::interfaces::Validate;
use crate::noop::Passive;

/// One of the networks a node's ports move between.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Network {
    /// Where ports rest when the node needs no network (Ironic's idle network).
    Idle,
    Provisioning,
    Cleaning,
    Inspection,
    Rescuing,
    Servicing,
    /// Each port's own network while the node runs its instance (a VIF, or the port's
    /// `extra.switchport`).
    Tenant,
}

impl Network {
    /// The name in records, messages and `docs/networking.md`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::Provisioning => "provisioning",
            Self::Cleaning => "cleaning",
            Self::Inspection => "inspection",
            Self::Rescuing => "rescuing",
            Self::Servicing => "servicing",
            Self::Tenant => "tenant",
        }
    }

    /// The network named `name` (as [`Network::as_str`] writes it).
    pub fn from_name(name: &str) -> Option<Self> {
        [
            Self::Idle,
            Self::Provisioning,
            Self::Cleaning,
            Self::Inspection,
            Self::Rescuing,
            Self::Servicing,
            Self::Tenant,
        ]
        .into_iter()
        .find(|network| network.as_str() == name)
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A managed switch port found on another VLAN than the one Ferric left it on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortDrift {
    pub switch: String,
    /// The switch's interface (a port, or a bond's LAG).
    pub interface: String,
    pub network: String,
    /// The VLAN Ferric set (`None`: none).
    pub expected: Option<u16>,
    /// The VLAN read back.
    pub seen: Option<u16>,
}

impl std::fmt::Display for PortDrift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let vlan =
            |vlan: Option<u16>| vlan.map_or("no VLAN".to_owned(), |vlan| format!("VLAN {vlan}"));
        write!(
            f,
            "port {} of switch {} is on {}, not on {} ({} network) where Ferric left it",
            self.interface,
            self.switch,
            vlan(self.seen),
            vlan(self.expected),
            self.network
        )
    }
}

/// Ironic's network interface. The named hooks are Ironic's; each defaults to moving the
/// ports onto a network ([`NetworkInterface::add_network`]) or off it
/// ([`NetworkInterface::remove_network`]), which an interface that does nothing leaves as
/// they are.
#[async_trait]
pub trait NetworkInterface: Validate {
    /// Moves every managed port of the node onto `network`, checks it by reading it back, and
    /// records it. A port already recorded there is left alone.
    async fn add_network(&self, _node: &mut Node, _network: Network) -> Result<(), DriverError> {
        Ok(())
    }

    /// Moves the node's ports that are recorded on `network` to the idle network.
    async fn remove_network(&self, _node: &mut Node, _network: Network) -> Result<(), DriverError> {
        Ok(())
    }

    async fn add_provisioning_network(&self, node: &mut Node) -> Result<(), DriverError> {
        self.add_network(node, Network::Provisioning).await
    }
    async fn remove_provisioning_network(&self, node: &mut Node) -> Result<(), DriverError> {
        self.remove_network(node, Network::Provisioning).await
    }
    async fn add_cleaning_network(&self, node: &mut Node) -> Result<(), DriverError> {
        self.add_network(node, Network::Cleaning).await
    }
    async fn remove_cleaning_network(&self, node: &mut Node) -> Result<(), DriverError> {
        self.remove_network(node, Network::Cleaning).await
    }
    async fn add_inspection_network(&self, node: &mut Node) -> Result<(), DriverError> {
        self.add_network(node, Network::Inspection).await
    }
    async fn remove_inspection_network(&self, node: &mut Node) -> Result<(), DriverError> {
        self.remove_network(node, Network::Inspection).await
    }
    async fn add_rescuing_network(&self, node: &mut Node) -> Result<(), DriverError> {
        self.add_network(node, Network::Rescuing).await
    }
    async fn remove_rescuing_network(&self, node: &mut Node) -> Result<(), DriverError> {
        self.remove_network(node, Network::Rescuing).await
    }
    async fn add_servicing_network(&self, node: &mut Node) -> Result<(), DriverError> {
        self.add_network(node, Network::Servicing).await
    }
    async fn remove_servicing_network(&self, node: &mut Node) -> Result<(), DriverError> {
        self.remove_network(node, Network::Servicing).await
    }
    async fn configure_tenant_networks(&self, node: &mut Node) -> Result<(), DriverError> {
        self.add_network(node, Network::Tenant).await
    }
    async fn unconfigure_tenant_networks(&self, node: &mut Node) -> Result<(), DriverError> {
        self.remove_network(node, Network::Tenant).await
    }

    /// Reads back every port Ferric recorded for the node and returns those that moved.
    async fn check_ports(&self, _node: &Node) -> Result<Vec<PortDrift>, DriverError> {
        Ok(Vec::new())
    }

    /// Puts every recorded port back where Ferric left it.
    async fn repair_ports(&self, _node: &mut Node) -> Result<(), DriverError> {
        Ok(())
    }
}

/// `flat` and `noop`: the machine's ports are wherever the site cabled and configured them.
#[async_trait]
impl NetworkInterface for Passive {}
