//! End-to-end: a lab machine provisioned through Redfish virtual media as Metal3's
//! baremetal-operator (BMO) drives it (issue 27): the requests, bodies, JSON patches and
//! `fields=` queries of the BMO replay (tests/clients/ferric_clients/bmo_scenario.py, BMO
//! commit 02aa5059), each naming the BMO line that sends it, against a real (QEMU) machine.
//!
//! Runs only with `--features lab-e2e` (root; `scripts/install-deps.sh --lab`; the agent built
//! beside the `ferric` binary or named by `FERRIC_E2E_AGENT`):
//! `cargo test -p ferric --features lab-e2e --test lab_metal3`. Like `lab_vmedia` it is a
//! `harness = false` binary that runs itself again inside the lab's namespace.
//!
//! One UEFI machine (`node-0`), DHCP denied to it: a BareMetalHost whose BMC address is
//! `redfish-virtualmedia+http://…` usually has a preprovisioning network (BMO's
//! `preprovisioningNetworkDataName`, sent as the node's `network_data`) because no DHCP
//! reaches it, and that is the case virtual media exists for. BMO registers it with its
//! `redfish-virtualmedia` BMC type's driver, interfaces and `driver_info`
//! (pkg/hardwareutils/bmc/redfish_virtualmedia.go) and points `deploy_kernel`/`deploy_ramdisk`
//! at the provisioner's HTTP server (its DEPLOY_KERNEL_URL / DEPLOY_RAMDISK_URL; no
//! DEPLOY_ISO_URL, so the provisioner builds the ISO, as Ironic does). Then: manage,
//! in-band inspection, provide (automated cleaning), the instance's `instance_info` (image
//! URL, sha256 checksum, capabilities), validate, deploy with a JSON config drive, the machine
//! boots the image from its disk (the marker on its console), deprovision (cleaning again),
//! delete. Each phase is timed.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, ensure};
use ferric_testkit::lab::{self, API, Client, Lab};
use reqwest::Method;
use serde_json::{Map, Value, json};

const SUITE: &str = "lab_metal3";
const LAB_NAMESPACE: &str = "ferric-metal3-e2e";
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// The machine's static address from its preprovisioning network data (outside the lab's
/// DHCP range, .100–.199).
const STATIC_ADDRESS: &str = "10.231.0.61";
/// The BareMetalHost's namespace and name: BMO names the node `namespace~name`
/// (ironic.go:1837 ironicNodeName).
const BMH_NAMESPACE: &str = "metal3";
const BMH_NAME: &str = "worker-0";
/// The BareMetalHost's metadata.uid: BMO's `instance_uuid` (ironic.go:704).
const HOST_UID: &str = "6f0c1d2e-3a4b-4c5d-8e9f-a0b1c2d3e4f5";
/// The provisioner's HTTP server (Ferric's boot file server in the lab).
const BOOT_HTTP: &str = "http://10.231.0.1:8080";

fn main() -> std::process::ExitCode {
    lab::main(SUITE, outside, inside)
}

fn phase(name: &str, started: Instant) {
    lab::phase(SUITE, name, started);
}

/// Builds the ramdisk and the marker image, brings up a one-machine lab with DHCP denied to
/// it, runs the scenario inside the namespace and takes the lab down.
fn outside() -> anyhow::Result<()> {
    let lab = Lab::new(
        SUITE,
        LAB_NAMESPACE,
        "ferric-metal3",
        env!("CARGO_BIN_EXE_ferric"),
    );
    let kept = "server.log, lab/node-0/console.log, lab/dnsmasq.log, lab/bmc.log";
    lab.outside(kept, || {
        let started = Instant::now();
        lab.build_ramdisk()?;
        lab::build_marker_image(&lab.dir, "FERRIC-METAL3-E2E-MARKER")?;
        eprintln!(
            "{SUITE}: ramdisk and test image ready: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        lab.up(&["--nodes", "1", "--memory", "512"])?;
        lab.lab(&["deny-dhcp", "node-0"], "ferric lab deny-dhcp")?;
        lab.run_inside()
    })
}

/// clients/updateopts.go:103 getUpdateOperation: `add` (which also replaces) when the desired
/// value is set and differs from the current one, `remove` when it is unset and present.
fn update_op(current: Option<&Value>, desired: Option<Value>, path: &str) -> Option<Value> {
    let present = current.is_some_and(|value| !value.is_null());
    match desired {
        Some(desired) if current == Some(&desired) => None,
        Some(desired) => Some(json!({"op": "add", "path": path, "value": desired})),
        None if present => Some(json!({"op": "remove", "path": path})),
        None => None,
    }
}

/// clients/updateopts.go:143 NodeUpdater over the node BMO read just before.
struct Updater<'a> {
    node: &'a Value,
    ops: Vec<Value>,
}

