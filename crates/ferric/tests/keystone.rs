//! `auth_strategy = keystone` against a real OpenStack Keystone (unmodified, from PyPI, run by
//! `scripts/keystone.sh` on the local MariaDB): project scoping, a system reader, bad, revoked
//! and expired tokens, Keystone stopped (503 naming it) and back, and the `ferric` CLI (and the
//! `baremetal` CLI, when its venv exists) logging in with a clouds.yaml.
//!
//! One test walks through every step in turn, like a runbook: starting Keystone takes ~40 s,
//! too much to pay per check. The venv comes from `scripts/install-deps.sh`
//! (`scripts/keystone.sh install`); without it the test says so and passes.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::Server;
use reqwest::StatusCode;
use reqwest::blocking::Client;
use serde_json::{Value, json};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Keystone in a directory of its own; stopped and its database dropped when dropped.
struct Keystone {
    dir: PathBuf,
    port: u16,
    identities: Value,
}

impl Keystone {
    fn script(&self, args: &[&str]) {
        let output = Command::new(repository().join("scripts/keystone.sh"))
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .output()
            .expect("run scripts/keystone.sh");
        assert!(
            output.status.success(),
            "keystone.sh {args:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        if args[0] == "start" {
            let text = std::fs::read_to_string(self.dir.join("identities.json")).unwrap();
            let _: Value = serde_json::from_str(&text).unwrap();
        }
    }

    fn auth_url(&self) -> String {
        format!("http://127.0.0.1:{}/v3", self.port)
    }

    fn project(&self, name: &str) -> String {
        self.identities["projects"][name]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A token for `user`, scoped to its project (or the system for `system-*` and admin);
    /// with its expiry.
    fn login(&self, http: &Client, user: &str) -> (String, String) {
        let scope = match user {
            "admin" | "system-reader" | "system-member" => json!({"system": {"all": true}}),
            _ => {
                let project = user.rsplit_once('-').unwrap().0;
                json!({"project": {"name": project, "domain": {"id": "default"}}})
            }
        };
        let body = json!({"auth": {
            "identity": {"methods": ["password"], "password": {"user": {
                "name": user, "domain": {"id": "default"},
                "password": self.identities["passwords"][user],
            }}},
            "scope": scope,
        }});
        let response = http
            .post(format!("{}/auth/tokens", self.auth_url()))
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED, "login as {user}");
        let token = response.headers()["X-Subject-Token"]
            .to_str()
            .unwrap()
            .to_owned();
        let body: Value = response.json().unwrap();
        (
            token,
            body["token"]["expires_at"].as_str().unwrap().to_owned(),
        )
    }
}

impl Drop for Keystone {
    fn drop(&mut self) {
        let _ = Command::new(repository().join("scripts/keystone.sh"))
            .arg("purge")
            .arg("--dir")
            .arg(&self.dir)
            .status();
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn venv() -> PathBuf {
    let home = std::env::var_os("HOME").expect("HOME is set");
    std::env::var_os("KEYSTONE_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(home).join(".cache/ferric/keystone-venv"))
}

/// One API call with `token` (or none).
fn call(
    http: &Client,
    server: &Server,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value, reqwest::header::HeaderMap) {
    let mut request = http
        .request(method, server.url(path))
        .header("X-OpenStack-Ironic-API-Version", "latest");
    if let Some(token) = token {
        request = request.header("X-Auth-Token", token);
    }
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.json().unwrap_or(Value::Null);
    (status, body, headers)
}

fn node_names(body: &Value) -> Vec<String> {
    let mut names: Vec<String> = body["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["name"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names
}

fn fault(body: &Value) -> String {
    let inner: Value = serde_json::from_str(body["error_message"].as_str().unwrap()).unwrap();
    inner["faultstring"].as_str().unwrap().to_owned()
}

/// `ferric <args>` with `env`, no FERRIC_URL: its nodes' names, sorted.
fn cli_node_names(env: &[(&str, &str)]) -> Vec<String> {
    let output = Command::new(env!("CARGO_BIN_EXE_ferric"))
        .args(["node", "list", "-f", "json"])
        .env_remove("FERRIC_URL")
        .env_remove("OS_CLOUD")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "ferric node list with {env:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let nodes: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut names: Vec<String> = nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            node["Name"]
                .as_str()
                .or(node["name"].as_str())
                .unwrap()
                .to_owned()
        })
        .collect();
    names.sort();
    names
}

#[test]
fn keystone_tokens_scope_every_request() {
    if !venv().join("bin/keystone-manage").is_file() {
        eprintln!(
            "SKIPPED: no Keystone venv at {}; run scripts/install-deps.sh (or \
             scripts/keystone.sh install)",
            venv().display()
        );
        return;
    }
    use reqwest::Method;
    let dir = tempfile::tempdir().unwrap();
    let http = Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();

    // Ferric first (it contacts Keystone only when a request comes), on the port Keystone
    // will listen on; then Keystone, whose catalog points at Ferric.
    let port = free_port();
    let auth_url = format!("http://127.0.0.1:{port}/v3");
    let server = Server::start_with_env(
        dir.path(),
        &["--database-url", "ferric.db"],
        &[
            ("FERRIC_SYNC_POWER_STATE_INTERVAL", "0"),
            ("FERRIC_AUTH_STRATEGY", "keystone"),
            ("FERRIC_KEYSTONE_AUTH_URL", &auth_url),
            ("FERRIC_KEYSTONE_USERNAME", "ferric"),
            ("FERRIC_KEYSTONE_PASSWORD", "ferric-test-ferric"),
            ("FERRIC_KEYSTONE_PROJECT_NAME", "service"),
            ("FERRIC_KEYSTONE_TIMEOUT", "3"),
        ],
    );
    let mut keystone = Keystone {
        dir: dir.path().join("keystone"),
        port,
        identities: Value::Null,
    };
    let started = Instant::now();
    keystone.script(&[
        "start",
        "--port",
        &port.to_string(),
        "--baremetal-url",
        &server.url(""),
    ]);
    eprintln!("Keystone started in {:?}", started.elapsed());
    keystone.identities = serde_json::from_str(
        &std::fs::read_to_string(keystone.dir.join("identities.json")).unwrap(),
    )
    .unwrap();
    let project_a = keystone.project("project-a");
    let project_b = keystone.project("project-b");

    // Public routes need no token; everything else does, with Keystone's challenge.
    let (status, _, _) = call(&http, &server, Method::GET, "/v1", None, None);
    assert_eq!(status, StatusCode::OK);
    let (status, body, headers) = call(&http, &server, Method::GET, "/v1/nodes", None, None);
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        headers["WWW-Authenticate"],
        format!("Keystone uri=\"http://127.0.0.1:{port}\"").as_str()
    );
    assert!(fault(&body).contains("requires authentication"), "{body}");
    let (status, _, headers) = call(
        &http,
        &server,
        Method::GET,
        "/v1/nodes",
        Some("not-a-token"),
        None,
    );
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.contains_key("WWW-Authenticate"));
    let (status, _, _) = call(
        &http,
        &server,
        Method::GET,
        "/v1/lookup?addresses=52:54:00:00:00:99",
        None,
        None,
    );
    assert_ne!(
        status,
        StatusCode::UNAUTHORIZED,
        "the ramdisk's lookup stays open"
    );

