//! Glance image sources against a real OpenStack Glance (unmodified, from PyPI, run by
//! `scripts/glance.sh`) behind a real Keystone (`scripts/keystone.sh`), both on the local
//! MariaDB: an image uploaded through Glance's API is deployed by the real `ferric-agent` on two
//! nodes given only its UUID; the conductor downloads it once into its image cache and the
//! agents fetch it from the boot file server's `image-cache/` (a miss, then a hit), each by a
//! deploy token of its own that answers 404 once its deploy is over (as the entry's own name
//! always does); the second boots its agent by iPXE from a kernel and ramdisk in Glance, put
//! into the cache and named in its iPXE script by tokens too. Images Ferric cannot deploy are
//! refused at validate, each naming the image.
//!
//! One test walks through every step, like a runbook: Keystone and Glance take ~20 s to
//! start. The venvs come from `scripts/install-deps.sh`; without them the test says so and
//! passes.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Server;
use common::deploy::{Operator, agent_config, boot_agent, fake_machine, free_port, read_disk};
use reqwest::blocking::Client;
use serde_json::{Value, json};
use sha2::Digest;

const DISK_BYTES: u64 = 64 * 1024 * 1024;
const MIB: usize = 1024 * 1024;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn venv(name: &str) -> PathBuf {
    let home = std::env::var_os("HOME").expect("HOME is set");
    PathBuf::from(home).join(format!(".cache/ferric/{name}-venv"))
}

/// `scripts/<script>` with `args`; its stdout.
fn script(script: &str, args: &[&str]) -> String {
    let output = Command::new(repository().join("scripts").join(script))
        .args(args)
        .output()
        .unwrap_or_else(|error| panic!("run scripts/{script}: {error}"));
    assert!(
        output.status.success(),
        "{script} {args:?} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The `export NAME=value` lines of an env file.
fn exports(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| line.strip_prefix("export "))
        .filter_map(|line| line.split_once('='))
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

/// Keystone and Glance in directories of their own; stopped and purged when dropped.
struct Cloud {
    keystone_dir: PathBuf,
    glance_dir: PathBuf,
    keystone: Vec<(String, String)>,
    glance_url: String,
}

impl Cloud {
    fn start(dir: &Path) -> Cloud {
        let keystone_dir = dir.join("keystone");
        let glance_dir = dir.join("glance");
        let mut cloud = Cloud {
            keystone_dir,
            glance_dir,
            keystone: Vec::new(),
            glance_url: String::new(),
        };
        let keystone_dir = cloud.keystone_dir.to_str().unwrap().to_owned();
        cloud.keystone = exports(&script("keystone.sh", &["start", "--dir", &keystone_dir]));
        let glance = exports(&script(
            "glance.sh",
            &[
                "start",
                "--dir",
                cloud.glance_dir.to_str().unwrap(),
                "--keystone-dir",
                &keystone_dir,
            ],
        ));
        cloud.glance_url = glance
            .iter()
            .find(|(name, _)| name == "GLANCE_URL")
            .map(|(_, value)| value.clone())
            .unwrap();
        cloud
    }

    fn var(&self, name: &str) -> String {
        self.keystone
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .unwrap_or_else(|| panic!("no {name} in keystone.env"))
    }

    /// A token of project-a's member, who owns the test images.
    fn member_token(&self, http: &Client) -> String {
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": "project-a-member", "domain": {"id": "default"},
                "password": "ferric-test-project-a-member",
            }}},
            "scope": {"project": {"name": "project-a", "domain": {"id": "default"}}},
        }});
        let response = http
            .post(format!("{}/auth/tokens", self.var("OS_AUTH_URL")))
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(response.status(), 201);
        response.headers()["X-Subject-Token"]
            .to_str()
            .unwrap()
            .to_owned()
    }

    /// Creates an image through Glance's v2 API and uploads `data` (none: it stays queued).
    fn upload(
        &self,
        http: &Client,
        token: &str,
        name: &str,
        format: &str,
        data: Option<&[u8]>,
    ) -> String {
        let created: Value = http
            .post(format!("{}/v2/images", self.glance_url))
            .header("X-Auth-Token", token)
            .json(&json!({
                "name": name, "disk_format": format,
                // Glance wants a kernel image's container to say so too.
                "container_format": if ["aki", "ari"].contains(&format) { format } else { "bare" },
            }))
            .send()
            .unwrap()
            .json()
            .unwrap();
        let id = created["id"].as_str().unwrap().to_owned();
        if let Some(data) = data {
            let response = http
                .put(format!("{}/v2/images/{id}/file", self.glance_url))
                .header("X-Auth-Token", token)
                .header("Content-Type", "application/octet-stream")
                .body(data.to_vec())
                .send()
                .unwrap();
            assert_eq!(response.status(), 204, "upload {name}");
        }
        id
    }
}

