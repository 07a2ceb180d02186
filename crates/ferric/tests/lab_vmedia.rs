//! End-to-end: a lab machine with DHCP denied boots the agent from Redfish virtual media and
//! is inspected and deployed with static addresses from its node's `network_data` (issue 23).
//!
//! Runs only with `--features lab-e2e` (root; `scripts/install-deps.sh --lab`, which also
//! installs GRUB and xorriso for the ISO; the agent built beside the `ferric` binary):
//! `cargo test -p ferric --features lab-e2e --test lab_vmedia`. Like `lab_lifecycle` it is a
//! `harness = false` binary that runs itself again inside the lab's namespace.
//!
//! One machine (`node-0`, the lab's default firmware), `ferric lab deny-dhcp node-0`; a node
//! with the `redfish-virtual-media` boot interface, `driver_info.dhcp_less` and
//! `network_data` giving its NIC 10.231.0.60/24. Phases, each timed: validate (and a
//! DHCP-less node without `network_data` refused there); inspection through the agent booted
//! from the per-node ISO (the BMC's VirtualMedia InsertMedia, a one-time boot from CD);
//! deploy (power-on → first heartbeat, then the image written and checked on the disk file);
//! the ISO ejected afterwards (`GET /v1/nodes/{node}/vmedia`); and the lab's DHCP log shows no
//! lease for the machine. The deployment boots a per-host ISO made beforehand, as Metal3
//! ships one, named in `driver_info.deploy_iso` (issue 39): the BMC gets Ferric's copy.
//!
//! With `FERRIC_E2E_SECURE_BOOT=1` the machine is `lab up --firmware secure-boot` (OVMF with
//! secure boot on and Microsoft's keys) and the node has capability `secure_boot:true`, so its
//! ISOs boot through Debian's signed shim, GRUB and kernel; the console must show the
//! kernel's "Secure boot enabled".

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ferric_testkit::lab::{self, API, Client, Lab, enroll_machine};
use serde_json::{Value, json};

const SUITE: &str = "lab_vmedia";
const NAMESPACE: &str = "ferric-vmedia-e2e";
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// The machine's static address (outside the lab's DHCP range, .100–.199).
const STATIC_ADDRESS: &str = "10.231.0.60";
/// Ferric's boot file server in the lab (`Lab::server_command`).
const BOOT_HTTP: &str = "http://10.231.0.1:8080";

fn main() -> std::process::ExitCode {
    lab::main(SUITE, outside, inside)
}

/// `FERRIC_E2E_SECURE_BOOT=1`: the secure-boot variant.
fn secure_boot() -> bool {
    std::env::var_os("FERRIC_E2E_SECURE_BOOT").is_some_and(|value| value == "1")
}

fn phase(name: &str, started: Instant) {
    lab::phase(SUITE, name, started);
}

