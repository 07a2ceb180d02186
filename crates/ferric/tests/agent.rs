//! `ferric-agent` against a real `ferric server`: the agent looks its node up, receives the
//! token, heartbeats, and then serves the commands the conductor sends — inventory, raw and
//! qcow2 images streamed onto a file-backed disk, a checksum that does not match, erasure.
//! Images come from a small HTTP server in the test; qcow2 images are made with `qemu-img`.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use common::{Server, eventually};
use ferric_agent::config::{AgentConfig, PowerMode};
use reqwest::blocking::Client;
use serde_json::{Value, json};
use sha2::Digest;

const VERSION: (&str, &str) = ("X-OpenStack-Ironic-API-Version", "1.68");
const MAC: &str = "52:54:00:aa:bb:01";
const DISK_BYTES: u64 = 128 * 1024 * 1024;
const MIB: usize = 1024 * 1024;

/// A machine as the agent sees it: fixture /proc and /sys, and a sparse file as its disk.
fn fake_machine(root: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let sys = root.join("sys");
    let proc = root.join("proc");
    let nic = sys.join("class/net/eth0");
    std::fs::create_dir_all(nic.join("device")).unwrap();
    std::fs::write(nic.join("address"), format!("{MAC}\n")).unwrap();
    std::fs::write(nic.join("carrier"), "1\n").unwrap();
    std::fs::write(nic.join("device/vendor"), "0x1af4\n").unwrap();
    let dmi = sys.join("class/dmi/id");
    std::fs::create_dir_all(&dmi).unwrap();
    std::fs::write(dmi.join("sys_vendor"), "QEMU\n").unwrap();
    std::fs::write(dmi.join("product_serial"), "lab-0001\n").unwrap();
    std::fs::create_dir_all(proc.join("sys/kernel")).unwrap();
    std::fs::write(
        proc.join("cpuinfo"),
        "processor\t: 0\nmodel name\t: Test CPU\ncpu MHz\t\t: 2400.000\nflags\t\t: fpu sse2\n\n\
         processor\t: 1\nmodel name\t: Test CPU\n",
    )
    .unwrap();
    std::fs::write(proc.join("meminfo"), "MemTotal:        2048000 kB\n").unwrap();
    std::fs::write(proc.join("sys/kernel/hostname"), "ramdisk\n").unwrap();
    let disk = root.join("disk.img");
    let file = std::fs::File::create(&disk).unwrap();
    file.set_len(DISK_BYTES).unwrap();
    (sys, proc, disk)
}

/// Drives the Bare Metal API as an operator would.
struct Operator<'a> {
    server: &'a Server,
    http: Client,
}

impl Operator<'_> {
    fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self
            .http
            .request(method.clone(), self.server.url(path))
            .header(VERSION.0, VERSION.1);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().unwrap();
        let status = response.status();
        let text = response.text().unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    fn node(&self, uuid: &str) -> Value {
        self.send(reqwest::Method::GET, &format!("/v1/nodes/{uuid}"), None)
    }

    fn provision(&self, uuid: &str, target: &str, expect: &str) {
        self.send(
            reqwest::Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": target})),
        );
        // At rest: in the state and no task holding the node (its lease goes a moment after
        // the last transition), so the next request does not meet a 409.
        eventually(&format!("{uuid} in {expect}"), || {
            let node = self.node(uuid);
            (node["provision_state"] == expect && node["reservation"].is_null()).then_some(())
        });
    }
}

/// Serves `dir` over HTTP (with range requests) on a port of its own.
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

/// The agent's command API, as the conductor calls it.
struct AgentApi {
    base: String,
    token: String,
    http: Client,
}

impl AgentApi {
    fn post(&self, name: &str, params: Value, token: Option<&str>) -> reqwest::blocking::Response {
        self.http
            .post(format!("{}/v1/commands/", self.base))
            .query(&[("agent_token", token.unwrap_or(&self.token))])
            .json(&json!({"name": name, "params": params}))
            .send()
            .unwrap()
    }