impl Drop for Cloud {
    fn drop(&mut self) {
        let _ = Command::new(repository().join("scripts/glance.sh"))
            .args(["purge", "--dir"])
            .arg(&self.glance_dir)
            .status();
        let _ = Command::new(repository().join("scripts/keystone.sh"))
            .args(["purge", "--dir"])
            .arg(&self.keystone_dir)
            .status();
    }
}

/// A machine as the agent sees it: fixture /proc and /sys with one NIC, a sparse file as disk.
/// A 3 MiB whole-disk image: a GPT with one partition and patterned data.
fn raw_image() -> Vec<u8> {
    let mut image = std::io::Cursor::new(vec![0u8; 3 * MIB]);
    let mut gpt = gptman::GPT::new_from(&mut image, 512, [3; 16]).unwrap();
    gpt[1] = gptman::GPTPartitionEntry {
        partition_type_guid: [0x11; 16],
        unique_partition_guid: [0x22; 16],
        starting_lba: 2048,
        ending_lba: 3 * 2048 - 100,
        attribute_bits: 0,
        partition_name: "root".into(),
    };
    gpt.write_into(&mut image).unwrap();
    let mut image = image.into_inner();
    for (at, byte) in image[MIB..2 * MIB].iter_mut().enumerate() {
        *byte = (at as u8).wrapping_mul(31) ^ (at >> 9) as u8;
    }
    image
}

/// The deploy token of the next image-cache request in the boot file server's log that is not
/// one of `seen`.
fn next_token(server: &Server, seen: &[String]) -> String {
    const PREFIX: &str = "/image-cache/t/";
    loop {
        let line = server.wait_for_log(PREFIX);
        let at = line.find(PREFIX).unwrap() + PREFIX.len();
        let token: String = line[at..]
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .collect();
        assert_eq!(token.len(), 64, "a 256-bit token: {line}");
        if !seen.contains(&token) {
            return token;
        }
    }
}

/// A `direct` fake-hardware node deploying `image_source` onto `disk`, with `mac`, and the
/// node's fields `extra`.
fn enroll(
    operator: &Operator<'_>,
    image_source: &str,
    disk: &Path,
    mac: &str,
    extra: Value,
) -> String {
    let mut body = json!({
        "driver": "fake-hardware",
        "deploy_interface": "direct",
        "properties": {"root_device": {"name": disk.display().to_string()}},
        "instance_info": {"image_source": image_source},
    });
    for (key, value) in extra.as_object().unwrap() {
        body[key] = value.clone();
    }
    operator.create_node(body, mac)
}