/// Builds the ramdisk and a 4 MiB image, brings up a one-machine lab with DHCP denied to it,
/// runs the scenario inside the namespace and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let lab = Lab::new(
        SUITE,
        NAMESPACE,
        "ferric-vmedia",
        env!("CARGO_BIN_EXE_ferric"),
    );
    let kept = "server.log, lab/node-0/console.log, lab/dnsmasq.log, lab/bmc.log";
    lab.outside(kept, || {
        let started = Instant::now();
        lab.build_ramdisk()?;
        let image: Vec<u8> = (0..4u32 << 20)
            .map(|index| (index.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        std::fs::write(lab.dir.join("boot/images/pattern.img"), &image)?;
        std::fs::write(lab.dir.join("pattern.img.sha256"), lab::sha256_hex(&image))?;
        eprintln!(
            "lab_vmedia: ramdisk and image ready: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let mut up = vec!["--nodes", "1", "--memory", "512"];
        if secure_boot() {
            up.extend(["--firmware", "secure-boot"]);
        }
        lab.up(&up)?;
        lab.lab(&["deny-dhcp", "node-0"], "ferric lab deny-dhcp")?;
        lab.run_inside()
    })
}

fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab = Lab::at(
        SUITE,
        NAMESPACE,
        dir.to_owned(),
        env!("CARGO_BIN_EXE_ferric"),
    );
    let machines = lab.machines()?;
    let machine = &machines[0];
    let mac = machine["mac"]
        .as_str()
        .context("lab.json: no MAC")?
        .to_owned();
    let client = Client::new(SUITE, API, Duration::from_secs(120), PHASE_TIMEOUT)?;
    let _server = lab.server(lab.server_command(), &client)?;
    let digest = std::fs::read_to_string(dir.join("pattern.img.sha256"))?;
    let driver_info = json!({
        "redfish_address": machine["redfish_address"],
        "redfish_system_id": machine["redfish_system_id"],
        "redfish_username": machine["redfish_username"],
        "redfish_password": machine["redfish_password"],
        "dhcp_less": true,
    });
    let node = |name: &str, network_data: Value| {
        json!({
            "name": name,
            "driver": "redfish",
            "boot_interface": "redfish-virtual-media",
            "deploy_interface": "direct",
            "inspect_interface": "agent",
            "automated_clean": false,
            "properties": if secure_boot() {
                json!({"capabilities": "secure_boot:true"})
            } else {
                json!({})
            },
            "driver_info": driver_info,
            "network_data": network_data,
            "instance_info": {
                "image_source": "pattern.img",
                "image_disk_format": "raw",
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": digest.trim(),
            },
        })
    };

    // Validate: the DHCP-less node without network_data is refused, naming the fix.
    let started = Instant::now();
    let bare = client.expect(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(node("no-network-data", json!({}))),
        201,
    )?;
    let bare = bare["uuid"].as_str().context("no uuid")?.to_owned();
    let answer = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{bare}/validate"),
        None,
        200,
    )?;
    ensure!(
        answer["boot"]["result"] == false
            && answer["boot"]["reason"]
                .as_str()
                .unwrap_or("")
                .contains("set the node's network_data"),
        "a DHCP-less node without network_data validated: {answer}"
    );
    client.expect(
        reqwest::Method::DELETE,
        &format!("/v1/nodes/{bare}"),
        None,
        204,
    )?;
    let network_data = json!({
        "links": [{"id": "nic0", "type": "phy", "ethernet_mac_address": mac}],
        "networks": [{"id": "provisioning", "type": "ipv4", "link": "nic0",
            "ip_address": STATIC_ADDRESS, "netmask": "255.255.255.0",
            "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.231.0.1"}]}],
        "services": [{"type": "dns", "address": "10.231.0.1"}],
    });
    let uuid = enroll_machine(&client, machine, node("node-0", network_data))?;
    let answer = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/validate"),
        None,
        200,
    )?;
    for kind in ["power", "boot", "deploy", "inspect"] {
        ensure!(
            answer[kind]["result"] == true,
            "{kind} does not validate: {answer}"
        );
    }
    phase("enroll + validate", started);

    let started = Instant::now();
    client.put_provision(&uuid, "manage")?;
    client.wait_for(&uuid, "manageable")?;
    client.put_provision(&uuid, "inspect")?;
    let inspected = client.wait_for(&uuid, "manageable")?;
    ensure!(
        inspected["inspection_finished_at"].is_string(),
        "no inspection recorded: {inspected}"
    );
    let inventory = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/inventory"),
        None,
        200,
    )?;
    let addresses = inventory["inventory"]["interfaces"].to_string();
    ensure!(
        addresses.contains(STATIC_ADDRESS),
        "the agent did not report its static address: {addresses}"
    );
    phase("inspection (virtual media, static address)", started);

    // Deploy from an ISO made beforehand, as Metal3 ships one per host (its image
    // customization bakes the API's address and the host's network configuration in): the
    // node names it in driver_info.deploy_iso and Ferric boots it as given, downloading it
    // from its origin (here Ferric's own boot file server) rather than building one.
    let started = Instant::now();
    let given = prebuilt_iso(dir, &uuid, &mac)?;
    client.expect(
        reqwest::Method::PATCH,
        &format!("/v1/nodes/{uuid}"),
        Some(json!([{"op": "add", "path": "/driver_info/deploy_iso", "value": given}])),
        200,
    )?;
    phase("a per-host deploy ISO built beforehand", started);

    let started = Instant::now();
    client.put_provision(&uuid, "provide")?;
    client.wait_for(&uuid, "available")?;
    client.put_provision(&uuid, "active")?;
    client.wait_for_heartbeat(&uuid, None)?;
    phase(
        "power-on to first heartbeat (deploy, virtual media)",
        started,
    );
    client.wait_for(&uuid, "active")?;
    phase("deploy (virtual media, static address)", started);

    let disk = dir.join("lab/node-0/disk.img");
    let written =
        std::fs::read(&disk).with_context(|| format!("cannot read {}", disk.display()))?;
    let image = std::fs::read(dir.join("boot/images/pattern.img"))?;
    ensure!(
        written.get(..image.len()) == Some(image.as_slice()),
        "the disk does not hold the image"
    );
    let media = client.expect(
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/vmedia"),
        None,
        200,
    )?;
    ensure!(
        media["vmedia"].as_array().is_some_and(
            |slots| !slots.is_empty() && slots.iter().all(|slot| slot["inserted"] == false)
        ),
        "the ISO stayed inserted after the deploy: {media}"
    );
    let bmc = std::fs::read_to_string(dir.join("lab/bmc.log")).unwrap_or_default();
    let given_copy = format!("/vmedia/{uuid}-given.iso");
    ensure!(
        bmc.lines()
            .any(|line| line.contains("virtual media inserted") && line.contains(&given_copy)),
        "the BMC was not given Ferric's copy of deploy_iso ({given_copy}); see lab/bmc.log"
    );
    ensure!(
        !dir.join("boot").join(&given_copy[1..]).exists(),
        "the copy of deploy_iso outlived the deployment"
    );
    eprintln!("lab_vmedia: the deployment booted the given ISO through Ferric's copy");
    let dhcp = std::fs::read_to_string(dir.join("lab/dnsmasq.log")).unwrap_or_default();
    let leases: Vec<&str> = dhcp
        .lines()
        .filter(|line| {
            line.contains("DHCPACK")
                && line
                    .to_ascii_lowercase()
                    .contains(&mac.to_ascii_lowercase())
        })
        .collect();
    ensure!(leases.is_empty(), "dnsmasq gave node-0 a lease: {leases:?}");
    eprintln!("lab_vmedia: dnsmasq gave {mac} no lease; the agent used {STATIC_ADDRESS}");
    if secure_boot() {
        let console =
            std::fs::read_to_string(dir.join("lab/node-0/console.log")).unwrap_or_default();
        ensure!(
            console.contains("Secure boot enabled"),
            "secure boot: the kernel did not say \"Secure boot enabled\" on the console"
        );
        eprintln!("lab_vmedia: the agent's kernel booted with secure boot enabled");
    }
    Ok(())
}

