//! Facts about Ironic's database schema: the alembic revisions of the releases this import
//! reads, the tables and columns it reads (with how each is decoded), and the check that a
//! database is an Ironic one at a supported revision with no conductor still alive.
//!
//! Taken from Ironic's own models and migrations (releases 36.0 to 39.0): every JSON field
//! is a text column holding JSON (`NULL` meaning empty), times are naive UTC `DATETIME`s,
//! records refer to each other by integer `id` (a node's ports by `node_id`, …) and carry a
//! `uuid`, and traits, tags and steps live in tables of their own.

use anyhow::bail;
use chrono::{DateTime, Utc};

use super::source::{Kind, Record, Source};

/// The alembic head revisions of the releases this import reads, newest first, with the
/// releases that ship them. Between these releases the tables it reads differ only in
/// columns it does not read (node history's `project` and state fields, firmware
/// components' vendor, model and serial number).
pub(crate) const SUPPORTED: &[(&str, &str)] = &[
    ("9fb44677ef15", "Ironic 39"),
    ("16990309ad9d", "Ironic 38"),
    ("e2d316b60d9e", "Ironic 36 or 37"),
];

/// How long after its last heartbeat an Ironic conductor marked online counts as alive:
/// twice Ironic's default `[conductor]heartbeat_timeout` (60 s).
pub(crate) const CONDUCTOR_ALIVE_SECONDS: i64 = 120;

use Kind::{Bool, Int, Text, Time};

/// The columns every record table has (`TimestampMixin` and the integer key).
const COMMON: &[(&str, Kind)] = &[
    ("id", Int),
    ("uuid", Text),
    ("created_at", Time),
    ("updated_at", Time),
];

pub(crate) const NODES: &[(&str, Kind)] = &[
    ("name", Text),
    ("description", Text),
    ("driver", Text),
    ("driver_info", Text),
    ("driver_internal_info", Text),
    ("properties", Text),
    ("instance_info", Text),
    ("extra", Text),
    ("instance_uuid", Text),
    ("instance_name", Text),
    ("chassis_id", Int),
    ("parent_node", Text),
    ("allocation_id", Int),
    ("provision_state", Text),
    ("target_provision_state", Text),
    ("provision_updated_at", Time),
    ("power_state", Text),
    ("target_power_state", Text),
    ("last_error", Text),
    ("console_enabled", Bool),
    ("fault", Text),
    ("health", Text),
    ("maintenance", Bool),
    ("maintenance_reason", Text),
    ("protected", Bool),
    ("protected_reason", Text),
    ("retired", Bool),
    ("retired_reason", Text),
    ("disable_power_off", Bool),
    ("automated_clean", Bool),
    ("inspection_started_at", Time),
    ("inspection_finished_at", Time),
    ("clean_step", Text),
    ("deploy_step", Text),
    ("service_step", Text),
    ("raid_config", Text),
    ("target_raid_config", Text),
    ("network_data", Text),
    ("boot_mode", Text),
    ("secure_boot", Bool),
    ("bios_interface", Text),
    ("boot_interface", Text),
    ("console_interface", Text),
    ("deploy_interface", Text),
    ("firmware_interface", Text),
    ("inspect_interface", Text),
    ("management_interface", Text),
    ("network_interface", Text),
    ("power_interface", Text),
    ("raid_interface", Text),
    ("rescue_interface", Text),
    ("storage_interface", Text),
    ("vendor_interface", Text),
    ("resource_class", Text),
    ("conductor_group", Text),
    ("shard", Text),
    ("owner", Text),
    ("lessee", Text),
    ("reservation", Text),
];

pub(crate) const PORTS: &[(&str, Kind)] = &[
    ("address", Text),
    ("node_id", Int),
    ("portgroup_id", Int),
    ("name", Text),
    ("description", Text),
    ("extra", Text),
    ("internal_info", Text),
    ("local_link_connection", Text),
    ("pxe_enabled", Bool),
    ("physical_network", Text),
    ("is_smartnic", Bool),
    ("vendor", Text),
    ("category", Text),
    ("available_for_dynamic_portgroup", Bool),
];

pub(crate) const PORTGROUPS: &[(&str, Kind)] = &[
    ("name", Text),
    ("node_id", Int),
    ("address", Text),
    ("extra", Text),
    ("internal_info", Text),
    ("standalone_ports_supported", Bool),
    ("mode", Text),
    ("properties", Text),
    ("physical_network", Text),
    ("category", Text),
    ("dynamic_portgroup", Bool),
];

pub(crate) const CHASSIS: &[(&str, Kind)] = &[("description", Text), ("extra", Text)];

pub(crate) const ALLOCATIONS: &[(&str, Kind)] = &[
    ("name", Text),
    ("node_id", Int),
    ("state", Text),
    ("owner", Text),
    ("last_error", Text),
    ("resource_class", Text),
    ("traits", Text),
    ("candidate_nodes", Text),
    ("extra", Text),
];

