//! `ferric port|portgroup …`: a node's NICs and their bonds.

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::resources::{
    Listing, Showing, add_pairs, create, delete, list, node_uuid, portgroup_uuid, remove_keys,
    show, update,
};
use crate::{CliError, Context, Patch, insert_pairs, key_value};

#[derive(Debug, Subcommand)]
pub(crate) enum PortCommand {
    /// List ports (GET /v1/ports).
    ///
    /// Example: `ferric port list --node n1 --long`.
    List {
        #[command(flatten)]
        listing: Listing,
        /// Only the ports of this node (name or UUID).
        #[arg(long)]
        node: Option<String>,
        /// Only the port with this MAC address.
        #[arg(long)]
        address: Option<String>,
    },
    /// Show one port by UUID (GET /v1/ports/{port}).
    ///
    /// Example: `ferric port show 1be26c0b-03f2-4d2e-ae87-c02d7f33c123`.
    Show(Showing),
    /// Create a port on a node (POST /v1/ports).
    ///
    /// Example: `ferric port create 52:54:00:12:34:56 --node n1 --local-link-connection
    /// switch_id=0a:1b:2c:3d:4e:5f --local-link-connection port_id=Eth1/12`.
    Create {
        /// The MAC address.
        address: String,
        /// The node (name or UUID).
        #[arg(long)]
        node: String,
        #[command(flatten)]
        fields: PortFields,
    },
    /// Change a port (PATCH /v1/ports/{port}).
    ///
    /// Example: `ferric port set PORT --pxe-enabled false`.
    Set {
        /// The port's UUID.
        port: String,
        /// Move the port to another node (name or UUID).
        #[arg(long)]
        node: Option<String>,
        /// A new MAC address.
        #[arg(long)]
        address: Option<String>,
        #[command(flatten)]
        fields: PortFields,
    },
    /// Remove fields or keys from a port.
    ///
    /// Example: `ferric port unset PORT --extra rack --port-group`.
    Unset {
        /// The port's UUID.
        port: String,
        /// An extra key to remove; repeatable.
        #[arg(long, value_name = "KEY")]
        extra: Vec<String>,
        /// Take the port out of its port group.
        #[arg(long)]
        port_group: bool,
        #[arg(long)]
        physical_network: bool,
        #[arg(long)]
        name: bool,
        #[arg(long)]
        description: bool,
    },
    /// Delete ports (DELETE /v1/ports/{port}).
    ///
    /// Example: `ferric port delete PORT`.
    Delete {
        #[arg(required = true)]
        ports: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub(crate) struct PortFields {
    /// Switch-side details (switch_id, port_id, switch_info); repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    local_link_connection: Vec<(String, String)>,
    /// Whether the node boots from the network through this port.
    #[arg(long, value_name = "BOOL")]
    pxe_enabled: Option<bool>,
    /// The port group (name or UUID) it belongs to.
    #[arg(long, value_name = "PORTGROUP")]
    port_group: Option<String>,
    #[arg(long)]
    physical_network: Option<String>,
    /// A name for the port (API 1.88).
    #[arg(long)]
    name: Option<String>,
    #[arg(long)]
    description: Option<String>,
    /// An extra key; repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    extra: Vec<(String, String)>,
}

impl PortFields {
    /// The scalar fields given, portgroup resolved to its UUID.
    fn scalars(&self, context: &Context) -> Result<Vec<(&'static str, Value)>, CliError> {
        let mut given = Vec::new();
        if let Some(pxe) = self.pxe_enabled {
            given.push(("pxe_enabled", json!(pxe)));
        }
        if let Some(portgroup) = &self.port_group {
            given.push(("portgroup_uuid", json!(portgroup_uuid(context, portgroup)?)));
        }
        for (field, value) in [
            ("physical_network", &self.physical_network),
            ("name", &self.name),
            ("description", &self.description),
        ] {
            if let Some(value) = value {
                given.push((field, json!(value)));
            }
        }
        Ok(given)
    }
}

pub(crate) fn run_port(context: &Context, command: PortCommand) -> Result<(), CliError> {
    match command {
        PortCommand::List {
            listing,
            node,
            address,
        } => list(
            context,
            "ports",
            &listing,
            vec![("node", node), ("address", address)],
            &["uuid", "address"],
            true,
        ),
        PortCommand::Show(showing) => show(context, "ports", &showing),
        PortCommand::Create {
            address,
            node,
            fields,
        } => {
            let mut body = Map::new();
            body.insert("address".into(), json!(address));
            body.insert("node_uuid".into(), json!(node_uuid(context, &node)?));
            for (field, value) in fields.scalars(context)? {
                body.insert(field.into(), value);
            }
            insert_pairs(
                &mut body,
                "local_link_connection",
                &fields.local_link_connection,
            );
            insert_pairs(&mut body, "extra", &fields.extra);
            create(context, "ports", body)
        }
        PortCommand::Set {
            port,
            node,
            address,
            fields,
        } => {
            let mut patch = Patch::default();
            if let Some(node) = node {
                patch.replace("node_uuid", json!(node_uuid(context, &node)?));
            }
            if let Some(address) = address {
                patch.replace("address", json!(address));
            }
            for (field, value) in fields.scalars(context)? {
                patch.replace(field, value);
            }
            add_pairs(
                &mut patch,
                "local_link_connection",
                &fields.local_link_connection,
            );
            add_pairs(&mut patch, "extra", &fields.extra);
            update(context, "ports", &port, patch)
        }
        PortCommand::Unset {
            port,
            extra,
            port_group,
            physical_network,
            name,
            description,
        } => {
            let mut patch = Patch::default();
            remove_keys(&mut patch, "extra", &extra);
            for (field, given) in [
                ("portgroup_uuid", port_group),
                ("physical_network", physical_network),
                ("name", name),
                ("description", description),
            ] {
                if given {
                    patch.remove(&[field]);
                }
            }
            update(context, "ports", &port, patch)
        }
        PortCommand::Delete { ports } => delete(context, "ports", "port", &ports),
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum PortgroupCommand {
    /// List port groups (GET /v1/portgroups).
    ///
    /// Example: `ferric portgroup list --node n1`.
    List {
        #[command(flatten)]
        listing: Listing,
        /// Only the port groups of this node (name or UUID).
        #[arg(long)]
        node: Option<String>,
        #[arg(long)]
        address: Option<String>,
    },
    /// Show one port group by name or UUID.
    ///
    /// Example: `ferric portgroup show bond0`.
    Show(Showing),
    /// Create a port group on a node (POST /v1/portgroups).
    ///
    /// Example: `ferric portgroup create --node n1 --name bond0 --mode 802.3ad
    /// --property miimon=100`.
    Create {
        /// The node (name or UUID).
        #[arg(long)]
        node: String,
        #[command(flatten)]
        fields: PortgroupFields,
    },
    /// Change a port group (PATCH /v1/portgroups/{portgroup}).
    ///
    /// Example: `ferric portgroup set bond0 --mode active-backup`.
    Set {
        /// Name or UUID of the port group.
        portgroup: String,
        /// Move it to another node (only while it has no ports).
        #[arg(long)]
        node: Option<String>,
        #[command(flatten)]
        fields: PortgroupFields,
    },
    /// Remove fields or keys from a port group.
    ///
    /// Example: `ferric portgroup unset bond0 --property miimon`.
    Unset {
        /// Name or UUID of the port group.
        portgroup: String,
        #[arg(long)]
        name: bool,
        #[arg(long)]
        address: bool,
        #[arg(long)]
        mode: bool,
        /// A properties key to remove; repeatable.
        #[arg(long, value_name = "KEY")]
        property: Vec<String>,
        /// An extra key to remove; repeatable.
        #[arg(long, value_name = "KEY")]
        extra: Vec<String>,
    },
    /// Delete port groups (they must have no ports).
    ///
    /// Example: `ferric portgroup delete bond0`.
    Delete {
        #[arg(required = true)]
        portgroups: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub(crate) struct PortgroupFields {
    #[arg(long)]
    name: Option<String>,
    /// The bond's MAC address.
    #[arg(long)]
    address: Option<String>,
    /// The bonding mode (balance-rr, active-backup, 802.3ad, …).
    #[arg(long)]
    mode: Option<String>,
    /// Whether its ports may also be used alone.
    #[arg(long, value_name = "BOOL")]
    support_standalone_ports: Option<bool>,
    /// A bonding property (miimon, xmit_hash_policy, …); repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    property: Vec<(String, String)>,
    /// An extra key; repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    extra: Vec<(String, String)>,
}

impl PortgroupFields {
    fn scalars(&self) -> Vec<(&'static str, Value)> {
        let mut given: Vec<(&'static str, Value)> = [
            ("name", &self.name),
            ("address", &self.address),
            ("mode", &self.mode),
        ]
        .into_iter()
        .filter_map(|(field, value)| value.as_ref().map(|value| (field, json!(value))))
        .collect();
        if let Some(standalone) = self.support_standalone_ports {
            given.push(("standalone_ports_supported", json!(standalone)));
        }
        given
    }
}

pub(crate) fn run_portgroup(context: &Context, command: PortgroupCommand) -> Result<(), CliError> {
    match command {
        PortgroupCommand::List {
            listing,
            node,
            address,
        } => list(
            context,
            "portgroups",
            &listing,
            vec![("node", node), ("address", address)],
            &["uuid", "name", "address"],
            true,
        ),
        PortgroupCommand::Show(showing) => show(context, "portgroups", &showing),
        PortgroupCommand::Create { node, fields } => {
            let mut body = Map::new();
            body.insert("node_uuid".into(), json!(node_uuid(context, &node)?));
            for (field, value) in fields.scalars() {
                body.insert(field.into(), value);
            }
            insert_pairs(&mut body, "properties", &fields.property);
            insert_pairs(&mut body, "extra", &fields.extra);
            create(context, "portgroups", body)
        }
        PortgroupCommand::Set {
            portgroup,
            node,
            fields,
        } => {
            let mut patch = Patch::default();
            if let Some(node) = node {
                patch.replace("node_uuid", json!(node_uuid(context, &node)?));
            }
            for (field, value) in fields.scalars() {
                patch.replace(field, value);
            }
            add_pairs(&mut patch, "properties", &fields.property);
            add_pairs(&mut patch, "extra", &fields.extra);
            update(context, "portgroups", &portgroup, patch)
        }
        PortgroupCommand::Unset {
            portgroup,
            name,
            address,
            mode,
            property,
            extra,
        } => {
            let mut patch = Patch::default();
            for (field, given) in [("name", name), ("address", address), ("mode", mode)] {
                if given {
                    patch.remove(&[field]);
                }
            }
            remove_keys(&mut patch, "properties", &property);
            remove_keys(&mut patch, "extra", &extra);
            update(context, "portgroups", &portgroup, patch)
        }
        PortgroupCommand::Delete { portgroups } => {
            delete(context, "portgroups", "port group", &portgroups)
        }
    }
}
