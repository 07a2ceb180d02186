//! `ferric import ironic --from URL`: takes over a running Ironic's machines by reading
//! Ironic's own database (no Ironic code) and writing Ferric's, every record with its UUID,
//! name and times (docs/import.md).
//!
//! Theory of operation: connect to Ironic's database (`source.rs`, any of the three
//! databases Ironic runs on), check it is an Ironic schema of a supported release and that
//! no Ironic conductor is alive (`ironic_schema.rs`), read every table into memory, map the
//! rows to Ferric's records checking each node against this Ferric's hardware types
//! (`map.rs`), then write them all in one transaction (`ferric_db::Store::import`). Nothing
//! is written on a dry run, when the checks fail, or when `--strict` meets a node left out.
//! Secrets (`driver_info`, the database password) are never printed.

mod ironic_schema;
mod map;
mod source;

use std::collections::HashSet;
use std::process::ExitCode;

use anyhow::Context;
use ferric_db::{ImportMode, ImportSet, Page, Store};
use ferric_model::ProvisionState;
use uuid::Uuid;

use crate::db::DbArgs;

/// Migrations from other provisioning services.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ImportCommand {
    /// Take over an OpenStack Ironic's machines: read Ironic's database and write every node
    /// (with its ports, portgroups, history, BIOS settings, inventory, firmware, volume
    /// connectors and targets), chassis, allocation, deploy template and runbook into
    /// Ferric's database, with the same UUIDs and names. Stop Ironic's conductors first.
    /// See docs/import.md.
    Ironic(IronicArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct IronicArgs {
    /// Ironic's database, as in its ironic.conf [database]connection:
    /// mysql+pymysql://user:password@host/ironic, postgresql://…, sqlite:////path/ironic.sqlite.
    #[arg(long, value_name = "URL")]
    from: String,
    #[command(flatten)]
    database: DbArgs,
    /// Print what would be imported and what would not, write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Overwrite records that an earlier import (or Ferric since) already wrote with Ironic's
    /// current values; without it they are kept as they are.
    #[arg(long)]
    update: bool,
    /// Import nothing when any node cannot be imported (instead of leaving it out).
    #[arg(long)]
    strict: bool,
    /// Import even though an Ironic conductor sent a heartbeat in the last two minutes. Two
    /// services driving one machine fight over it: stop Ironic first.
    #[arg(long)]
    force: bool,
}

/// Whether a node in `state` is taken over mid-work (docs/import.md).
pub(crate) fn is_transient(state: ProvisionState) -> bool {
    state.is_unstable()
}

/// Runs one `ferric import` command.
pub(crate) fn run(command: ImportCommand) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("ferric import: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let ImportCommand::Ironic(args) = command;
    match runtime.block_on(import_ironic(&args)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("ferric import: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Prints a progress line (stderr, so the summary on stdout stays clean).
fn progress(message: &str) {
    eprintln!("ferric import: {message}");
}

async fn import_ironic(args: &IronicArgs) -> anyhow::Result<ExitCode> {
    let settings = args.database.settings()?;
    let (drivers, _) = settings.conductor()?;

    let source = source::Source::connect(&args.from).await?;
    let outcome = read_and_map(args, &source, &drivers).await;
    source.close().await;
    let (release, mapped) = outcome?;

    let refused = args.strict && mapped.skipped.iter().any(|skip| skip.kind == "node");
    let store = if args.dry_run || refused {
        None
    } else {
        Some(
            Store::open(&settings.database_url)
                .await
                .context("cannot open Ferric's database")?,
        )
    };
    let plan = match &store {
        Some(store) => Some(Plan::against(store, &mapped.set).await?),
        None => None,
    };
    print_summary(release, &mapped, plan.as_ref(), args);
    if refused {
        anyhow::bail!(
            "--strict: {} node(s) cannot be imported (listed above); nothing was written",
            mapped
                .skipped
                .iter()
                .filter(|skip| skip.kind == "node")
                .count()
        );
    }
    let Some(store) = store else {
        println!("dry run: nothing was written");
        return Ok(ExitCode::SUCCESS);
    };
    let mode = if args.update {
        ImportMode::Update
    } else {
        ImportMode::KeepExisting
    };
    progress(&format!(
        "writing {} records in one transaction",
        mapped.set.record_count()
    ));
    let started = std::time::Instant::now();
    // A line every 5,000 rows: a large site's import takes a while.
    let report = |done: usize, total: usize| {
        if done.is_multiple_of(5_000) && done < total {
            progress(&format!(
                "written {done} of {total} records (not committed yet)"
            ));
        }
    };
    let written = store.import_reporting(&mapped.set, mode, &report).await;
    store.close().await;
    let written = written.context("nothing was imported")?;
    println!(
        "imported: {written} rows written in {:.1} s (into {})",
        started.elapsed().as_secs_f64(),
        ferric_db::redact(&settings.database_url)
    );
    if mapped.transient > 0 {
        println!(
            "{} node(s) were mid-work in Ironic: Ferric's conductor takes them over at start \
             as a dead conductor's (docs/import.md)",
            mapped.transient
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn read_and_map(
    args: &IronicArgs,
    source: &source::Source,
    drivers: &ferric_drivers::Drivers,
) -> anyhow::Result<(&'static str, map::Mapped)> {
    let release = ironic_schema::check_revision(source).await?;
    progress(&format!(
        "{} database of {release} ({})",
        source.backend(),
        ferric_db::redact(&args.from)
    ));
    let alive = ironic_schema::live_conductors(source, chrono::Utc::now()).await?;
    if !alive.is_empty() {
        if args.force {
            progress(&format!(
                "--force: importing although Ironic conductor(s) {} look alive",
                alive.join(", ")
            ));
        } else {
            anyhow::bail!(
                "Ironic conductor(s) {} are alive (online, with a heartbeat in the last {} s; \
                 on SQLite, still marked online): stop Ironic's conductors first, so that two \
                 services never drive one machine (or give --force if they are gone for \
                 good); nothing was written",
                alive.join(", "),
                ironic_schema::CONDUCTOR_ALIVE_SECONDS
            );
        }
    }
    progress("reading Ironic's tables");
    let data = ironic_schema::read_all(source).await?;
    progress(&format!(
        "read {} nodes, {} ports",
        data.nodes.len(),
        data.ports.len()
    ));
    let check = |node: &mut ferric_model::resources::Node| -> Result<(), String> {
        if drivers.get(&node.driver).is_none() {
            let enabled: Vec<&str> = drivers.enabled().iter().map(|kind| kind.name).collect();
            return Err(format!(
                "its driver {} is not enabled here (enabled_hardware_types: {})",
                node.driver,
                enabled.join(", ")
            ));
        }
        drivers
            .apply_defaults(node)
            .map_err(|error| error.to_string())
    };
    Ok((release, map::map(&data, &check)))
}

/// What the import will do with each kind of record, against what Ferric already holds.
#[derive(Debug, Default)]
struct Plan {
    /// `(kind, new, already stored)`.
    rows: Vec<(&'static str, usize, usize)>,
}

impl Plan {
    async fn against(store: &Store, set: &ImportSet) -> anyhow::Result<Self> {
        fn split<T>(
            kind: &'static str,
            records: &[T],
            uuid: fn(&T) -> Uuid,
            stored: &HashSet<Uuid>,
        ) -> (&'static str, usize, usize) {
            let present = records
                .iter()
                .filter(|record| stored.contains(&uuid(record)))
                .count();
            (kind, records.len() - present, present)
        }
        let nodes: HashSet<Uuid> = store
            .node_list(&Default::default(), &Page::all())
            .await?
            .iter()
            .map(|node| node.uuid)
            .collect();
        let ports: HashSet<Uuid> = store
            .port_list(&Default::default(), &Page::all())
            .await?
            .iter()
            .map(|port| port.uuid)
            .collect();
        let portgroups: HashSet<Uuid> = store
            .portgroup_list(&Default::default(), &Page::all())
            .await?
            .iter()
            .map(|portgroup| portgroup.uuid)
            .collect();
        let chassis: HashSet<Uuid> = store
            .chassis_list(&Page::all())
            .await?
            .iter()
            .map(|chassis| chassis.uuid)
            .collect();
        let allocations: HashSet<Uuid> = store
            .allocation_list(&Default::default(), &Page::all())
            .await?
            .iter()
            .map(|allocation| allocation.uuid)
            .collect();
        let templates: HashSet<Uuid> = store
            .deploy_template_list(&Page::all())
            .await?
            .iter()
            .map(|template| template.uuid)
            .collect();
        let runbooks: HashSet<Uuid> = store
            .runbook_list(&Default::default(), &Page::all())
            .await?
            .iter()
            .map(|runbook| runbook.uuid)
            .collect();
        Ok(Self {
            rows: vec![
                split("nodes", &set.nodes, |node| node.uuid, &nodes),
                split("ports", &set.ports, |port| port.uuid, &ports),
                split("portgroups", &set.portgroups, |pg| pg.uuid, &portgroups),
                split("chassis", &set.chassis, |chassis| chassis.uuid, &chassis),
                split("allocations", &set.allocations, |a| a.uuid, &allocations),
                split(
                    "deploy templates",
                    &set.deploy_templates,
                    |t| t.uuid,
                    &templates,
                ),
                split("runbooks", &set.runbooks, |runbook| runbook.uuid, &runbooks),
            ],
        })
    }

    fn stored(&self, kind: &str) -> Option<(usize, usize)> {
        self.rows
            .iter()
            .find(|(name, _, _)| *name == kind)
            .map(|(_, new, present)| (*new, *present))
    }
}

/// The summary table: per kind, how many are imported, already there, left out.
fn print_summary(release: &str, mapped: &map::Mapped, plan: Option<&Plan>, args: &IronicArgs) {
    let set = &mapped.set;
    let skipped = |kind: &str| mapped.skipped.iter().filter(|s| s.kind == kind).count();
    let rows: [(&str, &str, usize); 14] = [
        ("nodes", "node", set.nodes.len()),
        ("ports", "port", set.ports.len()),
        ("portgroups", "portgroup", set.portgroups.len()),
        ("chassis", "chassis", set.chassis.len()),
        ("allocations", "allocation", set.allocations.len()),
        (
            "deploy templates",
            "deploy template",
            set.deploy_templates.len(),
        ),
        ("runbooks", "runbook", set.runbooks.len()),
        (
            "volume connectors",
            "volume connector",
            set.volume_connectors.len(),
        ),
        ("volume targets", "volume target", set.volume_targets.len()),
        ("node history", "node history entry", set.history.len()),
        ("BIOS settings", "BIOS setting", set.bios_settings.len()),
        (
            "firmware components",
            "firmware component",
            set.firmware_components.len(),
        ),
        ("node inventories", "node inventory", set.inventories.len()),
        (
            "node traits",
            "-",
            set.nodes.iter().map(|node| node.traits.len()).sum(),
        ),
    ];
    let verb = if args.dry_run {
        "would import"
    } else {
        "to import"
    };
    println!("Ironic release: {release}");
    println!(
        "{:<22} {:>12} {:>9} {:>14} {:>9}",
        "resource", verb, "new", "already stored", "left out"
    );
    for (name, kind, count) in rows {
        let (new, present) = match plan.and_then(|plan| plan.stored(name)) {
            Some((new, present)) => (new.to_string(), present.to_string()),
            None => ("-".to_owned(), "-".to_owned()),
        };
        println!(
            "{name:<22} {count:>12} {new:>9} {present:>14} {:>9}",
            skipped(kind)
        );
    }
    if let Some(plan) = plan
        && plan.rows.iter().any(|(_, _, present)| *present > 0)
    {
        println!(
            "records already stored are {}",
            if args.update {
                "overwritten with Ironic's values (--update)"
            } else {
                "kept as they are (give --update to bring changes over)"
            }
        );
    }
    for (what, count, why) in &mapped.dropped {
        println!("not imported: {count} {what}: {why}");
    }
    if mapped.transient > 0 {
        println!(
            "{} node(s) are in a transient state: imported as a conductor takeover treats them \
             (docs/import.md)",
            mapped.transient
        );
    }
    for skip in &mapped.skipped {
        println!("left out: {} {}: {}", skip.kind, skip.ident, skip.reason);
    }
}

/// [`ImportSet::record_count`] for the progress line.
trait RecordCount {
    fn record_count(&self) -> usize;
}

impl RecordCount for ImportSet {
    fn record_count(&self) -> usize {
        self.chassis.len()
            + self.nodes.len()
            + self.portgroups.len()
            + self.ports.len()
            + self.allocations.len()
            + self.deploy_templates.len()
            + self.runbooks.len()
            + self.volume_connectors.len()
            + self.volume_targets.len()
            + self.history.len()
            + self.bios_settings.len()
            + self.firmware_components.len()
            + self.inventories.len()
    }
}
