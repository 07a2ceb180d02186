//! OCI image sources against a real registry: Debian's `docker-registry` (the CNCF
//! distribution registry) with htpasswd basic auth and TLS from a CA this test makes. The test
//! pushes a disk image into it through the registry's HTTP API (blobs, manifests, an image
//! index with amd64, arm64 and s390x entries), then the real `ferric-agent` deploys it on two
//! nodes given `oci://…:tag` and `oci://…@sha256:…`: the conductor resolves the manifest, pulls
//! the blob once into its image cache (a miss, then a hit) and the agents read it from the boot
//! file server. Refusals at validate name the image and the reason; a pull secret the registry
//! stops accepting between validation and `write_image` gives `deploy failed`.
//!
//! `scripts/install-deps.sh` installs `docker-registry`; without it the test says so and passes.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::deploy::{Operator, agent_config, boot_agent, fake_machine, free_port, read_disk};
use common::{Server, eventually};
use reqwest::blocking::Client;
use serde_json::{Value, json};
use sha2::Digest;

const DISK_BYTES: u64 = 64 * 1024 * 1024;
const MIB: usize = 1024 * 1024;
const USER: &str = "ferric-puller";
const PASSWORD: &str = "pull-me-1";
const REPOSITORY: &str = "metal3/disk";

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{:x}", sha2::Sha256::digest(bytes))
}

/// A running `docker-registry serve`, killed when dropped.
struct Registry {
    child: Child,
    address: String,
    http: Client,
    authorization: String,
}

