//! `ferric port|portgroup|driver|conductor|allocation …`: the resources beside nodes, each
//! subcommand one API operation.

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::node::{fields_query, node_path};
use crate::{CliError, Context, Patch, fields_of, key_value, object_of, segment};

/// `--long`, `--fields` and `--limit`, which every listing takes.
#[derive(Debug, Args)]
pub(crate) struct Listing {
    /// Every field (the collection's /detail), not only the summary columns.
    #[arg(long)]
    long: bool,
    /// Only these fields, in this order (comma-separated or repeated).
    #[arg(long, value_name = "FIELD,…")]
    fields: Vec<String>,
    /// One page of at most this many items.
    #[arg(long)]
    limit: Option<u32>,
}

/// Name or UUID and `--fields`, which every show takes.
#[derive(Debug, Args)]
pub(crate) struct Showing {
    /// Name or UUID.
    ident: String,
    /// Only these fields, in this order (comma-separated or repeated).
    #[arg(long, value_name = "FIELD,…")]
    fields: Vec<String>,
}

/// Lists `collection` with `filters`; `detail` says whether it has a /detail form.
fn list(
    context: &Context,
    collection: &str,
    listing: &Listing,
    filters: Vec<(&'static str, Option<String>)>,
    defaults: &[&str],
    detail: bool,
) -> Result<(), CliError> {
    let fields = fields_of(&listing.fields);
    let mut query = fields_query(fields.as_deref());
    query.extend(
        filters
            .into_iter()
            .filter_map(|(key, value)| value.map(|value| (key, value))),
    );
    let mut path = format!("/v1/{collection}");
    if listing.long && fields.is_none() {
        if detail {
            path.push_str("/detail");
        } else {
            query.push(("detail", "true".to_owned()));
        }
    }
    let items = context
        .client
        .list(&path, collection, &query, listing.limit)?;
    let defaults = if listing.long { &[][..] } else { defaults };
    context.show_list(&items, fields.as_deref(), defaults)
}

fn show(context: &Context, collection: &str, showing: &Showing) -> Result<(), CliError> {
    let fields = fields_of(&showing.fields);
    let path = format!("/v1/{collection}/{}", segment(&showing.ident));
    let record = context
        .client
        .get(&path, &fields_query(fields.as_deref()))?;
    context.show(&record, fields.as_deref())
}

fn create(context: &Context, collection: &str, body: Map<String, Value>) -> Result<(), CliError> {
    let record = context
        .client
        .post(&format!("/v1/{collection}"), &Value::Object(body))?;
    context.show(&record, None)
}

fn update(context: &Context, collection: &str, ident: &str, patch: Patch) -> Result<(), CliError> {
    if patch.is_empty() {
        return Err(CliError::Usage(
            "nothing to change: give at least one field flag (see --help)".to_owned(),
        ));
    }
    let path = format!("/v1/{collection}/{}", segment(ident));
    let record = context.client.patch(&path, &patch.into_value())?;
    context.show(&record, None)
}

fn delete(
    context: &Context,
    collection: &str,
    what: &str,
    idents: &[String],
) -> Result<(), CliError> {
    for ident in idents {
        context
            .client
            .delete(&format!("/v1/{collection}/{}", segment(ident)))?;
        eprintln!("Deleted {what} {ident}");
    }
    Ok(())
}

/// A node's UUID from its name or UUID (create bodies take UUIDs).
fn node_uuid(context: &Context, node: &str) -> Result<String, CliError> {
    uuid_of(context, &node_path(node))
}

fn portgroup_uuid(context: &Context, portgroup: &str) -> Result<String, CliError> {
    uuid_of(context, &format!("/v1/portgroups/{}", segment(portgroup)))
}

fn uuid_of(context: &Context, path: &str) -> Result<String, CliError> {
    let record = context.client.get(path, &[("fields", "uuid".to_owned())])?;
    record
        .get("uuid")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| CliError::Usage(format!("{path} has no uuid in its answer")))
}

/// Adds `KEY=VALUE` pairs into `field` as patch operations.
fn add_pairs(patch: &mut Patch, field: &str, pairs: &[(String, String)]) {
    for (key, value) in pairs {
        patch.add_in(field, key, json!(value));
    }
}