impl<'a> Updater<'a> {
    fn new(node: &'a Value) -> Self {
        Self {
            node,
            ops: Vec::new(),
        }
    }

    /// updateopts.go:176 SetTopLevelOpt.
    fn top(mut self, name: &str, desired: Option<Value>) -> Self {
        self.ops
            .extend(update_op(self.node.get(name), desired, &format!("/{name}")));
        self
    }

    /// updateopts.go:184-197: one field of `driver_info`, `instance_info` or `properties`.
    fn section(mut self, section: &str, settings: Vec<(&str, Option<Value>)>) -> Self {
        let empty = Map::new();
        let current = self.node[section].as_object().unwrap_or(&empty);
        for (name, desired) in settings {
            self.ops.extend(update_op(
                current.get(name),
                desired,
                &format!("/{section}/{name}"),
            ));
        }
        self
    }

    /// ironic.go:494 tryUpdateNode: no request when nothing changed; the node after it.
    fn send(self, client: &Client, uuid: &str) -> anyhow::Result<Value> {
        if self.ops.is_empty() {
            return client.node(uuid);
        }
        client.expect(
            Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(Value::Array(self.ops)),
            200,
        )
    }
}

/// BMO's read of its node (ironic.go:162 getNode, once per reconcile).
fn read(client: &Client, uuid: &str) -> anyhow::Result<Value> {
    client.node(uuid)
}

fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab = Lab::at(
        SUITE,
        LAB_NAMESPACE,
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
    let digest = std::fs::read_to_string(dir.join("marker.img.sha256"))?;
    let node_name = format!("{BMH_NAMESPACE}~{BMH_NAME}");
    let ports_query = |query: &str| format!("/v1/ports?{query}&fields=node_uuid,uuid,address");

    // --- registration (register.go Register) ------------------------------------------
    let started = Instant::now();
    // clients/features.go:28 GetSupportedMicroversions.
    let root = client.get("/v1/")?;
    ensure!(
        root["version"]["version"].as_str() >= Some("1.110"),
        "BMO wants 1.110: {root}"
    );
    // ironic.go:219 findExistingHost: by "namespace~name", then by the bare name.
    client.expect(Method::GET, &format!("/v1/nodes/{node_name}"), None, 404)?;
    client.expect(Method::GET, &format!("/v1/nodes/{BMH_NAME}"), None, 404)?;
    // ironic.go:194 getPorts(address=MAC, fields=).
    let ports = client.get(&ports_query(&format!("address={mac}")))?;
    ensure!(ports["ports"] == json!([]), "the MAC has a port: {ports}");
    // register.go:282-301 nodes.Create with the redfish-virtualmedia BMC type's fields
    // (redfish_virtualmedia.go: redfish-virtualmedia+http://ADDR/redfish/v1/Systems/ID →
    // redfish_address http://ADDR, redfish_system_id /redfish/v1/Systems/ID,
    // disableCertificateVerification → redfish_verify_ca false); register.go:270 the
    // `agent` inspect interface; the deploy interface unset for a disk image (ironic.go:842).
    let created = client.post(
        "/v1/nodes",
        json!({
            "name": node_name,
            "driver": "redfish",
            "boot_interface": "redfish-virtual-media",
            "firmware_interface": "redfish",
            "raid_interface": "redfish",
            "inspect_interface": "agent",
            "disable_power_off": false,
            "driver_info": {
                "redfish_username": machine["redfish_username"],
                "redfish_password": machine["redfish_password"],
                "redfish_address": machine["redfish_address"],
                "redfish_system_id": machine["redfish_system_id"],
                "redfish_verify_ca": false,
            },
            "properties": {"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"},
        }),
    )?;
    let uuid = created["uuid"].as_str().context("no uuid")?.to_owned();
    // ironic.go:245: found by name from now on.
    let found = client.get(&format!("/v1/nodes/{node_name}"))?;
    ensure!(found["uuid"] == created["uuid"], "by name: {found}");
    // register.go:340 createPortsForNode → ironic.go:275 createNodePort → ironic.go:288.
    client.get(&ports_query(&format!("node_uuid={uuid}")))?;
    client.get(&ports_query(&format!("address={mac}")))?;
    client.post(
        "/v1/ports",
        json!({"node_uuid": uuid, "address": mac, "pxe_enabled": true}),
    )?;
    let ports = client.get(&ports_query(&format!("address={mac}")))?;
    ensure!(
        ports["ports"][0]["node_uuid"] == json!(uuid),
        "the port by MAC: {ports}"
    );
    // register.go:202: the preprovisioning network data (static: no DHCP reaches the host).
    let network_data = json!({
        "links": [{"id": "enp1s0", "type": "phy", "ethernet_mac_address": mac}],
        "networks": [{"id": "provisioning", "type": "ipv4", "link": "enp1s0",
            "ip_address": STATIC_ADDRESS, "netmask": "255.255.255.0",
            "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.231.0.1"}],
            "network_id": "provisioning"}],
        "services": [{"type": "dns", "address": "10.231.0.1"}],
    });
    let node = read(&client, &uuid)?;
    Updater::new(&node)
        .top("network_data", Some(network_data))
        .send(&client, &uuid)?;
    // register.go:240 manage.
    client.put_provision(&uuid, "manage")?;
    client.wait_for(&uuid, "manageable")?;
    // ironic.go:307 configureNode: the deploy image (ironic.go:311 setDeployImage: kernel and
    // ramdisk URLs, no ISO), automated cleaning (ironic.go:313), capabilities (ironic.go:323).
    let node = read(&client, &uuid)?;
    let node = Updater::new(&node)
        .section(
            "driver_info",
            vec![
                (
                    "deploy_kernel",
                    Some(json!(format!("{BOOT_HTTP}/ferric-agent.kernel"))),
                ),
                (
                    "deploy_ramdisk",
                    Some(json!(format!("{BOOT_HTTP}/ferric-agent.initramfs"))),
                ),
                ("deploy_iso", None),
                ("kernel_append_params", None),
            ],
        )
        .top("automated_clean", Some(json!(true)))
        .section(
            "properties",
            vec![
                ("capabilities", Some(json!("boot_mode:uefi"))),
                ("cpu_arch", Some(json!("x86_64"))),
            ],
        )
        .send(&client, &uuid)?;
    ensure!(node["automated_clean"] == true, "configure: {node}");
    phase("registration (BMO's requests) + manage", started);

    // --- inspection (inspecthardware.go) ----------------------------------------------
    let started = Instant::now();
    // inspecthardware.go:65 in-band inspection (the `agent` inspect interface).
    client.put_provision(&uuid, "inspect")?;
    let inspected = client.wait_for(&uuid, "manageable")?;
    ensure!(
        inspected["inspection_finished_at"].is_string(),
        "no inspection recorded: {inspected}"
    );
    // inspecthardware.go:139 GetInventory.
    let inventory = client.get(&format!("/v1/nodes/{uuid}/inventory"))?;
    let interfaces = inventory["inventory"]["interfaces"].to_string();
    ensure!(
        interfaces.contains(STATIC_ADDRESS),
        "the agent did not report its static address: {interfaces}"
    );
    phase("inspection (virtual media, static address)", started);

    // --- prepare and provide (ironic.go Prepare, :1263) --------------------------------
    let started = Instant::now();
    // ironic.go:736/:738 BIOS settings (with and without their schema), :779 firmware.
    client.get(&format!("/v1/nodes/{uuid}/bios?detail=True"))?;
    client.get(&format!("/v1/nodes/{uuid}/bios"))?;
    client.get(&format!("/v1/nodes/{uuid}/firmware"))?;
    // ironic.go:1263 provide: automated cleaning through the agent on virtual media.
    client.put_provision(&uuid, "provide")?;
    client.wait_for(&uuid, "available")?;
    phase("provide (automated cleaning, virtual media)", started);

    // --- provisioning (ironic.go:698 getInstanceUpdateOpts, :596 direct deploy) --------
    let started = Instant::now();
    let node = read(&client, &uuid)?;
    let node = Updater::new(&node)
        .top("instance_uuid", Some(json!(HOST_UID)))
        .section("instance_info", vec![("capabilities", Some(json!({})))])
        .section(
            "instance_info",
            vec![
                ("boot_iso", None),
                (
                    "image_source",
                    Some(json!(format!("{BOOT_HTTP}/images/marker.img"))),
                ),
                ("image_disk_format", Some(json!("raw"))),
                ("image_pull_secret", None),
                ("image_checksum", None),
                ("image_os_hash_algo", Some(json!("sha256"))),
                ("image_os_hash_value", Some(json!(digest.trim()))),
            ],
        )
        .section(
            "driver_info",
            vec![("force_persistent_boot_device", Some(json!("Default")))],
        )
        .send(&client, &uuid)?;
    ensure!(node["instance_uuid"] == HOST_UID, "instance_uuid: {node}");
    // ironic.go:132 validateNode.
    let answer = client.get(&format!("/v1/nodes/{uuid}/validate"))?;
    for kind in ["power", "boot", "deploy", "management"] {
        ensure!(
            answer[kind]["result"] == true,
            "{kind} does not validate: {answer}"
        );
    }
    // ironic.go:1292 with ironic.go:1133 getConfigDrive: a JSON config drive.
    client.provision(
        &uuid,
        json!({
            "target": "active",
            "configdrive": {
                "meta_data": {"uuid": HOST_UID, "metal3-namespace": BMH_NAMESPACE,
                    "metal3-name": BMH_NAME, "local-hostname": BMH_NAME,
                    "local_hostname": BMH_NAME, "name": BMH_NAME},
                "network_data": {"links": [], "networks": [], "services": []},
                "user_data": format!("#cloud-config\nhostname: {BMH_NAME}\n"),
            },
        }),
    )?;
    let console_from = lab::file_len(&lab.console("node-0"));
    client.wait_for(&uuid, "active")?;
    phase("deploy (virtual media, JSON config drive)", started);
    let disk = dir.join("lab/node-0/disk.img");
    let image = std::fs::read(dir.join("boot/images/marker.img"))?;
    let written = lab::read_at(&disk, 0, image.len())?;
    // The agent moves the GPT's backup header to the disk's end and adds the config drive's
    // partition (LBA 1 and the entries, LBA 2–33, differ): past them, the disk is the image.
    const PAST_GPT: usize = 34 * 512;
    ensure!(
        written.get(PAST_GPT..) == image.get(PAST_GPT..),
        "{} does not hold the deployed image",
        disk.display()
    );
    let entries = utf16le("config-2");
    ensure!(
        written
            .get(1024..PAST_GPT)
            .is_some_and(|gpt| gpt.windows(entries.len()).any(|w| w == entries)),
        "no config-2 partition in the disk's GPT"
    );
    let size = std::fs::metadata(&disk)?.len();
    // The agent puts the config drive's 64 MiB partition in the last free, aligned space
    // before the backup GPT: within the disk's last 80 MiB.
    let tail = lab::read_at(&disk, size.saturating_sub(80 << 20), 80 << 20)?;
    let needle = format!("\"metal3-name\": \"{BMH_NAME}\"");
    let compact = format!("\"metal3-name\":\"{BMH_NAME}\"");
    ensure!(
        [needle, compact]
            .iter()
            .any(|text| tail.windows(text.len()).any(|w| w == text.as_bytes())),
        "the config drive at the disk's end has no meta_data naming the BareMetalHost"
    );
    let marker = std::fs::read_to_string(dir.join("marker"))?;
    let booted = Instant::now();
    lab.wait_for_console(
        "node-0",
        marker.trim(),
        console_from,
        PHASE_TIMEOUT,
        "the deployed image did not print its marker",
    )?;
    phase("boot from disk", booted);

    // --- deprovision and delete (ironic.go:1473, :1528, :1582) -------------------------
    let started = Instant::now();
    client.put_provision(&uuid, "deleted")?;
    client.wait_for(&uuid, "available")?;
    phase("deprovision (automated cleaning)", started);
    let node = read(&client, &uuid)?;
    Updater::new(&node)
        .top("instance_uuid", None)
        .send(&client, &uuid)?;
    client.delete(&format!("/v1/nodes/{uuid}"), 204)?;
    client.expect(Method::GET, &format!("/v1/nodes/{node_name}"), None, 404)?;
    let ports = client.get(&ports_query(&format!("address={mac}")))?;
    ensure!(
        ports["ports"] == json!([]),
        "the port outlived its node: {ports}"
    );

    let dhcp = std::fs::read_to_string(dir.join("lab/dnsmasq.log")).unwrap_or_default();
    let leases = dhcp
        .lines()
        .filter(|line| {
            line.contains("DHCPACK")
                && line
                    .to_ascii_lowercase()
                    .contains(&mac.to_ascii_lowercase())
        })
        .count();
    ensure!(leases == 0, "dnsmasq gave node-0 {leases} leases");
    eprintln!("{SUITE}: dnsmasq gave {mac} no lease; the agent used {STATIC_ADDRESS}");
    Ok(())
}

/// `text` as UTF-16LE (a GPT partition name).
fn utf16le(text: &str) -> Vec<u8> {
    text.encode_utf16().flat_map(u16::to_le_bytes).collect()
}