    /// Runs a command and waits for its end (async commands are polled as the conductor does).
    fn run(&self, name: &str, params: Value) -> Value {
        let response = self.post(name, params, None);
        assert_eq!(response.status(), 200, "{name}");
        let started: Value = response.json().unwrap();
        let id = started["id"].as_str().unwrap().to_owned();
        let finished: Value = self
            .http
            .get(format!("{}/v1/commands/{id}", self.base))
            .query(&[("agent_token", self.token.as_str()), ("wait", "true")])
            .send()
            .unwrap()
            .json()
            .unwrap();
        finished
    }
}

fn sha(data: &[u8], algorithm: &str) -> String {
    let digest: Vec<u8> = match algorithm {
        "sha256" => sha2::Sha256::digest(data).to_vec(),
        _ => sha2::Sha512::digest(data).to_vec(),
    };
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// A 40 MiB whole-disk image: a GPT with one partition, patterned data, holes of zeros.
fn raw_image() -> Vec<u8> {
    let mut image = std::io::Cursor::new(vec![0u8; 40 * MIB]);
    let mut gpt = gptman::GPT::new_from(&mut image, 512, [3; 16]).unwrap();
    gpt[1] = gptman::GPTPartitionEntry {
        partition_type_guid: [0x11; 16],
        unique_partition_guid: [0x22; 16],
        starting_lba: 2048,
        ending_lba: 40 * 2048 - 100,
        attribute_bits: 0,
        partition_name: "root".into(),
    };
    gpt.write_into(&mut image).unwrap();
    let mut image = image.into_inner();
    for (index, chunk) in image[MIB..39 * MIB].chunks_mut(64 * 1024).enumerate() {
        if index % 3 != 1 {
            for (at, byte) in chunk.iter_mut().enumerate() {
                *byte = (index as u8).wrapping_mul(31) ^ (at as u8);
            }
        }
    }
    image
}

fn qemu_img(args: &[&str]) {
    let status = Command::new("qemu-img")
        .args(args)
        .status()
        .unwrap_or_else(|error| {
            panic!("qemu-img is needed to make qcow2 images ({error}); run scripts/install-deps.sh")
        });
    assert!(status.success(), "qemu-img {args:?}");
}

fn read_disk(disk: &Path, offset: u64, len: usize) -> Vec<u8> {
    let file = std::fs::File::open(disk).unwrap();
    let mut buffer = vec![0u8; len];
    file.read_exact_at(&mut buffer, offset).unwrap();
    buffer
}

#[test]
fn agent_finds_its_node_and_writes_images_the_conductor_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path(), &[]);
    let operator = Operator {
        server: &server,
        http: Client::new(),
    };
    let (sys, proc, disk) = fake_machine(dir.path());

    // A node waiting for its agent, whose root device hint names the file-backed disk.
    let node = operator.send(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(json!({
            "driver": "fake-hardware",
            "driver_info": {"fake_wait": "deploy"},
            "properties": {"root_device": {"name": disk.display().to_string()}},
        })),
    );
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    operator.provision(&uuid, "manage", "manageable");
    operator.provision(&uuid, "provide", "available");
    operator.send(
        reqwest::Method::POST,
        "/v1/ports",
        Some(json!({"node_uuid": uuid, "address": MAC})),
    );
    operator.provision(&uuid, "active", "wait call-back");

    // The agent: lookup, token, heartbeat.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut config = AgentConfig::new(vec![server.url("")]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.disks = vec![disk.clone()];
    config.sys_root = sys;
    config.proc_root = proc;
    config.power = PowerMode::Dry;
    config.lookup_timeout = Duration::from_secs(120);
    let agent = runtime
        .block_on(ferric_agent::RunningAgent::start(config))
        .unwrap();
    // Auto-TLS: the agent serves HTTPS with a certificate it made and sent in its heartbeat,
    // so its token never travels in clear text.
    let callback = format!("https://127.0.0.1:{}", agent.address.port());
    let node = eventually("the agent's heartbeat", || {
        let node = operator.node(&uuid);
        (node["driver_internal_info"]["agent_url"] == callback.as_str()).then_some(node)
    });
    assert_eq!(
        node["driver_internal_info"]["agent_version"],
        ferric_agent::AGENT_VERSION
    );
    let certificate = agent
        .agent
        .certificate()
        .expect("auto-TLS made a certificate");
    assert_eq!(
        node["driver_internal_info"]["agent_verify_ca"],
        certificate.as_str()
    );
    let trusting = Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(certificate.as_bytes()).unwrap())
        .build()
        .unwrap();
    let plain = format!("http://127.0.0.1:{}/v1/status", agent.address.port());
    assert!(
        Client::new().get(plain).send().is_err(),
        "the agent answered plain HTTP"
    );
    // The heartbeat was the call-back the deploy waited for.
    eventually("active", || {
        (operator.node(&uuid)["provision_state"] == "active").then_some(())
    });
    let token = agent
        .agent
        .token()
        .expect("the lookup gave the agent its token");
    assert_eq!(token.len(), 43);
    let api = AgentApi {
        base: callback.clone(),
        token,
        http: trusting.clone(),
    };

    // The token guards every command.
    let refused = api.post("standby.sync", json!({}), Some("wrong"));
    assert_eq!(refused.status(), 401);
    let fault: Value = refused.json().unwrap();
    assert_eq!(fault["faultcode"], "Client");
    let status: Value = trusting
        .get(format!("{callback}/v1/status"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(status["version"], ferric_agent::AGENT_VERSION);

    // Inventory.
    let inventory = api.run("poll.get_hardware_info", json!({}));
    assert_eq!(inventory["command_status"], "SUCCEEDED", "{inventory:#}");
    let inventory = &inventory["command_result"];
    assert_eq!(inventory["interfaces"][0]["mac_address"], MAC);
    assert_eq!(inventory["interfaces"][0]["has_carrier"], true);
    assert_eq!(inventory["cpu"]["count"], 2);
    assert_eq!(inventory["cpu"]["model_name"], "Test CPU");
    assert_eq!(inventory["memory"]["total"], 2048000u64 * 1024);
    assert_eq!(inventory["disks"][0]["name"], disk.display().to_string());
    assert_eq!(inventory["disks"][0]["size"], DISK_BYTES);
    assert_eq!(inventory["system_vendor"]["serial_number"], "lab-0001");
    assert_eq!(inventory["hostname"], "ramdisk");

    // Images served over HTTP.
    let images = dir.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let image_address = image_server(&images, &runtime);
    let url = |name: &str| format!("http://{image_address}/{name}");

    // A raw image with a config drive, by `standby.prepare_image`.
    let raw = raw_image();
    std::fs::write(images.join("disk.raw"), &raw).unwrap();
    let configdrive = {
        let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gzip.write_all(b"CONFIG-DRIVE-ISO").unwrap();
        base64::engine::general_purpose::STANDARD.encode(gzip.finish().unwrap())
    };
    let written = api.run(
        "standby.prepare_image",
        json!({
            "image_info": {
                "id": "raw-image",
                "urls": [url("disk.raw")],
                "disk_format": "raw",
                "os_hash_algo": "sha256",
                "os_hash_value": sha(&raw, "sha256"),
            },
            "configdrive": configdrive,
        }),
    );
    assert_eq!(written["command_status"], "SUCCEEDED", "{written:#}");
    assert_eq!(written["command_result"]["bytes_written"], raw.len());
    assert_eq!(written["command_result"]["total"], raw.len());
    // The data went where it belongs; the GPT now spans the whole disk and has config-2.
    assert_eq!(read_disk(&disk, MIB as u64, 38 * MIB), raw[MIB..39 * MIB]);
    let mut file = std::fs::File::open(&disk).unwrap();
    let gpt = gptman::GPT::find_from(&mut file).unwrap();
    assert_eq!(gpt.header.backup_lba, DISK_BYTES / 512 - 1);
    let (_, config_partition) = gpt
        .iter()
        .find(|(_, part)| part.partition_name.as_str() == "config-2")
        .expect("a config-2 partition");
    assert_eq!(
        read_disk(&disk, config_partition.starting_lba * 512, 16),
        b"CONFIG-DRIVE-ISO"
    );

    // qcow2 images, plain and compressed, through the deploy step the conductor uses.
    // Without a partition table, so the disk must equal the image byte for byte.
    let pattern: Vec<u8> = raw[MIB..33 * MIB].to_vec();
    std::fs::write(images.join("source.raw"), &pattern).unwrap();
    for (name, compress) in [("disk.qcow2", false), ("compressed.qcow2", true)] {
        let target = images.join(name).display().to_string();
        let source = images.join("source.raw").display().to_string();
        let mut args = vec!["convert", "-q", "-f", "raw", "-O", "qcow2"];
        if compress {
            args.push("-c");
        }
        args.extend([source.as_str(), target.as_str()]);
        qemu_img(&args);
        let qcow2 = std::fs::read(images.join(name)).unwrap();
        let step = json!({
            "step": "write_image",
            "interface": "deploy",
            "priority": 80,
            "args": {"image_info": {
                "id": name,
                "urls": [url(name)],
                "disk_format": "qcow2",
                "os_hash_algo": "sha512",
                "os_hash_value": sha(&qcow2, "sha512"),
            }},
        });
        let node = operator.node(&uuid);
        let deployed = api.run(
            "deploy.execute_deploy_step",
            json!({"step": step, "node": node, "ports": []}),
        );
        assert_eq!(
            deployed["command_status"], "SUCCEEDED",
            "{name}: {deployed:#}"
        );
        assert_eq!(
            deployed["command_result"]["deploy_step"]["step"],
            "write_image"
        );
        assert_eq!(
            deployed["command_result"]["deploy_result"]["image_format"],
            "qcow2"
        );
        assert!(
            read_disk(&disk, 0, pattern.len()) == pattern,
            "{name}: the disk does not hold the converted image"
        );
    }

    // A wrong checksum fails the command with a clear error and leaves no bootable table.
    let wrong = api.run(
        "standby.prepare_image",
        json!({"image_info": {
            "id": "tampered",
            "urls": [url("disk.raw")],
            "disk_format": "raw",
            "os_hash_algo": "sha256",
            "os_hash_value": "0".repeat(64),
        }}),
    );
    assert_eq!(wrong["command_status"], "FAILED", "{wrong:#}");
    assert_eq!(wrong["command_error"]["type"], "ImageChecksumError");
    let details = wrong["command_error"]["details"].as_str().unwrap();
    assert!(
        details.contains(&sha(&raw, "sha256")) && details.contains(&"0".repeat(64)),
        "{details}"
    );
    assert!(read_disk(&disk, 0, MIB).iter().all(|byte| *byte == 0));
    let history: Value = api
        .http
        .get(format!("{}/v1/commands", api.base))
        .query(&[("agent_token", api.token.as_str())])
        .send()
        .unwrap()
        .json()
        .unwrap();
    let last = history["commands"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["command_status"], "FAILED");
    assert_eq!(last["command_name"], "prepare_image");

    // Cleaning: the step list, then erasure.
    let steps = api.run("clean.get_clean_steps", json!({"node": {}, "ports": []}));
    let listed: Vec<&str> = steps["command_result"]["clean_steps"]
        .as_object()
        .unwrap()
        .values()
        .flat_map(|steps| steps.as_array().unwrap())
        .map(|step| step["step"].as_str().unwrap())
        .collect();
    assert!(listed.contains(&"erase_devices") && listed.contains(&"erase_devices_metadata"));
    let version = steps["command_result"]["hardware_manager_version"].clone();
    std::fs::File::options()
        .write(true)
        .open(&disk)
        .unwrap()
        .write_all_at(&[0xee; 4096], DISK_BYTES - 4096)
        .unwrap();
    let erased = api.run(
        "clean.execute_clean_step",
        json!({"step": {"step": "erase_devices_metadata", "interface": "deploy"}, "node": {}, "ports": [], "clean_version": version}),
    );
    assert_eq!(erased["command_status"], "SUCCEEDED", "{erased:#}");
    assert!(
        read_disk(&disk, DISK_BYTES - 4096, 4096)
            .iter()
            .all(|byte| *byte == 0)
    );
    let mismatch = api.run(
        "clean.execute_clean_step",
        json!({"step": {"step": "erase_devices"}, "node": {}, "ports": [], "clean_version": {"other": "9"}}),
    );
    assert_eq!(mismatch["command_status"], "CLEAN_VERSION_MISMATCH");
    let erased = api.run(
        "clean.execute_clean_step",
        json!({"step": {"step": "erase_devices", "interface": "deploy"}, "node": {}, "ports": [], "clean_version": version}),
    );
    assert_eq!(erased["command_status"], "SUCCEEDED", "{erased:#}");
    assert_eq!(
        erased["command_result"]["clean_result"]["erase_method"][disk.display().to_string()],
        "overwrite with zeros"
    );
    let file = std::fs::File::open(&disk).unwrap();
    let mut buffer = vec![0u8; MIB];
    for offset in (0..DISK_BYTES).step_by(MIB) {
        file.read_exact_at(&mut buffer, offset).unwrap();
        assert!(
            buffer.iter().all(|byte| *byte == 0),
            "byte at {offset} survived"
        );
    }

    // Power actions are logged, never real, outside the ramdisk.
    let off = api.run("standby.power_off", json!({}));
    assert_eq!(off["command_status"], "SUCCEEDED");
    assert!(
        off["command_result"]["result"]
            .as_str()
            .unwrap()
            .contains("dry power mode")
    );
    drop(agent);
}

#[test]
fn agent_api_refuses_bad_requests_with_ipa_faults() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut config = AgentConfig::new(vec![]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.standalone = true;
    config.agent_token = Some("t".repeat(43));
    config.disks = vec![];
    let agent = runtime
        .block_on(ferric_agent::RunningAgent::start(config))
        .unwrap();
    let api = AgentApi {
        base: format!("http://{}", agent.address),
        token: "t".repeat(43),
        http: Client::new(),
    };
    let fault = |response: reqwest::blocking::Response, status: u16| {
        assert_eq!(response.status(), status);
        let body: Value = response.json().unwrap();
        body["faultstring"].as_str().unwrap().to_owned()
    };
    assert!(fault(api.post("nope.command", json!({}), None), 404).contains("nope"));
    assert!(fault(api.post("standby.nope", json!({}), None), 400).contains("nope"));
    assert!(fault(api.post("standby.prepare_image", json!({}), None), 400).contains("image_info"));
    let no_params = api
        .http
        .post(format!("{}/commands", api.base))
        .query(&[("agent_token", api.token.as_str())])
        .json(&json!({"name": "standby.sync"}))
        .send()
        .unwrap();
    assert!(fault(no_params, 400).contains("params"));
    // The same routes without the /v1 prefix; a sync command answers with its result.
    let synced: Value = api
        .http
        .post(format!("{}/commands/", api.base))
        .query(&[("agent_token", api.token.as_str())])
        .json(&json!({"name": "standby.sync", "params": {}}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(synced["command_status"], "SUCCEEDED");
    assert_eq!(synced["command_name"], "sync");
    let root: Value = Client::new()
        .get(format!("{}/", api.base))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(root["default_version"]["id"], "v1");
}

#[test]
fn a_running_image_write_shows_progress_and_keeps_the_agent_busy() {
    let dir = tempfile::tempdir().unwrap();
    let disk = dir.path().join("disk.img");
    // Sparse, and large enough to be the default root disk (at least 4 GiB) without hints.
    std::fs::File::create(&disk)
        .unwrap()
        .set_len(5 << 30)
        .unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // An image server that sends 32 MiB, then holds the rest until the test says so.
    let (release, held) = tokio::sync::oneshot::channel::<()>();
    let held = std::sync::Arc::new(std::sync::Mutex::new(Some(held)));
    let image = std::sync::Arc::new(vec![0x5au8; 48 * MIB]);
    let digest = sha(&image, "sha256");
    let app = axum::Router::new().route(
        "/slow.raw",
        axum::routing::get(move || {
            let held = held.lock().unwrap().take();
            let image = std::sync::Arc::clone(&image);
            async move {
                let chunks = futures_util::stream::unfold(
                    (0usize, held, image),
                    |(at, held, image)| async move {
                        if at >= image.len() {
                            return None;
                        }
                        let mut held = held;
                        if at == 32 * MIB
                            && let Some(held) = held.take()
                        {
                            let _ = held.await;
                        }
                        let chunk = axum::body::Bytes::copy_from_slice(&image[at..at + MIB]);
                        Some((Ok::<_, std::io::Error>(chunk), (at + MIB, held, image)))
                    },
                );
                (
                    [(axum::http::header::CONTENT_LENGTH, (48 * MIB).to_string())],
                    axum::body::Body::from_stream(chunks),
                )
            }
        }),
    );
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let image_address = listener.local_addr().unwrap();
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mut config = AgentConfig::new(vec![]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.standalone = true;
    config.agent_token = Some("k".repeat(43));
    config.disks = vec![disk.clone()];
    let agent = runtime
        .block_on(ferric_agent::RunningAgent::start(config))
        .unwrap();
    let api = AgentApi {
        base: format!("http://{}", agent.address),
        token: "k".repeat(43),
        http: Client::new(),
    };
    let params = json!({
        "image_info": {
            "id": "slow",
            "urls": [format!("http://{image_address}/slow.raw")],
            "disk_format": "raw",
            "checksum": digest,
        },
    });
    let started: Value = {
        let response = api.post("standby.prepare_image", params.clone(), None);
        assert_eq!(response.status(), 200);
        response.json().unwrap()
    };
    let id = started["id"].as_str().unwrap().to_owned();
    let progress = eventually("progress in bytes", || {
        let status: Value = api
            .http
            .get(format!("{}/v1/commands/{id}", api.base))
            .query(&[("agent_token", api.token.as_str())])
            .send()
            .unwrap()
            .json()
            .unwrap();
        let written = status["command_result"]["bytes_written"].as_u64()?;
        (written >= 16 * MIB as u64).then_some(status)
    });
    assert_eq!(progress["command_status"], "RUNNING");
    assert_eq!(progress["command_result"]["total"], 48 * MIB);
    let busy = api.post("standby.sync", json!({}), None);
    assert_eq!(busy.status(), 409);
    let busy: Value = busy.json().unwrap();
    assert_eq!(busy["faultstring"], "Agent is busy");

    release.send(()).unwrap();
    let finished: Value = api
        .http
        .get(format!("{}/v1/commands/{id}", api.base))
        .query(&[("agent_token", api.token.as_str()), ("wait", "true")])
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(finished["command_status"], "SUCCEEDED", "{finished:#}");
    assert_eq!(read_disk(&disk, 47 * MIB as u64, MIB), vec![0x5au8; MIB]);
    drop(agent);
}

/// Starts an agent on the fake machine, as a freshly booted ramdisk would.
fn boot_agent(
    runtime: &tokio::runtime::Runtime,
    server: &Server,
    sys: &Path,
    proc: &Path,
    disk: &Path,
) -> ferric_agent::RunningAgent {
    let mut config = AgentConfig::new(vec![server.url("")]);
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.disks = vec![disk.to_owned()];
    config.sys_root = sys.to_owned();
    config.proc_root = proc.to_owned();
    config.power = PowerMode::Dry;
    config.lookup_timeout = Duration::from_secs(120);
    runtime
        .block_on(ferric_agent::RunningAgent::start(config))
        .unwrap()
}

#[test]
fn the_conductor_cleans_and_deploys_through_the_real_agent() {
    let dir = tempfile::tempdir().unwrap();
    let server =
        Server::start_with_env(dir.path(), &[], &[("FERRIC_ERASE_DEVICES_PRIORITY", "10")]);
    let operator = Operator {
        server: &server,
        http: Client::new(),
    };
    let (sys, proc, disk) = fake_machine(dir.path());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let images = dir.path().join("images");
    std::fs::create_dir(&images).unwrap();
    let raw = raw_image();
    std::fs::write(images.join("os.raw"), &raw).unwrap();
    let image_address = image_server(&images, &runtime);

    let node = operator.send(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(json!({
            "driver": "fake-hardware",
            "deploy_interface": "direct",
            "properties": {"root_device": {"name": disk.display().to_string()}},
            "instance_info": {
                "image_source": format!("http://{image_address}/os.raw"),
                "image_os_hash_algo": "sha256",
                "image_os_hash_value": sha(&raw, "sha256"),
            },
        })),
    );
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    operator.send(
        reqwest::Method::POST,
        "/v1/ports",
        Some(json!({"node_uuid": uuid, "address": MAC})),
    );
    operator.provision(&uuid, "manage", "manageable");

    // Cleaning: the machine boots the agent, the conductor has it erase the disk.
    let file = std::fs::File::options().write(true).open(&disk).unwrap();
    file.write_all_at(&[0xee; 4096], 0).unwrap();
    file.write_all_at(&[0xee; 4096], DISK_BYTES / 2).unwrap();
    operator.provision(&uuid, "provide", "clean wait");
    let cleaner = boot_agent(&runtime, &server, &sys, &proc, &disk);
    let available = eventually("available after cleaning", || {
        let node = operator.node(&uuid);
        assert_ne!(node["provision_state"], "clean failed", "{node:#}");
        (node["provision_state"] == "available" && node["reservation"].is_null()).then_some(node)
    });
    assert_eq!(available["last_error"], Value::Null);
    let names: Vec<String> = cleaner
        .agent
        .command_results()
        .iter()
        .map(|result| result.command_name.clone())
        .collect();
    assert!(
        names.contains(&"execute_clean_step".to_owned()),
        "{names:?}"
    );
    assert!(read_disk(&disk, 0, 4096).iter().all(|byte| *byte == 0));
    assert!(
        read_disk(&disk, DISK_BYTES / 2, 4096)
            .iter()
            .all(|byte| *byte == 0),
        "erase_devices (priority 10) overwrote the middle of the disk"
    );
    drop(cleaner);

    // Deploying: a new boot of the agent writes the image the node's instance_info names.
    operator.provision(&uuid, "active", "wait call-back");
    let deployer = boot_agent(&runtime, &server, &sys, &proc, &disk);
    let active = eventually("active after the deploy", || {
        let node = operator.node(&uuid);
        assert_ne!(node["provision_state"], "deploy failed", "{node:#}");
        (node["provision_state"] == "active" && node["reservation"].is_null()).then_some(node)
    });
    assert_eq!(active["last_error"], Value::Null);
    assert_eq!(read_disk(&disk, MIB as u64, 38 * MIB), raw[MIB..39 * MIB]);
    let results = deployer.agent.command_results();
    let write = results
        .iter()
        .find(|result| result.command_name == "execute_deploy_step")
        .expect("the conductor ran write_image on the agent");
    assert_eq!(
        write.command_result.as_ref().unwrap()["deploy_result"]["bytes_written"],
        raw.len()
    );
    drop(deployer);
}
