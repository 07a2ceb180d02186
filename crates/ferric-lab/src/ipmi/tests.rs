//! The IPMI front-end against a fake machine, driven by two independent clients: Ferric's own
//! `ipmi` driver (as the conductor uses it) and `ipmitool -I lanplus`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ferric_drivers::{BmcSettings, BootDevice, Drivers, PowerAction as DriverPowerAction};
use ferric_model::ProvisionState;
use ferric_model::resources::{Node, PowerState as NodePowerState};
use serde_json::json;
use tokio::net::UdpSocket;

use super::*;
use crate::machine::fake::FakeMachine;
use crate::machine::{BootMode, BootOverride, BootSettings, BootTarget, MachineInfo, PowerAction};

const PASSWORD: &str = "0123456789abcdef0123";

struct Bmc {
    port: u16,
    machine: Arc<FakeMachine>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn start() -> Bmc {
    let machine = Arc::new(FakeMachine::new(MachineInfo {
        name: "node-0".into(),
        uuid: "f3e7a1b0-1ab0-4000-8000-000000000000".into(),
        serial: "FERRIC-LAB-0000".into(),
        mac: "52:54:00:fe:1a:00".into(),
        memory_mib: 512,
        cpus: 1,
    }));
    let bmc =
        Arc::new(IpmiBmc::new(machine.clone(), "admin", PASSWORD).expect("valid credentials"));
    let socket = UdpSocket::bind("127.0.0.1:0").await.expect("bind UDP");
    let port = socket.local_addr().expect("local address").port();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve(socket, bmc, async move {
        let _ = stopped.await;
    }));
    Bmc {
        port,
        machine,
        _stop: stop,
    }
}

// --- Ferric's own client -------------------------------------------------------------------

fn drivers() -> Drivers {
    Drivers::new(&["ipmi"])
        .expect("ipmi is a hardware type")
        .with_bmc_settings(BmcSettings {
            retries: 2,
            ipmi_retransmit_interval: Duration::from_millis(500),
            power_state_poll_interval: Duration::from_millis(10),
            power_state_change_timeout: Duration::from_secs(5),
            ..BmcSettings::default()
        })
}

