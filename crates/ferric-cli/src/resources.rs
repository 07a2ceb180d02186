//! `ferric driver|conductor|allocation|chassis …`, and the list/show/create/update/delete
//! helpers every resource beside nodes shares (`ports.rs` uses them too).

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::context::{fields_query, node_path};
use crate::{CliError, Context, Patch, fields_of, insert_pairs, key_value, segment};

/// How long `allocation create` waits for the server to match the allocation.
const ALLOCATION_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

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
pub(crate) fn list(
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

pub(crate) fn show(context: &Context, collection: &str, showing: &Showing) -> Result<(), CliError> {
    let fields = fields_of(&showing.fields);
    let path = format!("/v1/{collection}/{}", segment(&showing.ident));
    let record = context
        .client
        .get(&path, &fields_query(fields.as_deref()))?;
    context.show(&record, fields.as_deref())
}

pub(crate) fn create(
    context: &Context,
    collection: &str,
    body: Map<String, Value>,
) -> Result<(), CliError> {
    let record = context
        .client
        .post(&format!("/v1/{collection}"), &Value::Object(body))?;
    context.show(&record, None)
}

pub(crate) fn update(
    context: &Context,
    collection: &str,
    ident: &str,
    patch: Patch,
) -> Result<(), CliError> {
    if patch.is_empty() {
        return Err(CliError::Usage(
            "nothing to change: give at least one field flag (see --help)".to_owned(),
        ));
    }
    let path = format!("/v1/{collection}/{}", segment(ident));
    let record = context.client.patch(&path, &patch.into_value())?;
    context.show(&record, None)
}

pub(crate) fn delete(
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
pub(crate) fn node_uuid(context: &Context, node: &str) -> Result<String, CliError> {
    uuid_of(context, &node_path(node))
}

pub(crate) fn portgroup_uuid(context: &Context, portgroup: &str) -> Result<String, CliError> {
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
pub(crate) fn add_pairs(patch: &mut Patch, field: &str, pairs: &[(String, String)]) {
    for (key, value) in pairs {
        patch.add_in(field, key, json!(value));
    }
}

pub(crate) fn remove_keys(patch: &mut Patch, field: &str, keys: &[String]) {
    for key in keys {
        patch.remove(&[field, key]);
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
    /// Ask for a node (POST /v1/allocations) and wait while the server matches it: the answer
    /// is `active` with the node, or `error` (exit code 1, with the reason) when no available
    /// node fits.
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
            insert_pairs(&mut body, "extra", &extra);
            let mut record = context
                .client
                .post("/v1/allocations", &Value::Object(body))?;
            // The server matches in the background (`allocating`), as Ironic's does: wait for
            // the outcome, as `baremetal allocation create --wait` does, for a bounded time.
            let started = std::time::Instant::now();
            while record.get("state").and_then(Value::as_str) == Some("allocating")
                && started.elapsed() < ALLOCATION_WAIT
            {
                std::thread::sleep(std::time::Duration::from_millis(100));
                let uuid = record.get("uuid").and_then(Value::as_str).unwrap_or("");
                record = context
                    .client
                    .get(&format!("/v1/allocations/{uuid}"), &[])?;
            }
            context.show(&record, None)?;
            // `error` means no node fits, and scripts must notice.
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

// ---- chassis ----

#[derive(Debug, Subcommand)]
pub(crate) enum ChassisCommand {
    /// List chassis (GET /v1/chassis).
    ///
    /// Example: `ferric chassis list --long`.
    List {
        #[command(flatten)]
        listing: Listing,
    },
    /// Show one chassis by UUID.
    Show(Showing),
    /// Create a chassis (POST /v1/chassis); nodes join it with `--chassis-uuid`.
    ///
    /// Example: `ferric chassis create --description "rack 4, enclosure 2"`.
    Create {
        #[arg(long)]
        uuid: Option<String>,
        #[arg(long)]
        description: Option<String>,
        /// An extra key; repeatable.
        #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
        extra: Vec<(String, String)>,
    },
    /// Change a chassis (PATCH /v1/chassis/{chassis}).
    Set {
        /// The chassis' UUID.
        chassis: String,
        #[arg(long)]
        description: Option<String>,
        /// An extra key; repeatable.
        #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
        extra: Vec<(String, String)>,
    },
    /// Remove a chassis' description or extra keys.
    Unset {
        /// The chassis' UUID.
        chassis: String,
        #[arg(long)]
        description: bool,
        /// An extra key to remove; repeatable.
        #[arg(long, value_name = "KEY")]
        extra: Vec<String>,
    },
    /// Delete chassis (they must hold no nodes).
    Delete {
        #[arg(required = true)]
        chassis: Vec<String>,
    },
}

pub(crate) fn run_chassis(context: &Context, command: ChassisCommand) -> Result<(), CliError> {
    match command {
        ChassisCommand::List { listing } => list(
            context,
            "chassis",
            &listing,
            Vec::new(),
            &["uuid", "description"],
            true,
        ),
        ChassisCommand::Show(showing) => show(context, "chassis", &showing),
        ChassisCommand::Create {
            uuid,
            description,
            extra,
        } => {
            let mut body = Map::new();
            for (field, value) in [("uuid", uuid), ("description", description)] {
                if let Some(value) = value {
                    body.insert(field.into(), json!(value));
                }
            }
            insert_pairs(&mut body, "extra", &extra);
            create(context, "chassis", body)
        }
        ChassisCommand::Set {
            chassis,
            description,
            extra,
        } => {
            let mut patch = Patch::default();
            if let Some(description) = description {
                patch.replace("description", json!(description));
            }
            add_pairs(&mut patch, "extra", &extra);
            update(context, "chassis", &chassis, patch)
        }
        ChassisCommand::Unset {
            chassis,
            description,
            extra,
        } => {
            let mut patch = Patch::default();
            if description {
                patch.remove(&["description"]);
            }
            remove_keys(&mut patch, "extra", &extra);
            update(context, "chassis", &chassis, patch)
        }
        ChassisCommand::Delete { chassis } => delete(context, "chassis", "chassis", &chassis),
    }
}
