//! Ironic's and ironic-python-agent's image and agent-API advisories replayed against
//! `ferric-agent`, each as the attack: a real image file (qcow2 made by `qemu-img`, a VMDK
//! descriptor) served over HTTP and written by `standby.prepare_image` through the agent's own
//! command API onto a sparse-file disk, or a call to that API without the token. The disk is
//! then read back: no byte of the host file an image pointed at may be on it. The table in
//! `docs/security.md` names the advisory behind each test.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::Command;

use ferric_agent::{Agent, AgentConfig};
use serde_json::{Value, json};
use sha2::Digest;

const TOKEN: &str = "advisories-agent-token-0123456789abcdefghijk";
/// A sparse disk just above the agent's 4 GiB minimum for a root disk.
const DISK_BYTES: u64 = 5 << 30;
/// The attack images are small: what they could write lies in the first bytes.
const WRITTEN_BYTES: usize = 64 << 20;
/// What a host file an attacker points at holds; it must never reach the disk.
const HOST_SECRET: &[u8] = b"HOST-SECRET root:$6$not-for-tenants$ ";

/// The agent on a fake machine (one sparse-file disk), its API and an image server.
struct Machine {
    dir: tempfile::TempDir,
    disk: PathBuf,
    /// A file of the "host" (the ramdisk) that attacks point at.
    host_file: PathBuf,
    agent_url: String,
    images_url: String,
    http: reqwest::Client,
}

async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    address
}

impl Machine {
    async fn start(token: Option<&str>) -> Machine {
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys");
        std::fs::create_dir_all(sys.join("block")).unwrap();
        let disk = dir.path().join("disk.img");
        std::fs::File::create(&disk)
            .unwrap()
            .set_len(DISK_BYTES)
            .unwrap();
        let host_file = dir.path().join("host-secret");
        std::fs::write(&host_file, HOST_SECRET.repeat(4096)).unwrap();
        let images = dir.path().join("images");
        std::fs::create_dir_all(&images).unwrap();
        let mut config = AgentConfig::new(vec!["http://127.0.0.1:9".into()]);
        config.standalone = true;
        config.auto_tls = false;
        config.agent_token = token.map(str::to_owned);
        config.disks = vec![disk.clone()];
        config.sys_root = sys;
        config.proc_root = dir.path().join("proc");
        let agent = Agent::new(config);
        let agent_url = format!("http://{}", serve(ferric_agent::api::router(agent)).await);
        let files = tower_http::services::ServeDir::new(&images);
        let images_url = format!(
            "http://{}",
            serve(axum::Router::new().fallback_service(files)).await
        );
        Machine {
            dir,
            disk,
            host_file,
            agent_url,
            images_url,
            http: reqwest::Client::new(),
        }
    }

    fn image_path(&self, name: &str) -> PathBuf {
        self.dir.path().join("images").join(name)
    }

    /// Runs `standby.prepare_image` for the image file `name` and waits for its end.
    async fn prepare_image(&self, name: &str, disk_format: Option<&str>) -> Value {
        let bytes = std::fs::read(self.image_path(name)).unwrap();
        let digest = hex(&sha2::Sha256::digest(&bytes));
        let mut image_info = json!({
            "id": name,
            "urls": [format!("{}/{name}", self.images_url)],
            "os_hash_algo": "sha256",
            "os_hash_value": digest,
        });
        if let Some(format) = disk_format {
            image_info["disk_format"] = format.into();
        }
        self.run("standby.prepare_image", json!({"image_info": image_info}))
            .await
    }

    /// Runs a command with the token and waits for its end.
    async fn run(&self, name: &str, params: Value) -> Value {
        let answer = self
            .http
            .post(format!(
                "{}/v1/commands/?agent_token={TOKEN}&wait=true",
                self.agent_url
            ))
            .json(&json!({"name": name, "params": params}))
            .send()
            .await
            .unwrap();
        let status = answer.status();
        let body: Value = answer.json().await.unwrap();
        assert_eq!(status, 200, "{name}: {body}");
        body
    }

