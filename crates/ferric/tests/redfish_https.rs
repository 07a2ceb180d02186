//! The `redfish-https` boot interface end to end, with nothing of Ferric's faked: a real
//! `ferric server` whose boot file server also listens over HTTPS (its own certificate, signed
//! by a CA made here), and sushy-tools' Redfish emulator as the BMC. Cleaning a node boots the
//! agent: Ferric builds the node's ISO and sends `UefiHttp` with `HttpBootUri` = the ISO's
//! HTTPS URL in one PATCH; the emulator then downloads the ISO from that URL, verifying the
//! server's certificate against the CA (`SUSHY_EMULATOR_VMEDIA_VERIFY_SSL`), and boots it.
//!
//! sushy-tools' fake system driver has no storage for `HttpBootUri` (its PATCH handler
//! downloads and attaches the ISO, then fails with 400 "Failed to save HttpBootUri field
//! value"), so the emulator's configuration gives the fake driver the two methods its libvirt
//! driver has; the PATCH handling and the TLS download are the emulator's own.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;
#[allow(
    dead_code,
    reason = "the Redfish emulator only; the IPMI ones are for other tests"
)]
#[path = "../../ferric-api/tests/emulators/mod.rs"]
mod emulators;

use std::net::TcpListener;
use std::path::Path;

use common::{Server, eventually};
use reqwest::blocking::Client;
use serde_json::{Value, json};

const VERSION: (&str, &str) = ("X-OpenStack-Ironic-API-Version", "1.89");

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A CA (`ca.crt`) and the boot file server's certificate for 127.0.0.1 signed by it
/// (`boot.crt`, `boot.key`).
fn certificates(dir: &Path) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "Ferric test CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    let cert = leaf.signed_by(&key, &ca_cert, &ca_key).unwrap();
    std::fs::write(dir.join("ca.crt"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("boot.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("boot.key"), key.serialize_pem()).unwrap();
}

fn send(server: &Server, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
    let mut request = Client::new()
        .request(method.clone(), server.url(path))
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

#[test]
fn cleaning_boots_the_agent_iso_over_https_by_uefi_http_boot() {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let root = dir.path().join("boot");
    std::fs::create_dir_all(&root).unwrap();
    // Placeholders: the ISO is built around them and fetched; nothing boots them.
    std::fs::write(root.join("agent.kernel"), vec![1_u8; 4096]).unwrap();
    std::fs::write(root.join("agent.ramdisk"), vec![2_u8; 4096]).unwrap();

    let runtime = tokio::runtime::Runtime::new().unwrap();
    let ca = dir.path().join("ca.crt");
    let extra = format!(
        "SUSHY_EMULATOR_VMEDIA_VERIFY_SSL = {ca:?}\n\
         from sushy_tools.emulator.resources.systems import fakedriver as _fake\n\
         _fake.FakeDriver.get_http_boot_uri = \\\n\
         \x20   lambda self, identity: self._get(identity).get('http_boot_uri')\n\
         _fake.FakeDriver.set_http_boot_uri = \\\n\
         \x20   lambda self, uri: self._update({uuid:?}, http_boot_uri=uri)\n",
        ca = ca.display().to_string(),
        uuid = emulators::SUSHY_SYSTEM_UUID,
    );
    let sushy = runtime.block_on(emulators::Sushy::start_with("admin", "password", &extra));

    let (http_port, https_port) = (free_port(), free_port());
    let https_url = format!("https://127.0.0.1:{https_port}");
    let server = Server::start_with_env(
        dir.path(),
        &[
            "--boot-http-listen",
            &format!("127.0.0.1:{http_port}"),
            "--boot-http-root",
            root.to_str().unwrap(),
            "--api-url",
            "http://127.0.0.1:6385",
        ],
        &[
            (
                "FERRIC_BOOT_HTTPS_LISTEN",
                &format!("127.0.0.1:{https_port}"),
            ),
            (
                "FERRIC_BOOT_TLS_CERT",
                dir.path().join("boot.crt").to_str().unwrap(),
            ),
            (
                "FERRIC_BOOT_TLS_KEY",
                dir.path().join("boot.key").to_str().unwrap(),
            ),
        ],
    );
    assert!(
        server
            .startup_log
            .iter()
            .any(|line| line.contains("boot file server listening over HTTPS")),
        "{:#?}",
        server.startup_log
    );

    let node = send(
        &server,
        reqwest::Method::POST,
        "/v1/nodes",
        Some(json!({
            "name": "https-boot",
            "driver": "redfish",
            "boot_interface": "redfish-https",
            "driver_info": {
                "redfish_address": sushy.address,
                "redfish_system_id": sushy.system_path,
                "redfish_username": "admin",
                "redfish_password": "password",
            },
        })),
    );
    let uuid = node["uuid"].as_str().unwrap().to_owned();
    assert_eq!(node["boot_interface"], "redfish-https");
    let validated = send(
        &server,
        reqwest::Method::GET,
        &format!("/v1/nodes/{uuid}/validate"),
        None,
    );
    assert_eq!(validated["boot"]["result"], true, "{validated}");

    let provision = |target: &str| {
        send(
            &server,
            reqwest::Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": target})),
        )
    };
    let state = || {
        send(
            &server,
            reqwest::Method::GET,
            &format!("/v1/nodes/{uuid}"),
            None,
        )
    };
    provision("manage");
    eventually("manageable", || {
        let node = state();
        (node["provision_state"] == "manageable" && node["reservation"].is_null()).then_some(())
    });
    provision("provide");
    let node = eventually("clean wait", || {
        let node = state();
        assert_ne!(
            node["provision_state"],
            "clean failed",
            "{node}\n{}",
            sushy.log()
        );
        (node["provision_state"] == "clean wait").then_some(node)
    });
    assert!(
        node["driver_internal_info"]
            .get("redfish_uefi_http_url")
            .is_none(),
        "the URL was handed to the BMC: {node}"
    );

    // The BMC was told to UEFI HTTP boot the node's ISO from the HTTPS listener: sushy-tools
    // keeps HttpBootUri and turns such a boot into one from the downloaded ISO as its CD.
    let iso_url = format!("{https_url}/vmedia/{uuid}.iso");
    let system = runtime.block_on(sushy.system());
    assert_eq!(system["Boot"]["HttpBootUri"], iso_url.as_str(), "{system}");
    assert_eq!(system["Boot"]["BootSourceOverrideTarget"], "Cd", "{system}");
    assert_eq!(system["PowerState"], "On");
    let cd: Value = Client::new()
        .get(format!(
            "{}{}/VirtualMedia/Cd",
            sushy.address, sushy.system_path
        ))
        .basic_auth("admin", Some("password"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(cd["Image"], iso_url.as_str(), "{cd}");
    assert_eq!(cd["Inserted"], true, "{cd}");
    // What the emulator fetched over TLS is the ISO Ferric built.
    let served = Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(&ca).unwrap()).unwrap())
        .build()
        .unwrap()
        .get(&iso_url)
        .send()
        .unwrap();
    assert_eq!(served.status(), 200);
    let iso = served.bytes().unwrap();
    assert_eq!(
        iso.as_ref(),
        std::fs::read(root.join(format!("vmedia/{uuid}.iso"))).unwrap()
    );
    // A client that does not trust the CA is refused.
    assert!(Client::new().get(&iso_url).send().is_err());
}