fn remove_keys(patch: &mut Patch, field: &str, keys: &[String]) {
    for key in keys {
        patch.remove(&[field, key]);
    }
}

// ---- ports ----

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
            if !fields.local_link_connection.is_empty() {
                body.insert(
                    "local_link_connection".into(),
                    Value::Object(object_of(&fields.local_link_connection)),
                );
            }
            if !fields.extra.is_empty() {
                body.insert("extra".into(), Value::Object(object_of(&fields.extra)));
            }
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

// ---- port groups ----

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
            if !fields.property.is_empty() {
                body.insert(
                    "properties".into(),
                    Value::Object(object_of(&fields.property)),
                );
            }
            if !fields.extra.is_empty() {
                body.insert("extra".into(), Value::Object(object_of(&fields.extra)));
            }
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

// ---- drivers and conductors (read-only) ----

#[derive(Debug, Subcommand)]
pub(crate) enum DriverCommand {
    /// List the enabled hardware types (GET /v1/drivers).
    ///
    /// Example: `ferric driver list --long`.
    List {
        /// Every field, with the enabled and default interfaces (API 1.30).
        #[arg(long)]
        long: bool,
    },
    /// Show one hardware type (GET /v1/drivers/{driver}).
    ///
    /// Example: `ferric driver show fake-hardware`.
    Show {
        /// The hardware type's name.
        driver: String,
    },
    /// The driver_info keys a hardware type understands (GET /v1/drivers/{driver}/properties).
    ///
    /// Example: `ferric driver properties fake-hardware`.
    Properties {
        /// The hardware type's name.
        driver: String,
    },
}

