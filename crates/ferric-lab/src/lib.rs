//! The virtual lab: QEMU machines behind virtual Redfish BMCs on a private network namespace,
//! PXE-booting from dnsmasq and iPXE, for end-to-end tests and demos of Ferric.
//!
//! Entry points: [`LabCommand`] and [`run`], wired by the `ferric` binary as `ferric lab …`.
//! Codemap: `lab` (up/down/status), `host` (iproute2, pids), `dnsmasq`, `bmc` (the background
//! process serving every BMC), `redfish` (the protocol front-end), `machine` (the
//! protocol-neutral control core), `qemu` (its real implementation) and `qmp`; `hardware`
//! (virtio or server devices per machine) and `lldp` (the bridge's LLDP announcements).

mod bmc;
pub mod dnsmasq;
pub mod hardware;
pub mod host;
pub mod image;
pub mod ipmi;
mod lab;
pub mod layout;
pub mod lldp;
pub mod machine;
pub mod qemu;
pub mod qmp;
pub mod redfish;
pub mod secret;
mod typist;

use std::ffi::OsString;
use std::path::PathBuf;

pub use lab::NIC_ROM;

/// `ferric lab …`: a virtual lab of PXE-booting machines with Redfish BMCs (needs root).
#[derive(Debug, clap::Subcommand)]
pub enum LabCommand {
    /// Create the lab: a network namespace with a bridge, dnsmasq, N powered-off QEMU machines
    /// and their Redfish BMCs. Prints the nodes as `baremetal create` JSON for enrollment.
    Up {
        /// Number of machines (each ~250 MiB of RAM while on; boot at most 2–3 at once).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=i64::from(layout::MAX_NODES)))]
        nodes: u32,
        /// Memory per machine in MiB.
        #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(256..=4096))]
        memory: u32,
        /// The iPXE script URL handed out by DHCP (Ferric's boot file server serves it).
        #[arg(long, default_value = layout::DEFAULT_BOOT_URL)]
        boot_url: String,
        /// The machines' firmware: `uefi` (OVMF, no iPXE ROM on the NIC: the firmware's own
        /// PXE and HTTP boot; legacy boot on request), `bios` (SeaBIOS only, with the NIC's
        /// iPXE ROM) or `secure-boot` (OVMF with secure boot on and Microsoft's keys, on q35:
        /// only signed boot loaders start, e.g. the virtual-media ISO of a node with
        /// capability secure_boot:true).
        #[arg(long, value_enum, default_value_t = machine::Firmware::Uefi)]
        firmware: machine::Firmware,
        /// The machines' devices: `virtio` (virtio NIC and disks) or `server` (an e1000e NIC,
        /// an NVMe disk and a MegaRAID SAS disk). A list gives one per machine, the last
        /// repeated: `virtio,server` makes node-0 virtio and the others servers.
        #[arg(long, value_enum, value_delimiter = ',', default_value = "virtio")]
        hardware: Vec<hardware::Hardware>,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Show the namespace and each machine's power state (asked of its BMC), BMC URL and console.
    Status {
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Stop the BMCs, machines and dnsmasq and delete the namespace. Logs and consoles stay.
    Down {
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Make the lab's dnsmasq ignore one machine (no lease, no boot file), for DHCP-less
    /// tests such as virtual media with static addresses; `allow-dhcp` undoes it.
    DenyDhcp {
        /// The machine's name (`node-0`) or MAC address.
        node: String,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Let the lab's dnsmasq serve a machine `deny-dhcp` made it ignore.
    AllowDhcp {
        /// The machine's name (`node-0`) or MAC address.
        node: String,
        #[command(flatten)]
        lab: LabArgs,
    },
    /// Runs every BMC of the lab (started by `lab up` in the background; not for direct use).
    #[command(hide = true)]
    ServeBmc {
        #[command(flatten)]
        lab: LabArgs,
    },
}

#[derive(Debug, Clone, clap::Args)]
pub struct LabArgs {
    /// The lab's state directory: disks, consoles, QMP sockets, logs, lab.json.
    #[arg(long, default_value = ".lab", value_name = "DIR")]
    pub dir: PathBuf,
    /// The network namespace the lab lives in.
    #[arg(long, default_value = layout::DEFAULT_NAMESPACE)]
    pub namespace: String,
}

/// How the lab starts itself again (for `serve-bmc`, and `status` inside the namespace): the
/// program and the arguments that lead to a [`LabCommand`], e.g. `["/usr/bin/ferric", "lab"]`.
#[derive(Debug, Clone)]
pub struct SelfCommand(pub Vec<OsString>);

impl SelfCommand {
    /// This executable followed by `lab`: right for `ferric lab …` and for the example binary.
    pub fn current() -> anyhow::Result<Self> {
        let exe = std::env::current_exe()
            .map_err(|error| anyhow::anyhow!("cannot find the running executable: {error}"))?;
        Ok(Self(vec![exe.into_os_string(), "lab".into()]))
    }
}

/// Runs a lab command; blocking (each command builds the small runtime it needs).
pub fn run(command: LabCommand) -> anyhow::Result<()> {
    run_with(command, &SelfCommand::current()?)
}

/// [`run`] with an explicit way to re-invoke the lab (tests use their own binary).
pub fn run_with(command: LabCommand, this: &SelfCommand) -> anyhow::Result<()> {
    match command {
        LabCommand::Up {
            nodes,
            memory,
            boot_url,
            firmware,
            hardware,
            lab,
        } => lab::up(&lab, nodes, memory, &boot_url, firmware, &hardware, this),
        LabCommand::Status { lab } => lab::status(&lab, this),
        LabCommand::Down { lab } => lab::down(&lab),
        LabCommand::DenyDhcp { node, lab } => lab::set_dhcp(&lab, &node, false),
        LabCommand::AllowDhcp { node, lab } => lab::set_dhcp(&lab, &node, true),
        LabCommand::ServeBmc { lab } => lab::serve_bmc(&lab),
    }
}