#[test]
fn glance_images_deploy_through_the_conductor_image_cache() {
    for name in ["keystone", "glance"] {
        if !venv(name).join("bin/python").exists() {
            eprintln!(
                "skipped: no {name} venv at {} (scripts/install-deps.sh installs it)",
                venv(name).display()
            );
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let cloud = Cloud::start(dir.path());
    let http = Client::new();
    let token = cloud.member_token(&http);
    let image = raw_image();
    let image_id = cloud.upload(&http, &token, "ferric-raw", "raw", Some(&image));
    // A kernel image: Glance checks an upload against formats it can inspect (an ISO it
    // cannot recognise is refused with 415), not this one.
    let kernel_id = cloud.upload(&http, &token, "ferric-kernel", "aki", Some(b"a kernel"));
    let ramdisk_id = cloud.upload(&http, &token, "ferric-ramdisk", "ari", Some(b"a ramdisk"));
    let queued_id = cloud.upload(&http, &token, "ferric-queued", "raw", None);
    let big_id = cloud.upload(
        &http,
        &token,
        "ferric-big",
        "raw",
        Some(&vec![1u8; 5 * MIB]),
    );

    let boot_root = dir.path().join("boot");
    std::fs::create_dir(&boot_root).unwrap();
    let boot_port = free_port();
    let mut env: Vec<(String, String)> = cloud
        .keystone
        .iter()
        .filter(|(name, _)| name.starts_with("FERRIC_KEYSTONE_"))
        .cloned()
        .collect();
    env.extend(
        [
            ("FERRIC_BOOT_HTTP_LISTEN", format!("127.0.0.1:{boot_port}")),
            (
                "FERRIC_BOOT_HTTP_URL",
                format!("http://127.0.0.1:{boot_port}"),
            ),
            ("FERRIC_BOOT_HTTP_ROOT", boot_root.display().to_string()),
            // 4 MiB: the 3 MiB image fits, the 5 MiB one does not.
            ("FERRIC_IMAGE_CACHE_SIZE", "4".to_owned()),
            // No cleaning: provide goes straight to available.
            ("FERRIC_AUTOMATED_CLEAN", "false".to_owned()),
            // The boot file server's request log: which file each agent fetched.
            ("FERRIC_LOG_LEVEL", "info,tower_http=debug".to_owned()),
            // The iPXE script's API URL, read only by a real ramdisk (the test's agent is
            // given the server's URL).
            (
                "FERRIC_API_URL",
                "http://ferric-api.invalid:6385".to_owned(),
            ),
        ]
        .map(|(name, value)| (name.to_owned(), value)),
    );
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect();
    let server = Server::start_with_env(dir.path(), &[], &env);
    let operator = Operator::new(&server);

    // Refused at validate, each naming its image.
    let machine_dir = dir.path().join("refused");
    std::fs::create_dir(&machine_dir).unwrap();
    let refused_disk = fake_machine(&machine_dir, "52:54:00:aa:cc:09", DISK_BYTES).disk;
    for (source, mac, words) in [
        (kernel_id.clone(), "52:54:00:aa:cc:01", "disk_format aki"),
        (
            format!("glance://{queued_id}"),
            "52:54:00:aa:cc:02",
            "no checksum",
        ),
        (big_id.clone(), "52:54:00:aa:cc:03", "larger than"),
    ] {
        let uuid = enroll(&operator, &source, &refused_disk, mac, json!({}));
        let (valid, reason) = operator.validate(&uuid, "deploy");
        assert!(!valid, "{source} passed validation");
        let id = source.trim_start_matches("glance://");
        assert!(
            reason.contains(id) && reason.contains(words),
            "{source}: {reason}"
        );
    }
    // An agent kernel from Glance is refused at validate too, by the boot interface.
    let uuid = enroll(
        &operator,
        &image_id,
        &refused_disk,
        "52:54:00:aa:cc:04",
        json!({"boot_interface": "ipxe", "driver_info": {
            "deploy_kernel": queued_id, "deploy_ramdisk": ramdisk_id,
        }}),
    );
    let (valid, reason) = operator.validate(&uuid, "boot");
    assert!(
        !valid && reason.contains(&queued_id) && reason.contains("no checksum"),
        "{reason}"
    );

    // Two machines deploy the image by its UUID (the second as glance://UUID).
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let boot_url = format!("http://127.0.0.1:{boot_port}");
    let mut tokens: Vec<String> = Vec::new();
    for (index, source) in [image_id.clone(), format!("glance://{image_id}")]
        .iter()
        .enumerate()
    {
        let machine_dir = dir.path().join(format!("machine-{index}"));
        std::fs::create_dir(&machine_dir).unwrap();
        let mac = format!("52:54:00:aa:bb:0{index}");
        let machine = fake_machine(&machine_dir, &mac, DISK_BYTES);
        // The second boots its agent by iPXE, kernel and ramdisk from Glance as well.
        let ipxe = index == 1;
        let extra = if ipxe {
            json!({"boot_interface": "ipxe", "driver_info": {
                "deploy_kernel": kernel_id, "deploy_ramdisk": format!("glance://{ramdisk_id}"),
            }})
        } else {
            json!({})
        };
        let uuid = enroll(&operator, source, &machine.disk, &mac, extra);
        for interface in ["boot", "deploy"] {
            let (valid, reason) = operator.validate(&uuid, interface);
            assert!(valid, "{interface}: {reason}");
        }
        operator.provision(&uuid, "manage", "manageable");
        operator.provision(&uuid, "provide", "available");
        operator.provision(&uuid, "active", "wait call-back");
        // The iPXE script names the agent's kernel and ramdisk by deploy tokens of the node,
        // which serve Glance's bytes while it deploys.
        let mut boot_files = Vec::new();
        if ipxe {
            let script = std::fs::read_to_string(
                boot_root.join(format!("ipxe/{}.ipxe", mac.replace(':', "-"))),
            )
            .unwrap();
            for (command, bytes) in [
                ("kernel ", &b"a kernel"[..]),
                ("initrd ", &b"a ramdisk"[..]),
            ] {
                let line = script
                    .lines()
                    .find(|line| line.starts_with(command))
                    .unwrap_or_else(|| panic!("no {command}line in {script}"));
                let url = line
                    .split_whitespace()
                    .find(|word| word.starts_with("http"))
                    .unwrap()
                    .to_owned();
                assert!(
                    url.starts_with(&format!("{boot_url}/image-cache/t/")),
                    "{url}"
                );
                let served = operator.http.get(&url).send().unwrap();
                assert_eq!(served.status(), 200, "{url}");
                assert_eq!(&served.bytes().unwrap()[..], bytes, "{url}");
                tokens.push(url.rsplit('/').next().unwrap().to_owned());
                boot_files.push(url);
            }
        }
        let agent = boot_agent(&runtime, agent_config(&server, &machine));
        operator.wait_for(&uuid, "active");
        // The agent read the image from the boot file server's cache, not from Glance, by a
        // deploy token of its own.
        let token = next_token(&server, &tokens);
        // The deploy is over: its token answers 404, as the entry's own name always does.
        for url in [
            format!("{boot_url}/image-cache/t/{token}"),
            format!("{boot_url}/image-cache/glance-{image_id}"),
            format!("{boot_url}/./image-cache/glance-{image_id}"),
            format!("{boot_url}/image-cache/glance-{kernel_id}"),
        ]
        .into_iter()
        .chain(boot_files)
        {
            let status = operator.http.get(&url).send().unwrap().status();
            assert_eq!(status, 404, "{url} after node {uuid}'s deploy");
        }
        tokens.push(token);
        // The data as Glance has it (the agent moves the backup GPT to the disk's end).
        assert!(
            read_disk(&machine.disk, MIB as u64, MIB) == image[MIB..2 * MIB],
            "node {uuid}'s disk holds the image's data"
        );
        let results = agent.agent.command_results();
        let write = results
            .iter()
            .find(|result| result.command_name == "execute_deploy_step")
            .expect("the conductor ran write_image on the agent");
        assert_eq!(
            write.command_result.as_ref().unwrap()["deploy_result"]["bytes_written"],
            image.len()
        );
        drop(agent);
    }
    let cached = std::fs::read(boot_root.join(format!("image-cache/glance-{image_id}"))).unwrap();
    assert_eq!(
        format!("{:x}", sha2::Sha512::digest(&cached)),
        format!("{:x}", sha2::Sha512::digest(&image)),
        "the cache holds the image Glance has"
    );
    // Misses: the image once, the second node's agent kernel and ramdisk once each; a hit:
    // the image for the second node.
    assert_eq!(operator.counter("ferric_image_cache_misses_total"), 3);
    assert_eq!(operator.counter("ferric_image_cache_hits_total"), 1);
    drop(cloud);
}
