//! `ferric`: one binary for every role of the service. `main` only parses flags, loads the
//! settings and hands over to the subcommand; the work lives in the library crates.

mod boot_files;
mod config;
#[cfg(test)]
mod config_doc;
#[cfg(test)]
mod config_file;
mod db;
mod import;
mod logging;
mod server;
mod tls;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: API responses are built from many short-lived
/// JSON values, and glibc's malloc spent a third of a 1,000-node listing in its free lists
/// (`docs/benchmarks.md`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Ferric provisions bare-metal servers through their BMCs and network boot.
///
/// It speaks OpenStack Ironic's Bare Metal API v1, so the `baremetal` CLI, openstacksdk and
/// Metal3 can drive it. Run `ferric server` to start everything in one process on an embedded
/// SQLite database (./ferric.db).
#[derive(Debug, Parser)]
#[command(name = "ferric", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the Ferric server: the Bare Metal API and the conductor in one process (the
    /// inspection service too, with inspector_enabled). Conductor settings
    /// (workers, timeouts, hardware types) are in docs/conductor.md.
    ///
    /// Settings come from, lowest priority first: built-in defaults, the TOML file given with
    /// --config (or FERRIC_CONFIG), FERRIC_* environment variables, then these flags.
    /// Example: `ferric server --database-url postgres://ferric@db/ferric --api-listen 0.0.0.0:6385`.
    Server(ServerArgs),

    /// Run the inspection service alone (ironic-inspector's API, default 127.0.0.1:5050),
    /// on the same database and settings as `ferric server`; see docs/inspection.md.
    /// `ferric server` runs it in-process when inspector_enabled is set.
    Inspector(ServerArgs),

    /// A virtual lab without hardware: QEMU machines that PXE-boot on a private network, each
    /// behind a virtual BMC (Redfish). Needs root and `scripts/install-deps.sh --lab`.
    #[command(subcommand)]
    Lab(ferric_lab::LabCommand),

    /// The agent ramdisk: `ferric ramdisk build --output DIR` packs this host's kernel, busybox
    /// and ferric-agent into a kernel + initramfs pair that boots into the agent (docs/agent.md).
    #[command(subcommand)]
    Ramdisk(ferric_agent::ramdisk::RamdiskCommand),

    /// Database chores: `ferric db upgrade [--check]` (the schema), `ferric db backup FILE`
    /// and `ferric db restore FILE` (SQLite); see docs/operator-guide.md#upgrades.
    #[command(subcommand)]
    Db(db::DbCommand),

    /// Take over another service's machines: `ferric import ironic --from URL` reads an
    /// OpenStack Ironic's database and writes its nodes, ports and the rest into Ferric's
    /// (docs/import.md).
    #[command(subcommand)]
    Import(import::ImportCommand),

    /// The client commands (`node`, `port`, `portgroup`, `driver`, `conductor`,
    /// `allocation`): one per API operation, against --url / FERRIC_URL (docs/cli.md).
    #[command(flatten)]
    Client(ferric_cli::ClientCommand),
}

#[derive(Debug, clap::Args)]
struct ServerArgs {
    /// TOML file with settings (keys as in `ferric server --help`, e.g. `database_url = "…"`).
    #[arg(long, env = "FERRIC_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,

    #[command(flatten)]
    overrides: config::SettingsOverrides,

    /// Do not upgrade the database schema at start: refuse to run unless it is already at
    /// this binary's version (run `ferric db upgrade` separately). [env: FERRIC_NO_DB_UPGRADE]
    #[arg(long, env = "FERRIC_NO_DB_UPGRADE", hide_env = true)]
    no_db_upgrade: bool,
}

impl ServerArgs {
    /// What opening the store does with an older schema.
    fn schema_policy(&self) -> ferric_db::SchemaPolicy {
        if self.no_db_upgrade {
            ferric_db::SchemaPolicy::RequireCurrent
        } else {
            ferric_db::SchemaPolicy::Upgrade
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Client(command) => ferric_cli::run(command),
        Command::Db(command) => db::run(command),
        Command::Import(command) => import::run(command),
        Command::Lab(command) => match ferric_lab::run(command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("ferric lab: {error:#}");
                ExitCode::FAILURE
            }
        },
        Command::Ramdisk(command) => match ferric_agent::ramdisk::run(command) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("ferric ramdisk: {error:#}");
                ExitCode::FAILURE
            }
        },
        Command::Inspector(args) => {
            let settings = match config::Settings::load(args.config.as_deref(), &args.overrides) {
                Ok(settings) => settings,
                Err(error) => {
                    eprintln!("ferric: {error:#}");
                    return ExitCode::from(2);
                }
            };
            logging::init(&settings);
            match server::run_inspector(settings, args.schema_policy()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    tracing::error!("{error:#}");
                    eprintln!("ferric: {error:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Server(args) => {
            let settings = match config::Settings::load(args.config.as_deref(), &args.overrides) {
                Ok(settings) => settings,
                Err(error) => {
                    eprintln!("ferric: {error:#}");
                    return ExitCode::from(2);
                }
            };
            logging::init(&settings);
            match server::run(settings, args.schema_policy()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(error) => {
                    tracing::error!("{error:#}");
                    eprintln!("ferric: {error:#}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