pub(crate) const DEPLOY_TEMPLATES: &[(&str, Kind)] = &[("name", Text), ("extra", Text)];

pub(crate) const DEPLOY_TEMPLATE_STEPS: &[(&str, Kind)] = &[
    ("deploy_template_id", Int),
    ("interface", Text),
    ("step", Text),
    ("args", Text),
    ("priority", Int),
];

pub(crate) const RUNBOOKS: &[(&str, Kind)] = &[
    ("name", Text),
    ("description", Text),
    ("public", Bool),
    ("owner", Text),
    ("disable_ramdisk", Bool),
    ("extra", Text),
];

pub(crate) const RUNBOOK_STEPS: &[(&str, Kind)] = &[
    ("runbook_id", Int),
    ("interface", Text),
    ("step", Text),
    ("args", Text),
    ("order", Int),
];

pub(crate) const RUNBOOK_TRAITS: &[(&str, Kind)] = &[("runbook_id", Int), ("trait", Text)];

pub(crate) const VOLUME_CONNECTORS: &[(&str, Kind)] = &[
    ("node_id", Int),
    ("type", Text),
    ("connector_id", Text),
    ("extra", Text),
];

pub(crate) const VOLUME_TARGETS: &[(&str, Kind)] = &[
    ("node_id", Int),
    ("volume_type", Text),
    ("properties", Text),
    ("boot_index", Int),
    ("volume_id", Text),
    ("extra", Text),
];

pub(crate) const NODE_TRAITS: &[(&str, Kind)] = &[("node_id", Int), ("trait", Text)];

pub(crate) const NODE_TAGS: &[(&str, Kind)] = &[("node_id", Int), ("tag", Text)];

pub(crate) const BIOS_SETTINGS: &[(&str, Kind)] = &[
    ("node_id", Int),
    ("name", Text),
    ("value", Text),
    ("attribute_type", Text),
    ("allowable_values", Text),
    ("lower_bound", Int),
    ("max_length", Int),
    ("min_length", Int),
    ("read_only", Bool),
    ("reset_required", Bool),
    ("unique", Bool),
    ("upper_bound", Int),
    ("created_at", Time),
    ("updated_at", Time),
];

pub(crate) const NODE_HISTORY: &[(&str, Kind)] = &[
    ("node_id", Int),
    ("conductor", Text),
    ("event_type", Text),
    ("severity", Text),
    ("event", Text),
    ("user", Text),
];

pub(crate) const NODE_INVENTORY: &[(&str, Kind)] = &[
    ("node_id", Int),
    ("inventory_data", Text),
    ("plugin_data", Text),
    ("created_at", Time),
    ("updated_at", Time),
];

pub(crate) const FIRMWARE: &[(&str, Kind)] = &[
    ("node_id", Int),
    ("component", Text),
    ("initial_version", Text),
    ("current_version", Text),
    ("last_version_flashed", Text),
    ("created_at", Time),
    ("updated_at", Time),
];

const CONDUCTORS: &[(&str, Kind)] = &[
    ("hostname", Text),
    ("online", Bool),
    ("updated_at", Time),
    ("created_at", Time),
];