    // The system admin enrolls nodes of both projects, one leased across, one of nobody's.
    let (admin, _) = keystone.login(&http, "admin");
    for (name, owner, lessee) in [
        ("node-a", Some(&project_a), None),
        ("node-b", Some(&project_b), None),
        ("node-b-leased-to-a", Some(&project_b), Some(&project_a)),
        ("node-free", None, None),
    ] {
        let (status, body, _) = call(
            &http,
            &server,
            Method::POST,
            "/v1/nodes",
            Some(&admin),
            Some(
                json!({"driver": "fake-hardware", "name": name, "owner": owner, "lessee": lessee}),
            ),
        );
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }

    // A project member sees and changes only what its project owns or leases.
    let (member_a, _) = keystone.login(&http, "project-a-member");
    let (status, body, _) = call(
        &http,
        &server,
        Method::GET,
        "/v1/nodes",
        Some(&member_a),
        None,
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(node_names(&body), ["node-a", "node-b-leased-to-a"]);
    let patch = || Some(json!([{"op": "add", "path": "/extra/touched", "value": "yes"}]));
    let (status, body, _) = call(
        &http,
        &server,
        Method::PATCH,
        "/v1/nodes/node-a",
        Some(&member_a),
        patch(),
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, _, _) = call(
        &http,
        &server,
        Method::GET,
        "/v1/nodes/node-b",
        Some(&member_a),
        None,
    );
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another project's node does not exist for it"
    );
    let (status, _, _) = call(
        &http,
        &server,
        Method::PATCH,
        "/v1/nodes/node-b",
        Some(&member_a),
        patch(),
    );
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _, _) = call(
        &http,
        &server,
        Method::DELETE,
        "/v1/nodes/node-a",
        Some(&member_a),
        None,
    );
    assert_eq!(status, StatusCode::FORBIDDEN, "members do not delete nodes");

    let (member_b, _) = keystone.login(&http, "project-b-member");
    let (_, body, _) = call(
        &http,
        &server,
        Method::GET,
        "/v1/nodes",
        Some(&member_b),
        None,
    );
    assert_eq!(node_names(&body), ["node-b", "node-b-leased-to-a"]);

    // A project reader reads its nodes and changes nothing.
    let (reader_a, _) = keystone.login(&http, "project-a-reader");
    let (_, body, _) = call(
        &http,
        &server,
        Method::GET,
        "/v1/nodes",
        Some(&reader_a),
        None,
    );
    assert_eq!(node_names(&body), ["node-a", "node-b-leased-to-a"]);
    let (status, _, _) = call(
        &http,
        &server,
        Method::PATCH,
        "/v1/nodes/node-a",
        Some(&reader_a),
        patch(),
    );
    assert_eq!(status, StatusCode::FORBIDDEN);

    // A system reader sees everything and can change nothing.
    let (system_reader, _) = keystone.login(&http, "system-reader");
    let (_, body, _) = call(
        &http,
        &server,
        Method::GET,
        "/v1/nodes",
        Some(&system_reader),
        None,
    );
    assert_eq!(
        node_names(&body),
        ["node-a", "node-b", "node-b-leased-to-a", "node-free"]
    );
    for (method, path, body) in [
        (Method::PATCH, "/v1/nodes/node-free", patch()),
        (
            Method::POST,
            "/v1/nodes",
            Some(json!({"driver": "fake-hardware", "name": "nope"})),
        ),
        (
            Method::PUT,
            "/v1/nodes/node-free/states/power",
            Some(json!({"target": "power on"})),
        ),
        (Method::DELETE, "/v1/nodes/node-free", None),
    ] {
        let (status, answer, _) = call(
            &http,
            &server,
            method.clone(),
            path,
            Some(&system_reader),
            body,
        );
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {answer}");
    }

    // A revoked token (never seen by Ferric, so not in its cache) is refused.
    let (revoked, _) = keystone.login(&http, "project-a-member");
    let response = http
        .delete(format!("{}/auth/tokens", keystone.auth_url()))
        .header("X-Auth-Token", &admin)
        .header("X-Subject-Token", &revoked)
        .send()
        .unwrap();
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    let (status, _, _) = call(
        &http,
        &server,
        Method::GET,
        "/v1/nodes",
        Some(&revoked),
        None,
    );
    assert_eq!(status, StatusCode::UNAUTHORIZED);

    // The ferric CLI: a clouds.yaml cloud, the OS_* variables, a token and an endpoint.
    let clouds = keystone.dir.join("clouds.yaml");
    let clouds = clouds.to_str().unwrap();
    assert_eq!(
        cli_node_names(&[
            ("OS_CLIENT_CONFIG_FILE", clouds),
            ("OS_CLOUD", "project-a-member"),
        ]),
        ["node-a", "node-b-leased-to-a"]
    );
    assert_eq!(
        cli_node_names(&[
            ("OS_AUTH_URL", &keystone.auth_url()),
            ("OS_USERNAME", "system-reader"),
            ("OS_PASSWORD", "ferric-test-system-reader"),
            ("OS_USER_DOMAIN_NAME", "Default"),
            ("OS_SYSTEM_SCOPE", "all"),
        ])
        .len(),
        4
    );
    assert_eq!(
        cli_node_names(&[("OS_TOKEN", &member_b), ("OS_ENDPOINT", &server.url(""))]),
        ["node-b", "node-b-leased-to-a"]
    );
    // The baremetal CLI (python-ironicclient), when its venv is there.
    let baremetal = std::env::var_os("HOME")
        .map(|home| PathBuf::from(home).join(".cache/ferric/clients-venv/bin/baremetal"))
        .filter(|path| path.is_file());
    match baremetal {
        Some(baremetal) => {
            let output = Command::new(baremetal)
                .args(["node", "list", "-f", "value", "-c", "Name"])
                .env("OS_CLIENT_CONFIG_FILE", clouds)
                .env("OS_CLOUD", "project-b-member")
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&output.stdout);
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
            let mut names: Vec<&str> = stdout.lines().collect();
            names.sort_unstable();
            assert_eq!(names, ["node-b", "node-b-leased-to-a"]);
        }
        None => eprintln!(
            "no clients venv (scripts/clients-venv.sh): the baremetal CLI step is skipped"
        ),
    }

    // Keystone stopped: a token Ferric has not validated yet gets 503 naming Keystone, fast.
    let (unseen, _) = keystone.login(&http, "project-b-reader");
    keystone.script(&["stop"]);
    let asked = Instant::now();
    let (status, body, _) = call(
        &http,
        &server,
        Method::GET,
        "/v1/nodes",
        Some(&unseen),
        None,
    );
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert!(
        fault(&body).contains("Keystone at http://127.0.0.1"),
        "{body}"
    );
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "{:?}",
        asked.elapsed()
    );
    // A token validated before the outage still works from the cache.
    let (status, _, _) = call(
        &http,
        &server,
        Method::GET,
        "/v1/nodes",
        Some(&member_a),
        None,
    );
    assert_eq!(status, StatusCode::OK);

    // Keystone back (same keys, so same tokens), with 8 s tokens from now on: recovered.
    keystone.script(&["start", "--keep-db", "--token-expiration", "8"]);
    let (status, body, _) = call(
        &http,
        &server,
        Method::GET,
        "/v1/nodes",
        Some(&unseen),
        None,
    );
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(node_names(&body), ["node-b", "node-b-leased-to-a"]);

    // An expired token is refused, although Ferric validated (and cached) it before.
    let (short, expires_at) = keystone.login(&http, "project-a-reader");
    let (status, _, _) = call(&http, &server, Method::GET, "/v1/nodes", Some(&short), None);
    assert_eq!(status, StatusCode::OK);
    eprintln!("waiting for a token to expire at {expires_at}");
    std::thread::sleep(Duration::from_secs(9));
    let (status, _, headers) = call(&http, &server, Method::GET, "/v1/nodes", Some(&short), None);
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(headers.contains_key("WWW-Authenticate"));
}