/// Builds node `uuid`'s agent ISO the way a Metal3 image-customization controller would
/// ship it — the agent with the API's address, the node's identity and its network data
/// baked in, no agent token — with Ferric's own ISO builder, outside the server, and puts it
/// on the boot file server under `prebuilt/`. Returns its URL.
fn prebuilt_iso(dir: &Path, uuid: &str, mac: &str) -> anyhow::Result<String> {
    use ferric_drivers::BootSettings;
    use ferric_model::ProvisionState;
    use ferric_model::resources::{Node, Port};

    let settings = BootSettings {
        http_url: Some(BOOT_HTTP.to_owned()),
        http_root: dir.join("boot"),
        api_url: Some(API.to_owned()),
        deploy_kernel: "ferric-agent.kernel".to_owned(),
        deploy_ramdisk: "ferric-agent.initramfs".to_owned(),
        ..BootSettings::default()
    };
    let node_uuid: uuid::Uuid = uuid.parse()?;
    let mut node = Node::new(node_uuid, "redfish", ProvisionState::Manageable);
    node.network_data = serde_json::from_value(json!({
        "links": [{"id": "nic0", "type": "phy", "ethernet_mac_address": mac}],
        "networks": [{"id": "provisioning", "type": "ipv4", "link": "nic0",
            "ip_address": STATIC_ADDRESS, "netmask": "255.255.255.0",
            "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.231.0.1"}]}],
        "services": [{"type": "dns", "address": "10.231.0.1"}],
    }))?;
    if secure_boot() {
        node.properties
            .insert("capabilities".to_owned(), json!("secure_boot:true"));
    }
    let mut port = Port::new(uuid::Uuid::new_v4(), node_uuid, mac);
    port.pxe_enabled = true;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(ferric_drivers::boot_iso::build(
        &settings,
        &node,
        &[port],
        &[],
        ferric_drivers::boot_iso::ISO_TOOL,
    ))?;
    let built = ferric_drivers::boot_iso::iso_path(&settings, &node);
    let target = dir.join("boot/prebuilt/node-0.iso");
    std::fs::create_dir_all(target.parent().context("no parent")?)?;
    std::fs::rename(&built, &target)?;
    Ok(format!("{}/prebuilt/node-0.iso", BOOT_HTTP))
}