    /// Whether any of the host file's bytes are on the disk.
    fn disk_holds_host_bytes(&self) -> bool {
        let file = std::fs::File::open(&self.disk).unwrap();
        let mut disk = vec![0u8; WRITTEN_BYTES];
        file.read_exact_at(&mut disk, 0).unwrap();
        disk.windows(HOST_SECRET.len())
            .any(|window| window == HOST_SECRET)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn qemu_img(args: &[&str]) {
    let status = Command::new("qemu-img")
        .args(args)
        .status()
        .unwrap_or_else(|error| {
            panic!("qemu-img makes the attack images ({error}); run scripts/install-deps.sh")
        });
    assert!(status.success(), "qemu-img {args:?}");
}

/// Asserts the command failed with `kind` and left no host byte on the disk.
fn refused(machine: &Machine, result: &Value, words: &str) {
    assert_eq!(result["command_status"], "FAILED", "{result:#}");
    let error = result["command_error"].to_string();
    assert!(error.contains(words), "{words:?} not in {error}");
    assert!(
        !machine.disk_holds_host_bytes(),
        "a host file reached the disk"
    );
}

/// CVE-2024-44082 (OSSA-2024-003): a qcow2 whose backing file, or whose external data file,
/// names a file of the ramdisk (or conductor) had that file copied onto the tenant's disk by
/// `qemu-img convert`. ferric-agent converts qcow2 itself and refuses both before writing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cve_2024_44082_qcow2_backing_and_data_files_are_refused() {
    let machine = Machine::start(Some(TOKEN)).await;
    let host = machine.host_file.to_str().unwrap().to_owned();
    let backing = machine.image_path("backing.qcow2");
    qemu_img(&[
        "create",
        "-q",
        "-f",
        "qcow2",
        "-F",
        "raw",
        "-b",
        &host,
        backing.to_str().unwrap(),
        "16M",
    ]);
    let result = machine.prepare_image("backing.qcow2", Some("qcow2")).await;
    refused(&machine, &result, "backing file");

    // The data file must exist when the image is made; the attacker's copy names the host's.
    let data_file = machine.image_path("data-file.qcow2");
    qemu_img(&[
        "create",
        "-q",
        "-f",
        "qcow2",
        "-o",
        &format!("data_file={host},data_file_raw=on"),
        data_file.to_str().unwrap(),
        "16M",
    ]);
    let result = machine
        .prepare_image("data-file.qcow2", Some("qcow2"))
        .await;
    refused(&machine, &result, "external data files");
    // Declared as nothing at all, the same image is still inspected and refused.
    let result = machine.prepare_image("data-file.qcow2", None).await;
    refused(&machine, &result, "external data files");
}

/// CVE-2024-44082, the format half: an image declared `raw` but holding qcow2 (or the
/// reverse) was converted by what its content said. Ferric refuses the mismatch; VMDK, whose
/// flat descriptor can name any host file as an extent (Nova's CVE-2022-47951), is not
/// written at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cve_2024_44082_declared_and_detected_formats_must_agree() {
    let machine = Machine::start(Some(TOKEN)).await;
    let qcow2 = machine.image_path("plain.qcow2");
    qemu_img(&["create", "-q", "-f", "qcow2", qcow2.to_str().unwrap(), "8M"]);
    let result = machine.prepare_image("plain.qcow2", Some("raw")).await;
    refused(&machine, &result, "Image format mismatch");

    std::fs::write(machine.image_path("plain.raw"), vec![7u8; 1 << 20]).unwrap();
    let result = machine.prepare_image("plain.raw", Some("qcow2")).await;
    refused(&machine, &result, "Image format mismatch");

    let descriptor = format!(
        "# Disk DescriptorFile\nversion=1\nCID=fffffffe\nparentCID=ffffffff\n\
         createType=\"monolithicFlat\"\nRW 8 FLAT \"{}\" 0\n",
        machine.host_file.display()
    );
    std::fs::write(machine.image_path("flat.vmdk"), descriptor).unwrap();
    let result = machine.prepare_image("flat.vmdk", None).await;
    refused(&machine, &result, "Unsupported image format");
    let result = machine.prepare_image("flat.vmdk", Some("raw")).await;
    refused(&machine, &result, "Image format mismatch");
}

