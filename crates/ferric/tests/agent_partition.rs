//! A partition image deployed by a real `ferric server` through the real `ferric-agent` onto a
//! file-backed disk (no loop devices, no mounts): the conductor validates the layout
//! (`image_type=partition`, `root_gb`, 400s for what is wrong), the agent partitions the disk
//! (ESP + swap + root on GPT for UEFI), streams the ext4 root filesystem into the root
//! partition, reports its UUID, and `image.install_bootloader` copies the image's
//! `/boot/efi/EFI` into the ESP and adds an NVRAM entry in a fixture efivarfs.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Server, eventually};
use ferric_agent::config::{AgentConfig, PowerMode};
use reqwest::blocking::Client;
use serde_json::{Value, json};
use sha2::Digest;

const VERSION: (&str, &str) = ("X-OpenStack-Ironic-API-Version", "1.68");
const MAC: &str = "52:54:00:aa:bb:07";
const MIB: u64 = 1024 * 1024;
/// Room for the 550 MiB ESP, 16 MiB of swap and a 1 GiB root partition (sparse).
const DISK_BYTES: u64 = 2048 * MIB;
const ROOT_UUID: &str = "0b5e7c1a-2d3f-4a5b-8c6d-7e8f9a0b1c2d";
const EFIVARS_GUID: &str = "8be4df61-93ca-11d2-aa0d-00e098032b8c";

/// A UEFI machine as the agent sees it: fixture /proc and /sys (with efivars holding the
/// firmware's BootOrder) and a sparse file as its disk.
fn fake_machine(root: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let sys = root.join("sys");
    let proc = root.join("proc");
    let nic = sys.join("class/net/eth0");
    std::fs::create_dir_all(nic.join("device")).unwrap();
    std::fs::write(nic.join("address"), format!("{MAC}\n")).unwrap();
    std::fs::write(nic.join("carrier"), "1\n").unwrap();
    let efivars = sys.join("firmware/efi/efivars");
    std::fs::create_dir_all(&efivars).unwrap();
    std::fs::write(
        efivars.join(format!("BootOrder-{EFIVARS_GUID}")),
        [7, 0, 0, 0, 1, 0],
    )
    .unwrap();
    std::fs::create_dir_all(proc.join("sys/kernel")).unwrap();
    std::fs::write(proc.join("cpuinfo"), "processor\t: 0\nmodel name\t: Test\n").unwrap();
    std::fs::write(proc.join("meminfo"), "MemTotal:        2048000 kB\n").unwrap();
    std::fs::write(proc.join("sys/kernel/hostname"), "ramdisk\n").unwrap();
    let disk = root.join("disk.img");
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(DISK_BYTES)
        .unwrap();
    (sys, proc, disk)
}

/// An ext4 root filesystem with UEFI boot files under /boot/efi, made by `mkfs.ext4 -d`.
fn root_filesystem(dir: &Path) -> Vec<u8> {
    let tree = dir.join("tree");
    let efi = tree.join("boot/efi/EFI/BOOT");
    std::fs::create_dir_all(&efi).unwrap();
    std::fs::write(efi.join("BOOTX64.EFI"), b"an EFI loader").unwrap();
    std::fs::create_dir_all(tree.join("etc")).unwrap();
    std::fs::write(tree.join("etc/hostname"), "deployed\n").unwrap();
    let image = dir.join("root.ext4");
    let status = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-U", ROOT_UUID, "-d"])
        .arg(&tree)
        .arg(&image)
        .arg("32M")
        .status()
        .expect("mkfs.ext4 is needed (e2fsprogs; scripts/install-deps.sh)");
    assert!(status.success());
    std::fs::read(image).unwrap()
}

fn image_server(dir: &Path, runtime: &tokio::runtime::Runtime) -> SocketAddr {
    let service = tower_http::services::ServeDir::new(dir);
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let address = listener.local_addr().unwrap();
    runtime.spawn(async move {
        axum::serve(listener, axum::Router::new().fallback_service(service))
            .await
            .unwrap();
    });
    address
}

struct Operator<'a> {
    server: &'a Server,
    http: Client,
}

impl Operator<'_> {
    fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, self.server.url(path))
            .header(VERSION.0, VERSION.1);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().unwrap();
        let status = response.status().as_u16();
        let text = response.text().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    fn ok(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let (status, body) = self.send(method.clone(), path, body);
        assert!(
            (200..300).contains(&status),
            "{method} {path}: {status} {body}"
        );
        body
    }

    fn node(&self, uuid: &str) -> Value {
        self.ok(reqwest::Method::GET, &format!("/v1/nodes/{uuid}"), None)
    }

    fn provision(&self, uuid: &str, target: &str) -> (u16, Value) {
        self.send(
            reqwest::Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": target})),
        )
    }

    fn rest_in(&self, uuid: &str, state: &str) -> Value {
        eventually(&format!("{uuid} in {state}"), || {
            let node = self.node(uuid);
            let now = node["provision_state"].as_str().unwrap_or("").to_owned();
            assert!(!now.ends_with("failed"), "{node:#}");
            (now == state && node["reservation"].is_null()).then_some(node)
        })
    }

    fn set_instance_info(&self, uuid: &str, key: &str, value: Value) {
        self.ok(
            reqwest::Method::PATCH,
            &format!("/v1/nodes/{uuid}"),
            Some(json!([{"op": "add", "path": format!("/instance_info/{key}"), "value": value}])),
        );
    }
}