fn node(port: u16, username: &str, password: &str, suite: u8) -> Node {
    let mut node = Node::new(uuid::Uuid::new_v4(), "ipmi", ProvisionState::Enroll);
    node.driver_info = json!({
        "ipmi_address": "127.0.0.1",
        "ipmi_port": port,
        "ipmi_username": username,
        "ipmi_password": password,
        "ipmi_cipher_suite": suite,
    })
    .as_object()
    .cloned()
    .expect("an object");
    drivers().apply_defaults(&mut node).expect("defaults");
    node
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferric_client_powers_and_sets_boot_devices_with_both_suites() {
    let bmc = start().await;
    for suite in [3, 17] {
        let mut node = node(bmc.port, "admin", PASSWORD, suite);
        let interfaces = drivers().load(&node).expect("interfaces");
        let power = &interfaces.power;
        assert_eq!(
            power.get_power_state(&node).await.expect("power state"),
            NodePowerState::Off
        );
        power
            .set_power(&node, DriverPowerAction::On, None)
            .await
            .expect("power on");
        assert_eq!(
            power.get_power_state(&node).await.expect("power state"),
            NodePowerState::On
        );
        // Reboot is off + on; soft off is ACPI.
        power
            .set_power(&node, DriverPowerAction::Reboot, None)
            .await
            .expect("reboot");
        power
            .set_power(&node, DriverPowerAction::SoftOff, None)
            .await
            .expect("soft off");
        assert_eq!(
            power.get_power_state(&node).await.expect("power state"),
            NodePowerState::Off
        );

        let management = &interfaces.management;
        management
            .set_boot_device(&mut node, BootDevice::Pxe, true)
            .await
            .expect("boot device");
        assert_eq!(
            bmc.machine.boot(),
            BootSettings {
                target: BootTarget::Pxe,
                enabled: BootOverride::Continuous,
                mode: BootMode::Uefi,
            }
        );
        let setting = management.get_boot_device(&node).await.expect("get boot");
        assert_eq!(setting.device, Some(BootDevice::Pxe));
        assert_eq!(setting.persistent, Some(true));

        node.boot_mode = Some("bios".into());
        management
            .set_boot_device(&mut node, BootDevice::Disk, false)
            .await
            .expect("boot device");
        assert_eq!(
            bmc.machine.boot(),
            BootSettings {
                target: BootTarget::Hdd,
                enabled: BootOverride::Once,
                mode: BootMode::Legacy,
            }
        );
        let setting = management.get_boot_device(&node).await.expect("get boot");
        assert_eq!(setting.device, Some(BootDevice::Disk));
        assert_eq!(setting.persistent, Some(false));

        // NMI needs a running machine, as on real BMCs.
        let error = management
            .inject_nmi(&node)
            .await
            .expect_err("machine is off");
        assert!(error.to_string().contains("0xd5"), "{error}");
    }
    assert_eq!(
        bmc.machine.actions(),
        [
            PowerAction::On,
            PowerAction::ForceOff,
            PowerAction::On,
            PowerAction::GracefulShutdown,
        ]
        .repeat(2)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferric_client_is_refused_with_wrong_credentials() {
    let bmc = start().await;
    for suite in [3, 17] {
        let node = node(bmc.port, "admin", "not-the-password", suite);
        let interfaces = drivers().load(&node).expect("interfaces");
        let error = interfaces
            .power
            .get_power_state(&node)
            .await
            .expect_err("wrong password");
        assert!(
            error.to_string().contains("authentication failed"),
            "{error}"
        );

        let node = node_with_user(bmc.port, "root", suite);
        let error = interfaces
            .power
            .get_power_state(&node)
            .await
            .expect_err("unknown user");
        assert!(error.to_string().contains("unauthorized name"), "{error}");
    }
    assert!(bmc.machine.actions().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ferric_client_without_a_suite_asks_the_bmc_which_it_lists() {
    let bmc = start().await;
    let mut node = node(bmc.port, "admin", PASSWORD, 17);
    node.driver_info.remove("ipmi_cipher_suite");
    let interfaces = drivers().load(&node).expect("interfaces");
    // Twice: the first session asks Get Channel Cipher Suites, the second reuses the choice.
    for _ in 0..2 {
        interfaces
            .power
            .set_power(&node, DriverPowerAction::On, None)
            .await
            .expect("power on");
        assert_eq!(
            interfaces
                .power
                .get_power_state(&node)
                .await
                .expect("state"),
            NodePowerState::On
        );
    }
    assert_eq!(bmc.machine.actions(), [PowerAction::On, PowerAction::On]);
}

fn node_with_user(port: u16, username: &str, suite: u8) -> Node {
    node(port, username, PASSWORD, suite)
}

// --- packets no client sends ---------------------------------------------------------------

#[tokio::test]
async fn bad_datagrams_get_no_answer_or_an_error_status() {
    let bmc = start().await;
    let machine = bmc.machine.clone();
    let direct = IpmiBmc::new(machine, "admin", PASSWORD).expect("valid credentials");
    assert_eq!(direct.handle(&[]).await, None);
    assert_eq!(direct.handle(&[0x06, 0, 0xFF, 0x07, 0x06]).await, None);
    // A session packet for a session that does not exist.
    let keys = rmcp::SessionKeys::derive(rmcp::CipherSuite::Three, b"key");
    let request = rmcp::ipmi_request(0x00, 0x01, 1, &[]);
    assert_eq!(
        direct
            .handle(&rmcp::session_packet(&keys, 0x1234, 1, &request))
            .await,
        None
    );
    // An Open Session Request proposing no encryption: "no cipher suite match".
    let mut open = vec![7, 0, 0, 0, 1, 0, 0, 0];
    for (kind, algorithm) in [(0u8, 1u8), (1, 1), (2, 0)] {
        open.extend_from_slice(&[kind, 0, 0, 8, algorithm, 0, 0, 0]);
    }
    let reply = direct
        .handle(&rmcp::unauthenticated_packet(
            rmcp::PAYLOAD_OPEN_SESSION_REQUEST,
            &open,
        ))
        .await
        .expect("an answer");
    let reply = rmcp::parse_packet(&reply, None).expect("a packet");
    assert_eq!(reply.payload_type, rmcp::PAYLOAD_OPEN_SESSION_RESPONSE);
    assert_eq!(reply.payload[..2], [7, 0x11]);
    // Truncated: "illegal parameter".
    let reply = direct
        .handle(&rmcp::unauthenticated_packet(
            rmcp::PAYLOAD_OPEN_SESSION_REQUEST,
            &open[..12],
        ))
        .await
        .expect("an answer");
    let reply = rmcp::parse_packet(&reply, None).expect("a packet");
    assert_eq!(reply.payload[1], 0x12);
    // Chassis commands outside a session: insufficient privilege.
    let reply = direct
        .handle(&rmcp::ipmi15_packet(&request))
        .await
        .expect("an answer");
    let packet = rmcp::parse_packet(&reply, None).expect("a packet");
    let response = rmcp::parse_ipmi_response(&packet.payload).expect("a response");
    assert_eq!(response.completion, 0xD4);
}

#[test]
fn overlong_credentials_are_refused() {
    let machine = Arc::new(FakeMachine::new(MachineInfo {
        name: "n".into(),
        uuid: "not a uuid".into(),
        serial: String::new(),
        mac: String::new(),
        memory_mib: 256,
        cpus: 1,
    }));
    assert!(IpmiBmc::new(machine.clone(), "admin", &"x".repeat(21)).is_err());
    assert!(IpmiBmc::new(machine.clone(), &"u".repeat(17), "pw").is_err());
    assert_eq!(guid_from_uuid("not a uuid"), [0; 16]);
    assert_eq!(
        guid_from_uuid("f3e7a1b0-1ab0-4000-8000-00000000000a")[..4],
        [0xF3, 0xE7, 0xA1, 0xB0]
    );
}

// --- ipmitool, an independent client -------------------------------------------------------

fn ipmitool_path() -> PathBuf {
    let path = std::env::var_os("FERRIC_IPMITOOL")
        .map_or_else(|| PathBuf::from("/usr/bin/ipmitool"), PathBuf::from);
    assert!(
        path.exists(),
        "ipmitool is not installed at {} (set FERRIC_IPMITOOL to override): run `bash \
         scripts/install-deps.sh`",
        path.display()
    );
    path
}

/// Runs `ipmitool -I lanplus -C suite` against the BMC; stdout on success, stderr otherwise.
async fn ipmitool(port: u16, suite: u8, password: &str, args: &[&str]) -> Result<String, String> {
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(ipmitool_path())
            .args(["-I", "lanplus", "-H", "127.0.0.1", "-p", &port.to_string()])
            .args(["-U", "admin", "-P", password, "-C", &suite.to_string()])
            .args(["-N", "1", "-R", "2"])
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("ipmitool finishes within a minute")
    .expect("ipmitool runs");
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipmitool_controls_power_and_boot_with_both_suites() {
    let bmc = start().await;
    for suite in [3, 17] {
        let run = async |args: &[&str]| {
            ipmitool(bmc.port, suite, PASSWORD, args)
                .await
                .unwrap_or_else(|error| panic!("ipmitool -C {suite} {args:?}: {error}"))
        };
        assert!(
            run(&["power", "status"])
                .await
                .contains("Chassis Power is off")
        );
        run(&["power", "on"]).await;
        assert!(
            run(&["power", "status"])
                .await
                .contains("Chassis Power is on")
        );
        run(&["power", "cycle"]).await;
        run(&["power", "reset"]).await;
        run(&["power", "diag"]).await;
        run(&["power", "soft"]).await;
        assert!(
            run(&["power", "status"])
                .await
                .contains("Chassis Power is off")
        );
        run(&["power", "on"]).await;
        run(&["power", "off"]).await;
        assert!(
            run(&["power", "status"])
                .await
                .contains("Chassis Power is off")
        );

        run(&["chassis", "bootdev", "pxe", "options=persistent,efiboot"]).await;
        assert_eq!(
            bmc.machine.boot(),
            BootSettings {
                target: BootTarget::Pxe,
                enabled: BootOverride::Continuous,
                mode: BootMode::Uefi,
            }
        );
        let flags = run(&["chassis", "bootparam", "get", "5"]).await;
        assert!(flags.contains("Force PXE"), "{flags}");
        assert!(
            flags.contains("Options apply to all future boots"),
            "{flags}"
        );
        assert!(flags.contains("BIOS EFI boot"), "{flags}");

        run(&["chassis", "bootdev", "disk"]).await;
        assert_eq!(
            bmc.machine.boot(),
            BootSettings {
                target: BootTarget::Hdd,
                enabled: BootOverride::Once,
                mode: BootMode::Legacy,
            }
        );
        let flags = run(&["chassis", "bootparam", "get", "5"]).await;
        assert!(
            flags.contains("Force Boot from default Hard-Drive"),
            "{flags}"
        );
        assert!(flags.contains("Options apply to only next boot"), "{flags}");

        let info = run(&["mc", "info"]).await;
        assert!(info.contains("IPMI Version              : 2.0"), "{info}");
    }
    let expected = [
        PowerAction::On,
        PowerAction::PowerCycle,
        PowerAction::ForceRestart,
        PowerAction::Nmi,
        PowerAction::GracefulShutdown,
        PowerAction::On,
        PowerAction::ForceOff,
    ];
    assert_eq!(bmc.machine.actions(), expected.repeat(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipmitool_fails_with_a_wrong_password_and_power_cycle_needs_power() {
    let bmc = start().await;
    for suite in [3, 17] {
        let error = ipmitool(bmc.port, suite, "wrong", &["power", "status"])
            .await
            .expect_err("wrong password");
        assert!(
            error.contains("RAKP 2 HMAC is invalid") || error.contains("Unable to establish"),
            "{error}"
        );
        let error = ipmitool(bmc.port, suite, PASSWORD, &["power", "cycle"])
            .await
            .expect_err("machine is off");
        assert!(error.contains("not supported in present state"), "{error}");
    }
    assert!(bmc.machine.actions().is_empty());
}

// --- Serial-over-LAN -------------------------------------------------------------------------

/// Reads the console link until its text contains `needle` (bounded wait, not a timing check).
async fn sol_read_until(link: &mut ferric_drivers::console::ConsoleLink, needle: &str) -> String {
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while !text.contains(needle) {
            match link.output.recv().await {
                Some(Ok(bytes)) => text.push_str(&String::from_utf8_lossy(&bytes)),
                other => panic!("the SOL link ended before {needle:?}: {other:?}; got {text:?}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{needle:?} never came over SOL; got {text:?}"));
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sol_relays_the_serial_port_both_ways() {
    let bmc = start().await;
    let mut node = node(bmc.port, "admin", PASSWORD, 17);
    node.console_interface = Some("ipmitool-socat".into());
    let interfaces = drivers().load(&node).expect("interfaces");
    interfaces.console.validate(&node).await.expect("valid");
    bmc.machine
        .serial_print(b"written before SOL was activated\r\n");
    let mut link = interfaces
        .console
        .attach(&node)
        .await
        .expect("SOL activates");

    // More than one packet's worth, in order, none of it from before the activation.
    let mut boot = String::from("SeaBIOS (version 1.16.2)\r\n");
    for line in 0..40 {
        boot.push_str(&format!(
            "[    0.{line:06}] Linux version 6.1 line {line}\r\n"
        ));
    }
    boot.push_str("login: ");
    bmc.machine.serial_print(boot.as_bytes());
    let text = sol_read_until(&mut link, "login: ").await;
    assert_eq!(text, boot);

    // Keystrokes reach the machine's serial port once each.
    link.input.send(b"root\r".to_vec()).await.expect("typed");
    tokio::time::timeout(Duration::from_secs(20), async {
        while bmc.machine.serial_typed() != b"root\r" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("typed: {:?}", bmc.machine.serial_typed()));

    // One SOL session at a time, as on real BMCs.
    let second = interfaces.console.attach(&node).await.unwrap_err();
    assert!(second.to_string().contains("already active"), "{second}");

    // Detaching deactivates the payload: a new session may then activate it.
    drop(link);
    let again = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Ok(link) = interfaces.console.attach(&node).await {
                return link;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("SOL can be activated again after the first session detached");
    drop(again);
}