impl Registry {
    /// Starts the registry in `dir` with TLS and htpasswd auth; returns it and the CA's PEM.
    fn start(dir: &Path) -> (Registry, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Ferric test registry CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        std::fs::write(dir.join("registry.crt"), leaf.pem()).unwrap();
        std::fs::write(dir.join("registry.key"), key.serialize_pem()).unwrap();
        let hash = bcrypt::hash(PASSWORD, 4).unwrap();
        std::fs::write(dir.join("htpasswd"), format!("{USER}:{hash}\n")).unwrap();
        let port = free_port();
        let config = format!(
            "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {root}\n\
             http:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {dir}/registry.crt\n    \
             key: {dir}/registry.key\nauth:\n  htpasswd:\n    realm: ferric-test\n    path: \
             {dir}/htpasswd\n",
            root = dir.join("storage").display(),
            dir = dir.display(),
        );
        std::fs::write(dir.join("config.yml"), config).unwrap();
        let log = std::fs::File::create(dir.join("registry.log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(dir.join("config.yml"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let ca_pem = ca.pem();
        let http = Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
            .build()
            .unwrap();
        let registry = Registry {
            child,
            address: format!("127.0.0.1:{port}"),
            http,
            authorization: format!("Basic {}", STANDARD.encode(format!("{USER}:{PASSWORD}"))),
        };
        eventually("the registry answering", || {
            let answer = registry
                .http
                .get(format!("https://{}/v2/", registry.address))
                .send()
                .ok()?;
            (answer.status() == 401).then_some(())
        });
        (registry, ca_pem)
    }

    fn url(&self, path: &str) -> String {
        format!("https://{}/v2/{REPOSITORY}/{path}", self.address)
    }

    /// Uploads a blob in one request; its digest.
    fn push_blob(&self, bytes: &[u8]) -> String {
        let digest = sha256(bytes);
        let started = self
            .http
            .post(self.url("blobs/uploads/"))
            .header("Authorization", &self.authorization)
            .send()
            .unwrap();
        assert_eq!(started.status(), 202, "start an upload");
        let location = started.headers()["Location"].to_str().unwrap().to_owned();
        let location = if location.starts_with("https://") {
            location
        } else {
            format!("https://{}{location}", self.address)
        };
        let separator = if location.contains('?') { '&' } else { '?' };
        let done = self
            .http
            .put(format!("{location}{separator}digest={digest}"))
            .header("Authorization", &self.authorization)
            .header("Content-Type", "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .unwrap();
        assert_eq!(done.status(), 201, "upload {digest}");
        digest
    }

    /// Puts a manifest or index under `reference`; its digest.
    fn push_manifest(&self, reference: &str, document: &Value) -> String {
        let body = serde_json::to_vec(document).unwrap();
        let response = self
            .http
            .put(self.url(&format!("manifests/{reference}")))
            .header("Authorization", &self.authorization)
            .header("Content-Type", document["mediaType"].as_str().unwrap())
            .body(body.clone())
            .send()
            .unwrap();
        let status = response.status();
        assert_eq!(status, 201, "{reference}: {}", response.text().unwrap());
        sha256(&body)
    }

    /// A one-layer artifact for `architecture` (its image config says so); the manifest's
    /// digest and size.
    fn push_artifact(&self, data: &[u8], architecture: &str, title: &str) -> (String, usize) {
        let config =
            serde_json::to_vec(&json!({"architecture": architecture, "os": "linux"})).unwrap();
        let config_digest = self.push_blob(&config);
        let layer_digest = self.push_blob(data);
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": config_digest, "size": config.len()},
            "layers": [{"mediaType": "application/octet-stream", "digest": layer_digest,
                        "size": data.len(),
                        "annotations": {"org.opencontainers.image.title": title}}],
        });
        let size = serde_json::to_vec(&manifest).unwrap().len();
        let digest = sha256(&serde_json::to_vec(&manifest).unwrap());
        assert_eq!(self.push_manifest(&digest, &manifest), digest);
        (digest, size)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A machine as the agent sees it: fixture /proc and /sys with one NIC, a sparse file as disk.
/// A 3 MiB whole-disk image: a GPT with one partition and patterned data.
fn raw_image() -> Vec<u8> {
    let mut image = std::io::Cursor::new(vec![0u8; 3 * MIB]);
    let mut gpt = gptman::GPT::new_from(&mut image, 512, [7; 16]).unwrap();
    gpt[1] = gptman::GPTPartitionEntry {
        partition_type_guid: [0x11; 16],
        unique_partition_guid: [0x33; 16],
        starting_lba: 2048,
        ending_lba: 3 * 2048 - 100,
        attribute_bits: 0,
        partition_name: "root".into(),
    };
    gpt.write_into(&mut image).unwrap();
    let mut image = image.into_inner();
    for (at, byte) in image[MIB..2 * MIB].iter_mut().enumerate() {
        *byte = (at as u8).wrapping_mul(37) ^ (at >> 10) as u8;
    }
    image
}

/// A `direct` fake-hardware node of `cpu_arch` deploying `instance_info` onto `disk`.
fn enroll(
    operator: &Operator<'_>,
    cpu_arch: &str,
    instance_info: Value,
    disk: &Path,
    mac: &str,
) -> String {
    operator.create_node(
        json!({
            "driver": "fake-hardware",
            "deploy_interface": "direct",
            "properties": {"cpu_arch": cpu_arch,
                           "root_device": {"name": disk.display().to_string()}},
            "instance_info": instance_info,
        }),
        mac,
    )
}

fn auth_config(path: &Path, registry: &str, secret: &str) {
    let document = json!({"auths": {registry: {"auth": secret}}});
    std::fs::write(path, serde_json::to_vec(&document).unwrap()).unwrap();
}

#[test]
fn oci_images_deploy_from_a_real_registry_through_the_image_cache() {
    if Command::new("docker-registry")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no docker-registry (scripts/install-deps.sh installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let registry_dir = dir.path().join("registry");
    std::fs::create_dir(&registry_dir).unwrap();
    let (registry, ca_pem) = Registry::start(&registry_dir);

    // The image for amd64, another for arm64, and an ISO for s390x, behind one tag's index.
    let image = raw_image();
    let arm_image = vec![0x5a; MIB];
    let (amd64, amd64_size) = registry.push_artifact(&image, "amd64", "disk.raw");
    let (arm64, arm64_size) = registry.push_artifact(&arm_image, "arm64", "disk-arm.raw");
    let (s390x, s390x_size) = registry.push_artifact(b"an iso", "s390x", "disk.iso");
    let entry = |digest: &str, size: usize, architecture: &str, disktype: &str| {
        json!({"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": digest,
               "size": size, "platform": {"architecture": architecture, "os": "linux"},
               "annotations": {"disktype": disktype}})
    };
    registry.push_manifest(
        "v1",
        &json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                entry(&arm64, arm64_size, "arm64", "raw"),
                entry(&amd64, amd64_size, "amd64", "raw"),
                entry(&s390x, s390x_size, "s390x", "iso"),
            ],
        }),
    );
    let tagged = format!("oci://{}/{REPOSITORY}:v1", registry.address);
    let pinned = format!("oci://{}/{REPOSITORY}@{amd64}", registry.address);
    let docker_auth = STANDARD.encode(format!("{USER}:{PASSWORD}"));

    let boot_root = dir.path().join("boot");
    std::fs::create_dir(&boot_root).unwrap();
    std::fs::write(dir.path().join("registry-ca.pem"), &ca_pem).unwrap();
    let auth_path = dir.path().join("oci-auth.json");
    auth_config(&auth_path, &registry.address, &docker_auth);
    let boot_port = free_port();
    let env = [
        ("FERRIC_BOOT_HTTP_LISTEN", format!("127.0.0.1:{boot_port}")),
        (
            "FERRIC_BOOT_HTTP_URL",
            format!("http://127.0.0.1:{boot_port}"),
        ),
        ("FERRIC_BOOT_HTTP_ROOT", boot_root.display().to_string()),
        ("FERRIC_IMAGE_CACHE_SIZE", "16".to_owned()),
        ("FERRIC_AUTOMATED_CLEAN", "false".to_owned()),
        (
            "FERRIC_OCI_VERIFY_CA",
            dir.path().join("registry-ca.pem").display().to_string(),
        ),
        (
            "FERRIC_OCI_AUTHENTICATION_CONFIG",
            auth_path.display().to_string(),
        ),
        ("FERRIC_LOG_LEVEL", "info,tower_http=debug".to_owned()),
    ];
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    let server = Server::start_with_env(dir.path(), &[], &env);
    let operator = Operator::new(&server);

    // Refused at validate, each naming the image and the reason.
    let refused_dir = dir.path().join("refused");
    std::fs::create_dir(&refused_dir).unwrap();
    let refused_disk = fake_machine(&refused_dir, "52:54:00:dd:cc:09", DISK_BYTES).disk;
    let unreachable = format!("oci://127.0.0.1:{}/{REPOSITORY}:v1", free_port());
    let malformed = format!("oci://{}/Metal3/Disk:v1", registry.address);
    let cases = [
        ("x86_64", json!({"image_source": malformed}), "is malformed"),
        (
            "riscv64",
            json!({"image_source": tagged}),
            "no manifest for the node's architecture riscv64",
        ),
        ("s390x", json!({"image_source": tagged}), "disktype iso"),
        (
            "x86_64",
            json!({"image_source": tagged, "image_pull_secret": "ferric-puller:wrong"}),
            "refused the credentials of instance_info.image_pull_secret (401",
        ),
        (
            "x86_64",
            json!({"image_source": unreachable}),
            "cannot be reached",
        ),
    ];
    for (index, (cpu_arch, instance_info, words)) in cases.into_iter().enumerate() {
        let source = instance_info["image_source"].as_str().unwrap().to_owned();
        let mac = format!("52:54:00:dd:cc:0{index}");
        let uuid = enroll(&operator, cpu_arch, instance_info, &refused_disk, &mac);
        let (valid, reason) = operator.validate(&uuid, "deploy");
        assert!(!valid, "{source} on {cpu_arch} passed validation");
        assert!(
            reason.contains(&source) && reason.contains(words),
            "{source} on {cpu_arch}: {reason}"
        );
        // The API never shows a pull secret.
        let shown = operator.node(&uuid);
        if let Some(secret) = shown["instance_info"].get("image_pull_secret") {
            assert_eq!(secret, "******");
        }
    }

    // Two machines deploy the amd64 image: by tag with the node's own pull secret, then by
    // digest with the site's default secret (oci_authentication_config).
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let blob = sha256(&image);
    let key = format!("oci-sha256-{}", blob.trim_start_matches("sha256:"));
    for (index, instance_info) in [
        json!({"image_source": tagged, "image_pull_secret": docker_auth}),
        json!({"image_source": pinned}),
    ]
    .into_iter()
    .enumerate()
    {
        let machine_dir = dir.path().join(format!("machine-{index}"));
        std::fs::create_dir(&machine_dir).unwrap();
        let mac = format!("52:54:00:dd:bb:0{index}");
        let machine = fake_machine(&machine_dir, &mac, DISK_BYTES);
        let uuid = enroll(&operator, "x86_64", instance_info, &machine.disk, &mac);
        let (valid, reason) = operator.validate(&uuid, "deploy");
        assert!(valid, "{reason}");
        operator.provision(&uuid, "manage", "manageable");
        operator.provision(&uuid, "provide", "available");
        operator.provision(&uuid, "active", "wait call-back");
        let agent = boot_agent(&runtime, agent_config(&server, &machine));
        operator.wait_for(&uuid, "active");
        // Served from the cache by the node's deploy token, never by the entry's own name.
        server.wait_for_log("/image-cache/t/");
        assert!(
            read_disk(&machine.disk, 0, 512) == image[..512]
                && read_disk(&machine.disk, MIB as u64, MIB) == image[MIB..2 * MIB],
            "node {uuid}'s disk holds the image pushed to the registry"
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
        let shown = operator.node(&uuid);
        if index == 0 {
            assert_eq!(shown["instance_info"]["image_pull_secret"], "******");
        }
        drop(agent);
    }
    let cached = std::fs::read(boot_root.join(format!("image-cache/{key}"))).unwrap();
    assert_eq!(sha256(&cached), blob, "the cache holds the registry's blob");
    assert_eq!(operator.counter("ferric_image_cache_misses_total"), 1);
    assert_eq!(operator.counter("ferric_image_cache_hits_total"), 1);

    // The site's secret is replaced by a wrong one after the node was validated and its
    // agent booted: write_image cannot pull, and the deployment fails naming the image.
    let machine_dir = dir.path().join("machine-wrong");
    std::fs::create_dir(&machine_dir).unwrap();
    let machine = fake_machine(&machine_dir, "52:54:00:dd:bb:09", DISK_BYTES);
    let uuid = enroll(
        &operator,
        "x86_64",
        json!({"image_source": tagged}),
        &machine.disk,
        "52:54:00:dd:bb:09",
    );
    operator.provision(&uuid, "manage", "manageable");
    operator.provision(&uuid, "provide", "available");
    operator.provision(&uuid, "active", "wait call-back");
    auth_config(
        &auth_path,
        &registry.address,
        &STANDARD.encode(format!("{USER}:not-the-password")),
    );
    let agent = boot_agent(&runtime, agent_config(&server, &machine));
    let failed = operator.wait_for(&uuid, "deploy failed");
    let last_error = failed["last_error"].as_str().unwrap_or_default();
    assert!(
        last_error.contains(&tagged)
            && last_error.contains("refused the credentials of oci_authentication_config"),
        "{last_error}"
    );
    drop(agent);
    drop(server);

    // oci_image_download_source = http: the agent pulls the blob from the registry itself,
    // with the registry's Authorization header and the registry's CA as its ipa-cafile.
    let direct_dir = dir.path().join("direct");
    std::fs::create_dir(&direct_dir).unwrap();
    let direct_boot = direct_dir.join("boot");
    std::fs::create_dir(&direct_boot).unwrap();
    let boot_port = free_port();
    let env = [
        ("FERRIC_BOOT_HTTP_LISTEN", format!("127.0.0.1:{boot_port}")),
        (
            "FERRIC_BOOT_HTTP_URL",
            format!("http://127.0.0.1:{boot_port}"),
        ),
        ("FERRIC_BOOT_HTTP_ROOT", direct_boot.display().to_string()),
        ("FERRIC_AUTOMATED_CLEAN", "false".to_owned()),
        (
            "FERRIC_OCI_VERIFY_CA",
            dir.path().join("registry-ca.pem").display().to_string(),
        ),
        ("FERRIC_OCI_IMAGE_DOWNLOAD_SOURCE", "http".to_owned()),
    ];
    let env: Vec<(&str, &str)> = env
        .iter()
        .map(|(name, value)| (*name, value.as_str()))
        .collect();
    let server = Server::start_with_env(&direct_dir, &[], &env);
    let operator = Operator::new(&server);
    let machine = fake_machine(&direct_dir, "52:54:00:dd:ee:01", DISK_BYTES);
    let uuid = enroll(
        &operator,
        "amd64",
        json!({"image_source": tagged, "image_pull_secret": format!("{USER}:{PASSWORD}")}),
        &machine.disk,
        "52:54:00:dd:ee:01",
    );
    operator.provision(&uuid, "manage", "manageable");
    operator.provision(&uuid, "provide", "available");
    operator.provision(&uuid, "active", "wait call-back");
    let mut config = agent_config(&server, &machine);
    config.api_ca_file = Some(dir.path().join("registry-ca.pem"));
    let agent = boot_agent(&runtime, config);
    operator.wait_for(&uuid, "active");
    assert!(
        read_disk(&machine.disk, MIB as u64, MIB) == image[MIB..2 * MIB],
        "the agent wrote the blob it pulled from the registry"
    );
    // The cache's directory holds only its (empty) deploy-token directory.
    let cached = std::fs::read_dir(direct_boot.join("image-cache"))
        .map(|entries| {
            entries
                .filter(|entry| entry.as_ref().unwrap().file_name() != "t")
                .count()
        })
        .unwrap_or(0);
    assert_eq!(cached, 0, "nothing went through the conductor's cache");
    drop(agent);
    drop(registry);
}