/// CVE-2024-47211 and Ironic's `checksum-before-conversion`: an image could be deployed
/// without a checksum, or converted before its checksum was checked. ferric-agent refuses an
/// image without one, refuses md5 unless the operator allowed it, and wipes the disk's
/// partition tables when the written image does not match.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cve_2024_47211_no_image_is_left_bootable_without_a_matching_checksum() {
    let machine = Machine::start(Some(TOKEN)).await;
    let mut image = vec![0u8; 4 << 20];
    image[510] = 0x55;
    image[511] = 0xaa;
    image[512..520].copy_from_slice(b"EFI PART");
    std::fs::write(machine.image_path("os.raw"), &image).unwrap();
    let url = format!("{}/os.raw", machine.images_url);

    let without = machine
        .http
        .post(format!(
            "{}/v1/commands/?agent_token={TOKEN}",
            machine.agent_url
        ))
        .json(&json!({"name": "standby.prepare_image",
            "params": {"image_info": {"id": "os.raw", "urls": [url]}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(without.status(), 400);

    let md5 = machine
        .run(
            "standby.prepare_image",
            json!({"image_info": {"id": "os.raw", "urls": [url], "checksum": "0".repeat(32)}}),
        )
        .await;
    refused(&machine, &md5, "md5 checksums are disabled");

    let wrong = machine
        .run(
            "standby.prepare_image",
            json!({"image_info": {"id": "os.raw", "urls": [url], "disk_format": "raw",
                "os_hash_algo": "sha256", "os_hash_value": "ab".repeat(32)}}),
        )
        .await;
    refused(&machine, &wrong, "ImageChecksumError");
    let disk = std::fs::File::open(&machine.disk).unwrap();
    let mut head = [0u8; 520];
    disk.read_exact_at(&mut head, 0).unwrap();
    assert_ne!(
        &head[510..512],
        &[0x55, 0xaa],
        "the MBR signature was wiped"
    );
    assert_ne!(&head[512..520], b"EFI PART", "the GPT header was wiped");
}

/// OSSA-2025-001 (CVE-2025-44021), CVE-2026-44919: `file://` sources made the deploying
/// service read its own files, or hang on `/dev/zero`. The agent fetches images, checksum
/// files and config drives over http(s) only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ossa_2025_001_file_urls_read_nothing_of_the_host() {
    let machine = Machine::start(Some(TOKEN)).await;
    let host = format!("file://{}", machine.host_file.display());
    for url in [
        host.as_str(),
        "file:///dev/zero",
        "file:///proc/self/environ",
    ] {
        let result = machine
            .run(
                "standby.prepare_image",
                json!({"image_info": {"id": "x", "urls": [url],
                    "os_hash_algo": "sha256", "os_hash_value": "ab".repeat(32)}}),
            )
            .await;
        refused(&machine, &result, "ImageDownloadError");
    }
    std::fs::write(machine.image_path("os.raw"), vec![1u8; 1 << 20]).unwrap();
    let image_url = format!("{}/os.raw", machine.images_url);
    let checksum_file = machine
        .run(
            "standby.prepare_image",
            json!({"image_info": {"id": "os.raw", "urls": [image_url], "checksum": host}}),
        )
        .await;
    refused(&machine, &checksum_file, "ImageChecksumError");
    let configdrive = machine
        .run(
            "standby.prepare_image",
            json!({"image_info": {"id": "os.raw", "urls": [image_url],
                "os_hash_algo": "sha256", "os_hash_value": "ab".repeat(32)},
                "configdrive": host}),
        )
        .await;
    refused(&machine, &configdrive, "ConfigDriveError");
}

/// ironic-python-agent bug 2160196: `GET /v1/commands` and `/v1/commands/{id}` checked the
/// agent token only once some GET had carried one, so command results (which can hold what
/// a step returned) were readable by anyone on the provisioning network. ferric-agent checks
/// the token on every call, also before it knows one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipa_bug_2160196_command_results_need_the_token_on_every_call() {
    for token in [None, Some(TOKEN)] {
        let machine = Machine::start(token).await;
        for path in [
            "/v1/commands",
            "/v1/commands/",
            "/commands",
            "/v1/commands/some-id",
        ] {
            for query in ["", "?agent_token=", "?agent_token=guess"] {
                let url = format!("{}{path}{query}", machine.agent_url);
                let answer = machine.http.get(&url).send().await.unwrap();
                assert_eq!(answer.status(), 401, "{url} with token {token:?}");
            }
            let posted = machine
                .http
                .post(format!("{}{path}", machine.agent_url))
                .json(&json!({"name": "standby.get_partition_uuids", "params": {}}))
                .send()
                .await
                .unwrap();
            assert!(posted.status() == 401 || posted.status() == 405, "{path}");
        }
    }
}
