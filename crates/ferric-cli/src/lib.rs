//! The `ferric` client commands: one subcommand per Bare Metal API operation
//! (`ferric node list` ↔ `GET /v1/nodes`), over HTTP to a running server.
//!
//! Theory of operation: clap parses the command into a resource's enum; its `run` builds the
//! request, [`client::Client`] sends it with the microversion header and credentials and
//! decodes Ironic's error bodies, and [`output`] shows the answer as a table, JSON or YAML.
//! Provision verbs with `--wait` hand over to [`wait`], which follows the node until it rests.
//! Every failure is a [`CliError`], printed as one line on stderr with exit code 1.

pub mod client;
mod console;
mod context;
mod error;
mod node;
mod node_data;
mod node_states;
pub mod openstack;
pub mod output;
mod ports;
mod resources;
mod templates;
pub mod wait;

use std::process::ExitCode;

use clap::{Args, Subcommand};

pub use crate::context::GlobalArgs;
pub(crate) use crate::context::{
    Context, Patch, emit, fields_of, insert_pairs, json_argument, key_value, segment,
};
pub use crate::error::CliError;

/// The client subcommands, flattened into the `ferric` binary's command list.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Bare metal nodes: enroll, change, move through their lifecycle, power and boot.
    ///
    /// Example: `ferric node create --driver fake-hardware --name n1`, then
    /// `ferric node manage n1 --wait` and `ferric node provide n1 --wait`.
    Node(NodeArgs),
    /// Ports: the NICs of nodes, by MAC address.
    ///
    /// Example: `ferric port create 52:54:00:12:34:56 --node n1`.
    Port(PortArgs),
    /// Port groups: bonds of a node's ports (API 1.23).
    ///
    /// Example: `ferric portgroup create --node n1 --name bond0 --mode 802.3ad`.
    Portgroup(PortgroupArgs),
    /// Hardware types the conductors have enabled.
    ///
    /// Example: `ferric driver list`, `ferric driver properties fake-hardware`.
    Driver(DriverArgs),
    /// Conductors registered with the API (API 1.49).
    ///
    /// Example: `ferric conductor list --long`.
    Conductor(ConductorArgs),
    /// Allocations: ask for an available node by resource class and traits (API 1.52).
    ///
    /// Example: `ferric allocation create --resource-class baremetal --trait CUSTOM_GPU`.
    Allocation(AllocationArgs),
    /// Chassis: groups of nodes that share an enclosure.
    ///
    /// Example: `ferric chassis create --description "rack 4"`.
    Chassis(ChassisArgs),
    /// Deploy templates: steps a deployment runs when the node's instance traits name the
    /// template (API 1.55).
    ///
    /// Example: `ferric deploy-template list`.
    DeployTemplate(DeployTemplateArgs),
    /// Runbooks: named clean/service step lists nodes with a matching trait may run (API
    /// 1.92).
    ///
    /// Example: `ferric runbook list`.
    Runbook(RunbookArgs),
}

macro_rules! resource_args {
    ($name:ident, $command:ty) => {
        #[derive(Debug, Args)]
        pub struct $name {
            #[command(flatten)]
            global: GlobalArgs,
            #[command(subcommand)]
            command: $command,
        }
    };
}

resource_args!(NodeArgs, node::NodeCommand);
resource_args!(PortArgs, ports::PortCommand);
resource_args!(PortgroupArgs, ports::PortgroupCommand);
resource_args!(DriverArgs, resources::DriverCommand);
resource_args!(ConductorArgs, resources::ConductorCommand);
resource_args!(AllocationArgs, resources::AllocationCommand);
resource_args!(ChassisArgs, resources::ChassisCommand);
resource_args!(DeployTemplateArgs, templates::DeployTemplateCommand);
resource_args!(RunbookArgs, templates::RunbookCommand);

/// Runs a client subcommand; returns the process's exit code after printing any error.
pub fn run(command: ClientCommand) -> ExitCode {
    match dispatch(command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("ferric: {error}");
            ExitCode::FAILURE
        }
    }
}

fn dispatch(command: ClientCommand) -> Result<(), CliError> {
    match command {
        ClientCommand::Node(args) => node::run(&Context::new(&args.global)?, args.command),
        ClientCommand::Port(args) => ports::run_port(&Context::new(&args.global)?, args.command),
        ClientCommand::Portgroup(args) => {
            ports::run_portgroup(&Context::new(&args.global)?, args.command)
        }
        ClientCommand::Driver(args) => {
            resources::run_driver(&Context::new(&args.global)?, args.command)
        }
        ClientCommand::Conductor(args) => {
            resources::run_conductor(&Context::new(&args.global)?, args.command)
        }
        ClientCommand::Allocation(args) => {
            resources::run_allocation(&Context::new(&args.global)?, args.command)
        }
        ClientCommand::Chassis(args) => {
            resources::run_chassis(&Context::new(&args.global)?, args.command)
        }
        ClientCommand::DeployTemplate(args) => {
            templates::run_deploy_template(&Context::new(&args.global)?, args.command)
        }
        ClientCommand::Runbook(args) => {
            templates::run_runbook(&Context::new(&args.global)?, args.command)
        }
    }
}
