//! `lab serve-bmc`: the background process that runs every machine's virtual BMC.
//!
//! Started by `lab up` inside the namespace (so QEMU, which it starts on power-on, sees the
//! taps), it binds one Redfish listener (TCP) and one IPMI listener (UDP) per machine on the
//! bridge address, both on the same machine control, writes its pid file
//! once all listen (the readiness signal `lab up` waits for), and on SIGTERM powers every
//! machine off before it exits. Beside the BMCs it runs the bridge's LLDP announcements
//! (`lldp.rs`).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::{TcpListener, UdpSocket};
use tokio::signal::unix::{SignalKind, signal};

use crate::ipmi::{self, IpmiBmc};
use crate::layout::{LabPaths, LabState};
use crate::qemu::{QemuConfig, QemuMachine};
use crate::redfish::{self, RedfishBmc};

/// How long a graceful shutdown waits for the guest before pulling the plug.
const SOFT_OFF_TIMEOUT: Duration = Duration::from_secs(60);

pub(crate) async fn serve(paths: LabPaths) -> anyhow::Result<()> {
    let state_file = paths.state_file();
    let text = std::fs::read_to_string(&state_file)
        .with_context(|| format!("cannot read {}", state_file.display()))?;
    let lab: LabState = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a lab state file", state_file.display()))?;
    let qemu_binary = crate::host::find_program("qemu-system-x86_64")
        .context("qemu-system-x86_64 is not installed")?;

    let mut machines = Vec::new();
    let mut servers = tokio::task::JoinSet::new();
    let (stop_sender, stop_receiver) = tokio::sync::watch::channel(false);
    for node in &lab.nodes {
        let name = &node.info.name;
        let machine = Arc::new(QemuMachine::new(
            node.info.clone(),
            QemuConfig {
                qemu_binary: qemu_binary.clone(),
                tap: node.tap.clone(),
                disks: paths.disks(name),
                hardware: node.hardware,
                volume_dir: paths.node_dir(name),
                console: paths.console(name),
                qmp_socket: paths.qmp_socket(name),
                pid_file: paths.qemu_pid(name),
                log_file: paths.qemu_log(name),
                sercon_file: paths.sercon(),
                soft_off_timeout: SOFT_OFF_TIMEOUT,
                firmware: node.firmware,
                nvram: paths.nvram(name),
            },
        ));
        let bmc = Arc::new(RedfishBmc::new(
            machine.clone(),
            &node.redfish_username,
            &node.redfish_password,
        ));
        let address = format!("{}:{}", lab.bridge_address, node.bmc_port);
        let listener = TcpListener::bind(&address)
            .await
            .with_context(|| format!("BMC of {name} cannot listen on {address}"))?;
        tracing::info!(machine = %name, %address, "Redfish BMC listening");
        let mut stop = stop_receiver.clone();
        servers.spawn(async move {
            axum::serve(listener, redfish::router(bmc))
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                })
                .await
        });
        if node.ipmi_port != 0 {
            let ipmi_bmc = Arc::new(
                IpmiBmc::new(machine.clone(), &node.ipmi_username, &node.ipmi_password)
                    .with_context(|| format!("IPMI BMC of {name}"))?,
            );
            let address = format!("{}:{}", node.ipmi_address, node.ipmi_port);
            let socket = UdpSocket::bind(&address)
                .await
                .with_context(|| format!("IPMI BMC of {name} cannot listen on UDP {address}"))?;
            tracing::info!(machine = %name, %address, "IPMI BMC listening");
            let mut stop = stop_receiver.clone();
            servers.spawn(ipmi::serve(socket, ipmi_bmc, async move {
                let _ = stop.wait_for(|stopped| *stopped).await;
            }));
        }
        machines.push(machine);
    }

    // The bridge speaks LLDP out of every machine's tap, as a switch does out of its ports.
    let ports = lab
        .nodes
        .iter()
        .map(|node| (node.tap.clone(), node.info.name.clone()))
        .collect();
    let management_address = lab
        .bridge_address
        .parse()
        .unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
    let mut stop = stop_receiver.clone();
    tokio::spawn(crate::lldp::announce(
        lab.bridge.clone(),
        ports,
        lab.namespace.clone(),
        management_address,
        async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        },
    ));

    let pid_file = paths.bmc_pid();
    std::fs::write(&pid_file, format!("{}\n", std::process::id()))
        .with_context(|| format!("cannot write {}", pid_file.display()))?;

    let mut terminate = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    tokio::select! {
        _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
        _ = interrupt.recv() => tracing::info!("SIGINT: stopping"),
        Some(result) = servers.join_next() => tracing::error!(?result, "a BMC server stopped"),
    }
    let _ = stop_sender.send(true);
    for machine in &machines {
        if let Err(error) = machine.shutdown().await {
            tracing::warn!(%error, "cannot power off");
        }
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        while servers.join_next().await.is_some() {}
    })
    .await;
    let _ = std::fs::remove_file(&pid_file);
    Ok(())
}