pub(crate) fn run_driver(context: &Context, command: DriverCommand) -> Result<(), CliError> {
    let client = &context.client;
    match command {
        DriverCommand::List { long } => {
            let query = if long {
                vec![("detail", "true".to_owned())]
            } else {
                Vec::new()
            };
            let drivers = client.list("/v1/drivers", "drivers", &query, None)?;
            let defaults: &[&str] = if long {
                &[]
            } else {
                &["name", "hosts", "type"]
            };
            context.show_list(&drivers, None, defaults)
        }
        DriverCommand::Show { driver } => {
            let record = client.get(&format!("/v1/drivers/{}", segment(&driver)), &[])?;
            context.show(&record, None)
        }
        DriverCommand::Properties { driver } => {
            let path = format!("/v1/drivers/{}/properties", segment(&driver));
            let answer = client.get(&path, &[])?;
            let rows: Vec<Value> = match answer {
                Value::Object(properties) => properties
                    .into_iter()
                    .map(|(property, description)| {
                        json!({"property": property, "description": description})
                    })
                    .collect(),
                _ => Vec::new(),
            };
            context.show_list(&rows, None, &["property", "description"])
        }
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum ConductorCommand {
    /// List conductors (GET /v1/conductors).
    ///
    /// Example: `ferric conductor list --long`.
    List {
        #[command(flatten)]
        listing: Listing,
    },
    /// Show one conductor by hostname.
    ///
    /// Example: `ferric conductor show $(hostname)`.
    Show(Showing),
}

pub(crate) fn run_conductor(context: &Context, command: ConductorCommand) -> Result<(), CliError> {
    match command {
        ConductorCommand::List { listing } => list(
            context,
            "conductors",
            &listing,
            Vec::new(),
            &["hostname", "conductor_group", "alive"],
            false,
        ),
        ConductorCommand::Show(showing) => show(context, "conductors", &showing),
    }
}

// ---- allocations ----

#[derive(Debug, Subcommand)]
pub(crate) enum AllocationCommand {
    /// List allocations (GET /v1/allocations).
    ///
    /// Example: `ferric allocation list --state active`.
    List {
        #[command(flatten)]
        listing: Listing,
        /// Only the allocation of this node (name or UUID).
        #[arg(long)]
        node: Option<String>,
        #[arg(long)]
        resource_class: Option<String>,
        /// allocating, active or error.
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        owner: Option<String>,
    },
    /// Show one allocation by name or UUID.
    ///
    /// Example: `ferric allocation show job-42`.
    Show(Showing),
    /// Ask for a node (POST /v1/allocations): the answer is `active` with the node, or
    /// `error` (exit code 1, with the reason) when no available node fits.
    ///
    /// Example: `ferric allocation create --resource-class baremetal --trait CUSTOM_GPU
    /// --name job-42`.
    Create {
        /// The resource class the node must have.
        #[arg(long)]
        resource_class: String,
        #[arg(long)]
        name: Option<String>,
        #[arg(long)]
        uuid: Option<String>,
        /// A trait the node must have; repeatable.
        #[arg(long = "trait", value_name = "TRAIT")]
        traits: Vec<String>,
        /// A node (name or UUID) to choose from; repeatable.
        #[arg(long = "candidate-node", value_name = "NODE")]
        candidate_nodes: Vec<String>,
        #[arg(long)]
        owner: Option<String>,
        /// An extra key; repeatable.
        #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
        extra: Vec<(String, String)>,
    },
    /// Change an allocation's name or extra (PATCH /v1/allocations/{allocation}).
    ///
    /// Example: `ferric allocation set job-42 --extra ticket=OPS-7`.
    Set {
        /// Name or UUID of the allocation.
        allocation: String,
        #[arg(long)]
        name: Option<String>,
        /// An extra key; repeatable.
        #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
        extra: Vec<(String, String)>,
    },
    /// Remove an allocation's name or extra keys.
    ///
    /// Example: `ferric allocation unset job-42 --extra ticket`.
    Unset {
        /// Name or UUID of the allocation.
        allocation: String,
        #[arg(long)]
        name: bool,
        /// An extra key to remove; repeatable.
        #[arg(long, value_name = "KEY")]
        extra: Vec<String>,
    },
    /// Delete allocations, freeing their nodes.
    ///
    /// Example: `ferric allocation delete job-42`.
    Delete {
        #[arg(required = true)]
        allocations: Vec<String>,
    },
}

pub(crate) fn run_allocation(
    context: &Context,
    command: AllocationCommand,
) -> Result<(), CliError> {
    match command {
        AllocationCommand::List {
            listing,
            node,
            resource_class,
            state,
            owner,
        } => list(
            context,
            "allocations",
            &listing,
            vec![
                ("node", node),
                ("resource_class", resource_class),
                ("state", state),
                ("owner", owner),
            ],
            &["uuid", "name", "resource_class", "state", "node_uuid"],
            false,
        ),
        AllocationCommand::Show(showing) => show(context, "allocations", &showing),
        AllocationCommand::Create {
            resource_class,
            name,
            uuid,
            traits,
            candidate_nodes,
            owner,
            extra,
        } => {
            let mut body = Map::new();
            body.insert("resource_class".into(), json!(resource_class));
            for (field, value) in [("name", name), ("uuid", uuid), ("owner", owner)] {
                if let Some(value) = value {
                    body.insert(field.into(), json!(value));
                }
            }
            if !traits.is_empty() {
                body.insert("traits".into(), json!(traits));
            }
            if !candidate_nodes.is_empty() {
                body.insert("candidate_nodes".into(), json!(candidate_nodes));
            }
            if !extra.is_empty() {
                body.insert("extra".into(), Value::Object(object_of(&extra)));
            }
            let record = context
                .client
                .post("/v1/allocations", &Value::Object(body))?;
            context.show(&record, None)?;
            // The API matches at once: `error` means no node fits, and scripts must notice.
            if record.get("state").and_then(Value::as_str) == Some("error") {
                let text = |key: &str| record.get(key).and_then(Value::as_str).unwrap_or("");
                return Err(CliError::AllocationFailed {
                    allocation: match text("name") {
                        "" => text("uuid").to_owned(),
                        name => name.to_owned(),
                    },
                    last_error: text("last_error").to_owned(),
                });
            }
            Ok(())
        }
        AllocationCommand::Set {
            allocation,
            name,
            extra,
        } => {
            let mut patch = Patch::default();
            if let Some(name) = name {
                patch.replace("name", json!(name));
            }
            add_pairs(&mut patch, "extra", &extra);
            update(context, "allocations", &allocation, patch)
        }
        AllocationCommand::Unset {
            allocation,
            name,
            extra,
        } => {
            let mut patch = Patch::default();
            if name {
                patch.remove(&["name"]);
            }
            remove_keys(&mut patch, "extra", &extra);
            update(context, "allocations", &allocation, patch)
        }
        AllocationCommand::Delete { allocations } => {
            delete(context, "allocations", "allocation", &allocations)
        }
    }
}