/// Every table this import reads, as read.
#[derive(Debug, Default)]
pub(crate) struct IronicData {
    pub(crate) nodes: Vec<Record>,
    pub(crate) ports: Vec<Record>,
    pub(crate) portgroups: Vec<Record>,
    pub(crate) chassis: Vec<Record>,
    pub(crate) allocations: Vec<Record>,
    pub(crate) deploy_templates: Vec<Record>,
    pub(crate) deploy_template_steps: Vec<Record>,
    pub(crate) runbooks: Vec<Record>,
    pub(crate) runbook_steps: Vec<Record>,
    pub(crate) runbook_traits: Vec<Record>,
    pub(crate) volume_connectors: Vec<Record>,
    pub(crate) volume_targets: Vec<Record>,
    pub(crate) node_traits: Vec<Record>,
    pub(crate) node_tags: Vec<Record>,
    pub(crate) bios_settings: Vec<Record>,
    pub(crate) node_history: Vec<Record>,
    pub(crate) node_inventory: Vec<Record>,
    pub(crate) firmware: Vec<Record>,
    /// Rows of tables Ferric has no counterpart for, by table (reported, not imported).
    pub(crate) not_imported: Vec<(&'static str, usize)>,
}

/// Ironic's tables with no counterpart in Ferric, whose rows the summary counts.
const WITHOUT_COUNTERPART: &[&str] = &["inspection_rules"];

/// A record table's columns: [`COMMON`] and `own`.
fn with_common(own: &[(&'static str, Kind)]) -> Vec<(&'static str, Kind)> {
    COMMON.iter().chain(own).copied().collect()
}

/// Checks that `source` is an Ironic database at a supported revision, then returns which
/// release it is.
pub(crate) async fn check_revision(source: &Source) -> anyhow::Result<&'static str> {
    if !source.has_table("alembic_version").await? {
        if source.has_table("nodes").await? {
            bail!(
                "this database has a nodes table but no alembic_version: it is not an Ironic \
                 database this import knows (Ironic records its schema revision there)"
            );
        }
        bail!(
            "this is not an Ironic database (no alembic_version table; is it empty?): give \
             --from the URL in Ironic's [database]connection"
        );
    }
    let revisions = source
        .rows("alembic_version", "version_num", &[("version_num", Text)])
        .await?;
    let Some(revision) = revisions.first().and_then(|row| row.text("version_num")) else {
        bail!("Ironic's alembic_version table is empty: its schema was never created");
    };
    if !source.has_table("nodes").await? || !source.has_table("conductors").await? {
        bail!(
            "the database has an alembic revision ({revision}) but no Ironic nodes or \
             conductors table: it is not an Ironic database"
        );
    }
    if let Some((_, release)) = SUPPORTED.iter().find(|(known, _)| *known == revision) {
        return Ok(release);
    }
    let known: Vec<String> = SUPPORTED
        .iter()
        .map(|(revision, release)| format!("{revision} ({release})"))
        .collect();
    bail!(
        "Ironic's schema is at alembic revision {revision}, which this ferric does not know: \
         it reads {}. A newer Ironic's schema may hold data this import would lose; upgrade \
         ferric, or import from a database of a supported release",
        known.join(", ")
    )
}

/// The Ironic conductors that look alive: online, with a heartbeat in the last
/// [`CONDUCTOR_ALIVE_SECONDS`]. On SQLite Ironic sends no heartbeats at all (its
/// `_conductor_service_record_keepalive` returns at once there), so every conductor still
/// marked online counts: one stopped cleanly marks itself offline.
pub(crate) async fn live_conductors(
    source: &Source,
    now: DateTime<Utc>,
) -> anyhow::Result<Vec<String>> {
    let conductors = source.rows("conductors", "id", CONDUCTORS).await?;
    let heartbeats = !matches!(source, Source::Sqlite(_));
    Ok(conductors
        .iter()
        .filter(|row| row.bool("online").unwrap_or(false))
        .filter(|row| {
            let beat = row.time("updated_at").or_else(|| row.time("created_at"));
            !heartbeats
                || beat.is_some_and(|beat| (now - beat).num_seconds() < CONDUCTOR_ALIVE_SECONDS)
        })
        .filter_map(|row| row.text("hostname"))
        .collect())
}

/// Reads every table the import uses.
pub(crate) async fn read_all(source: &Source) -> anyhow::Result<IronicData> {
    let mut not_imported = Vec::new();
    for table in WITHOUT_COUNTERPART {
        if source.has_table(table).await? {
            let rows = source.rows(table, "id", &[("id", Int)]).await?;
            not_imported.push((*table, rows.len()));
        }
    }
    Ok(IronicData {
        nodes: source.rows("nodes", "id", &with_common(NODES)).await?,
        ports: source.rows("ports", "id", &with_common(PORTS)).await?,
        portgroups: source
            .rows("portgroups", "id", &with_common(PORTGROUPS))
            .await?,
        chassis: source.rows("chassis", "id", &with_common(CHASSIS)).await?,
        allocations: source
            .rows("allocations", "id", &with_common(ALLOCATIONS))
            .await?,
        deploy_templates: source
            .rows("deploy_templates", "id", &with_common(DEPLOY_TEMPLATES))
            .await?,
        deploy_template_steps: source
            .rows("deploy_template_steps", "id", DEPLOY_TEMPLATE_STEPS)
            .await?,
        runbooks: source
            .rows("runbooks", "id", &with_common(RUNBOOKS))
            .await?,
        runbook_steps: source.rows("runbook_steps", "id", RUNBOOK_STEPS).await?,
        runbook_traits: source
            .rows("runbook_traits", "runbook_id, trait", RUNBOOK_TRAITS)
            .await?,
        volume_connectors: source
            .rows("volume_connectors", "id", &with_common(VOLUME_CONNECTORS))
            .await?,
        volume_targets: source
            .rows("volume_targets", "id", &with_common(VOLUME_TARGETS))
            .await?,
        node_traits: source
            .rows("node_traits", "node_id, trait", NODE_TRAITS)
            .await?,
        node_tags: source.rows("node_tags", "node_id", NODE_TAGS).await?,
        bios_settings: source
            .rows("bios_settings", "node_id, name", BIOS_SETTINGS)
            .await?,
        node_history: source
            .rows("node_history", "id", &with_common(NODE_HISTORY))
            .await?,
        node_inventory: source.rows("node_inventory", "id", NODE_INVENTORY).await?,
        firmware: source.rows("firmware_information", "id", FIRMWARE).await?,
        not_imported,
    })
}