#[test]
fn the_conductor_deploys_a_partition_image_through_the_real_agent() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let operator = Operator {
        server: &server,
        http: Client::new(),
    };
    let (sys, proc, disk) = fake_machine(dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let images = dir.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let rootfs = root_filesystem(dir.path());
    std::fs::write(images.join("root.img"), &rootfs).unwrap();
    let image_address = image_server(&images, &runtime);
    let digest: String = sha2::Sha256::digest(&rootfs)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();

    let node = operator.ok(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(json!({
            "driver": "fake-hardware",
            "deploy_interface": "direct",
            "automated_clean": false,
            "properties": {
                "root_device": {"name": disk.display().to_string()},
                "capabilities": "boot_mode:uefi",
            },
            "instance_info": {
                "image_source": format!("http://{image_address}/root.img"),
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": digest,
                "image_type": "partition",
                "swap_mb": 16,
            },
        })),
    );
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    operator.ok(
        reqwest::Method::POST,
        "/v1/ports",
        Some(json!({"node_uuid": uuid, "address": MAC})),
    );
    operator.provision(&uuid, "manage");
    operator.rest_in(&uuid, "manageable");
    operator.provision(&uuid, "provide");
    operator.rest_in(&uuid, "available");

    // Without root_gb (and with an unknown image_type) the deploy is refused with a 400.
    let (status, body) = operator.provision(&uuid, "active");
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("root_gb"), "{body}");
    operator.set_instance_info(&uuid, "image_type", json!("floppy"));
    let (status, body) = operator.provision(&uuid, "active");
    assert_eq!(status, 400, "{body}");
    assert!(body.to_string().contains("whole-disk, partition"), "{body}");
    operator.set_instance_info(&uuid, "image_type", json!("partition"));
    operator.set_instance_info(&uuid, "root_gb", json!(1));

    let (status, body) = operator.provision(&uuid, "active");
    assert_eq!(status, 202, "{body}");
    operator.rest_in(&uuid, "wait call-back");
    let mut config = AgentConfig::new(vec![server.url("")]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.disks = vec![disk.clone()];
    config.sys_root = sys.clone();
    config.proc_root = proc;
    config.power = PowerMode::Dry;
    config.lookup_timeout = Duration::from_secs(120);
    let agent = runtime
        .block_on(ferric_agent::RunningAgent::start(config))
        .unwrap();
    let active = operator.rest_in(&uuid, "active");
    assert_eq!(active["last_error"], Value::Null);
    assert_eq!(
        active["driver_internal_info"]["root_uuid_or_disk_id"],
        ROOT_UUID
    );
    assert_eq!(active["driver_internal_info"]["is_whole_disk_image"], false);
    let names: Vec<String> = agent
        .agent
        .command_results()
        .iter()
        .map(|result| result.command_name.clone())
        .collect();
    assert!(
        names.contains(&"install_bootloader".to_owned()),
        "{names:?}"
    );

    // The disk: ESP, swap, root (GPT); the root filesystem in the last partition.
    let mut file = std::fs::File::open(&disk).unwrap();
    let gpt = gptman::GPT::find_from(&mut file).unwrap();
    let names: Vec<String> = gpt
        .iter()
        .filter(|(_, part)| part.is_used())
        .map(|(_, part)| part.partition_name.as_str().to_owned())
        .collect();
    assert_eq!(names, ["esp", "swap", "root"]);
    let root = &gpt[3];
    assert_eq!((root.ending_lba + 1 - root.starting_lba) * 512, 1024 * MIB);
    let mut written = vec![0u8; rootfs.len()];
    file.read_exact_at(&mut written, root.starting_lba * 512)
        .unwrap();
    assert!(written == rootfs, "the root partition holds the image");
    // The ESP is FAT and holds the image's loader (its bytes are on the disk).
    let esp = &gpt[1];
    let mut esp_bytes = vec![0u8; (8 * MIB) as usize];
    file.read_exact_at(&mut esp_bytes, esp.starting_lba * 512)
        .unwrap();
    assert_eq!(&esp_bytes[0x52..0x5a], b"FAT32   ");
    let mut whole_esp = vec![0u8; ((esp.ending_lba + 1 - esp.starting_lba) * 512) as usize];
    file.read_exact_at(&mut whole_esp, esp.starting_lba * 512)
        .unwrap();
    assert!(
        whole_esp
            .windows(13)
            .any(|window| window == b"an EFI loader"),
        "the ESP holds the image's EFI loader"
    );
    // The NVRAM entry, first in the boot order.
    let efivars = sys.join("firmware/efi/efivars");
    let order = std::fs::read(efivars.join(format!("BootOrder-{EFIVARS_GUID}"))).unwrap();
    assert_eq!(
        order,
        [7, 0, 0, 0, 0, 0, 1, 0],
        "Boot0000 first, then the firmware's"
    );
    let entry = std::fs::read(efivars.join(format!("Boot0000-{EFIVARS_GUID}"))).unwrap();
    let loader: Vec<u8> = "\\EFI\\BOOT\\BOOTX64.EFI"
        .encode_utf16()
        .flat_map(u16::to_le_bytes)
        .collect();
    assert!(entry.windows(loader.len()).any(|window| window == loader));
    drop(agent);
}
