//! `ferric-agent`: flag parsing and start-up; the agent itself is the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use ferric_agent::config::{AgentConfig, KernelArgs, PowerMode};

/// The Ferric agent: runs in a ramdisk on the machine being provisioned, finds its node through
/// the Bare Metal API, heartbeats, and serves the ironic-python-agent REST API through which
/// the conductor writes images and erases disks.
///
/// In the ramdisk every setting comes from the kernel command line (`ipa-api-url=` or
/// `ferric.api_url=`, `ipa-agent-token=`, `ipa-advertise-host=`, `BOOTIF=`); flags override it.
/// Power actions are real only inside a ramdisk built by `ferric ramdisk build`.
#[derive(Debug, Parser)]
#[command(name = "ferric-agent", version, about, long_about)]
struct Args {
    /// Bare Metal API URL, e.g. http://10.0.0.1:6385 (repeatable; default: from /proc/cmdline).
    #[arg(long = "api-url", value_name = "URL")]
    api_urls: Vec<String>,

    /// Address of the agent's own API.
    #[arg(long, default_value = "0.0.0.0:9999", value_name = "ADDR:PORT")]
    listen: SocketAddr,

    /// Host or IP put into the callback URL (default: the local address that routes to the API).
    #[arg(long, value_name = "HOST")]
    advertise_host: Option<String>,

    /// Use this file or device as a disk instead of those in /sys/block (repeatable). Tests and
    /// benchmarks point it at sparse files.
    #[arg(long = "disk", value_name = "PATH")]
    disks: Vec<PathBuf>,

    /// Root of sysfs to read the hardware from.
    #[arg(long, default_value = "/sys", value_name = "DIR")]
    sys_root: PathBuf,

    /// Root of procfs to read the hardware from.
    #[arg(long, default_value = "/proc", value_name = "DIR")]
    proc_root: PathBuf,

    /// Never power off or reboot, even inside the ramdisk (only log).
    #[arg(long)]
    dry_power: bool,

    /// Serve the command API only: no lookup, no heartbeats. Needs --agent-token.
    #[arg(long, requires = "agent_token")]
    standalone: bool,

    /// The token commands must carry, when known in advance (else minted by the lookup).
    #[arg(
        long,
        env = "FERRIC_AGENT_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    agent_token: Option<String>,

    /// Give up the lookup after this many seconds (0: never); the ramdisk restarts the agent.
    #[arg(long, default_value_t = 600, value_name = "SECONDS")]
    lookup_timeout: u64,

    /// Accept md5 image checksums.
    #[arg(long)]
    allow_md5: bool,

    /// Log as JSON lines instead of text.
    #[arg(long)]
    log_json: bool,

    /// Static addresses to configure before the lookup: the node's network_data (OpenStack
    /// network_data.json), which a virtual-media boot puts here; ignored when absent.
    #[arg(long, default_value = ferric_agent::network_data::NETWORK_DATA_PATH, value_name = "FILE")]
    network_data: PathBuf,

    /// Serve the API over plain HTTP even when the Bare Metal API could take the agent's
    /// certificate (by default the agent makes one and speaks HTTPS, as IPA's auto-TLS).
    #[arg(long)]
    no_tls: bool,

    /// Trust the PEM certificates in FILE for an `https://` API URL besides the system's roots
    /// (IPA's `ipa-cafile=`, also read from the kernel command line).
    #[arg(long, value_name = "FILE")]
    api_ca_file: Option<PathBuf>,

    /// Do not verify the API's certificate (IPA's `ipa-insecure=1`); for tests only.
    #[arg(long)]
    api_insecure: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colours only on a terminal: the ramdisk pipes the log into a file and a serial console.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    if args.log_json {
        builder.json().init();
    } else {
        builder.init();
    }

    match ferric_agent::network_data::apply_file(&args.network_data, &args.sys_root) {
        Ok(Some(plan)) => tracing::info!(
            interfaces = ?plan.interfaces,
            nameservers = ?plan.nameservers,
            "static addresses from network_data configured"
        ),
        Ok(None) => {}
        // The lookup still tries whatever network there is (DHCP on other NICs).
        Err(error) => tracing::error!(
            file = %args.network_data.display(),
            "cannot configure network_data: {error}"
        ),
    }
    let cmdline = std::fs::read_to_string(args.proc_root.join("cmdline")).unwrap_or_default();
    let kernel = KernelArgs::parse(&cmdline);
    let lldp_timeout = kernel.lldp();
    let mut config = AgentConfig::new(if args.api_urls.is_empty() {
        kernel.api_urls
    } else {
        args.api_urls
            .iter()
            .map(|url| url.trim_end_matches('/').to_owned())
            .collect()
    });
    config.listen = args.listen;
    config.advertise_host = args.advertise_host.or(kernel.advertise_host);
    config.disks = args.disks;
    config.sys_root = args.sys_root;
    config.proc_root = args.proc_root;
    config.power =
        if !args.dry_power && std::path::Path::new(ferric_agent::power::RAMDISK_MARKER).exists() {
            PowerMode::Real
        } else {
            PowerMode::Dry
        };
    config.standalone = args.standalone;
    config.agent_token = args.agent_token.or(kernel.agent_token);
    config.node_uuid = kernel.node_uuid;
    config.pxe_mac = kernel.pxe_mac;
    config.inspection_callback_url = kernel.inspection_callback_url;
    config.lldp_timeout = lldp_timeout;
    config.lookup_timeout = Duration::from_secs(args.lookup_timeout);
    config.allow_md5 = args.allow_md5;
    config.auto_tls = !args.no_tls && kernel.auto_tls;
    config.api_ca_file = args.api_ca_file.or(kernel.api_ca_file);
    config.api_insecure = args.api_insecure || kernel.api_insecure;
    if ferric_agent::rescue::rescued(&config) {
        // finalize_rescue handed the machine to its owner: the agent's API stays down.
        eprintln!("ferric-agent: this machine is rescued; the agent does not start again");
        return ExitCode::SUCCESS;
    }
    if !config.standalone && config.api_urls.is_empty() {
        eprintln!("ferric-agent: no API URL: pass --api-url or boot with ipa-api-url=URL");
        return ExitCode::from(2);
    }

    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("ferric-agent: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        let running = ferric_agent::RunningAgent::start(config)
            .await
            .map_err(|error| format!("cannot listen: {error}"))?;
        tokio::select! {
            result = running.wait() => result.map_err(|error| error.to_string()),
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error}");
            eprintln!("ferric-agent: {error}");
            ExitCode::FAILURE
        }
    }
}
