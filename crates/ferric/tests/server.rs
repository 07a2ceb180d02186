//! `ferric server` as a user runs it: the real binary, a real SQLite file, real HTTP, and a
//! real SIGTERM.

mod common;

use std::process::Command;

use common::Server;

fn get(url: &str) -> reqwest::blocking::Response {
    reqwest::blocking::get(url).expect("GET")
}

#[test]
fn default_database_is_created_in_the_working_directory_and_version_documents_are_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &[]);
    assert!(
        dir.path().join("ferric.db").is_file(),
        "./ferric.db was not created"
    );

    let response = get(&server.url("/"));
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["x-openstack-ironic-api-minimum-version"], "1.1");
    assert!(headers.contains_key("x-openstack-ironic-api-maximum-version"));
    assert_eq!(headers["x-openstack-ironic-api-version"], "1.1");
    let root: serde_json::Value = response.json().unwrap();
    assert_eq!(root["default_version"]["min_version"], "1.1");
    assert_eq!(root["default_version"]["id"], "v1");
    assert_eq!(root["versions"][0]["status"], "CURRENT");
    let self_link = root["default_version"]["links"][0]["href"]
        .as_str()
        .unwrap();
    assert_eq!(self_link, server.url("/v1/"));

    let v1: serde_json::Value = get(&server.url("/v1")).json().unwrap();
    assert_eq!(v1["id"], "v1");
    assert_eq!(v1["nodes"][0]["href"], server.url("/v1/nodes/"));
    assert_eq!(
        v1["media_types"]["type"],
        "application/vnd.openstack.ironic.v1+json"
    );

    let health: serde_json::Value = get(&server.url("/health")).json().unwrap();
    assert_eq!(health["status"], "ok");
    assert_eq!(health["database"], "sqlite");

    assert!(server.terminate(), "ferric did not exit cleanly on SIGTERM");
}

#[test]
fn errors_carry_ironic_bodies_and_version_headers() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--database-url", "errors.db"]);
    assert!(dir.path().join("errors.db").is_file());

    let response = get(&server.url("/no/such/thing"));
    assert_eq!(response.status(), 404);
    assert_eq!(
        response.headers()["x-openstack-ironic-api-minimum-version"],
        "1.1"
    );
    let body: serde_json::Value = response.json().unwrap();
    let inner: serde_json::Value =
        serde_json::from_str(body["error_message"].as_str().unwrap()).unwrap();
    assert_eq!(inner["faultcode"], "Client");
    assert!(
        inner["faultstring"]
            .as_str()
            .unwrap()
            .contains("/no/such/thing")
    );

    let client = reqwest::blocking::Client::new();
    let response = client.post(server.url("/v1")).send().unwrap();
    assert_eq!(response.status(), 405);
    let body: serde_json::Value = response.json().unwrap();
    assert!(body["error_message"].is_string());

    let response = client
        .get(server.url("/v1"))
        .header("X-OpenStack-Ironic-API-Version", "2.0")
        .send()
        .unwrap();
    assert_eq!(response.status(), 406);

    assert!(server.terminate());
}

#[test]
fn a_missing_config_file_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_ferric"))
        .args(["server", "--config", "nope.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("nope.toml does not exist"), "{stderr}");
    assert!(
        !dir.path().join("ferric.db").exists(),
        "no database for a refused start"
    );
}

#[test]
fn split_roles_are_refused_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    for role in ["api", "conductor"] {
        let output = Command::new(env!("CARGO_BIN_EXE_ferric"))
            .args(["server", "--role", role, "--database-url", "split.db"])
            .current_dir(dir.path())
            .env_remove("FERRIC_DATABASE_URL")
            .output()
            .unwrap();
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("--role {role} needs a PostgreSQL database_url"))
                && stderr.contains("--role all"),
            "{stderr}"
        );
        assert!(
            !dir.path().join("split.db").exists(),
            "no database for a refused start"
        );
    }
}

#[test]
fn settings_come_from_the_config_file_and_environment() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ferric.toml"),
        "database_url = \"from-file.db\"\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_ferric"))
        .args(["server", "--config", "ferric.toml"])
        .env("FERRIC_LOG_FORMAT", "yaml")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(2),
        "a bad FERRIC_LOG_FORMAT must be refused"
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("yaml"), "{stderr}");

    let mut server = Server::start(dir.path(), &["--config", "ferric.toml"]);
    assert!(
        dir.path().join("from-file.db").is_file(),
        "database_url from the file not used"
    );
    assert!(server.terminate());
}
