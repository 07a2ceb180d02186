//! `ferric db` as an operator runs it around a real `ferric server`: the explicit schema
//! upgrade and `--no-db-upgrade`, and a backup taken while the server runs, restored (refused
//! while it runs) after the data changed, with every node back as it was.

// A failed unwrap is the test's failure report; clippy's test allowance covers only the
// `#[test]` functions, not these helpers.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::Server;
use serde_json::{Value, json};

/// Runs `ferric db ARGS` in `dir` against `ferric.db` there.
fn ferric_db(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferric"))
        .arg("db")
        .args(args)
        .args(["--database-url", "ferric.db"])
        .current_dir(dir)
        .env_remove("FERRIC_DATABASE_URL")
        .env_remove("FERRIC_CONFIG")
        .output()
        .expect("run ferric db")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::new()
}

fn create_node(server: &Server, name: &str) -> Value {
    let response = client()
        .post(server.url("/v1/nodes"))
        .header("X-OpenStack-Ironic-API-Version", "latest")
        .json(&json!({
            "driver": "fake-hardware",
            "name": name,
            "properties": {"cpus": 8, "memory_mb": 4096},
            "extra": {"rack": name},
        }))
        .send()
        .unwrap();
    assert_eq!(response.status(), 201, "{}", response.text().unwrap());
    response.json().unwrap()
}

/// Each node's identity and what the operator set, by name.
fn nodes(server: &Server) -> Vec<Value> {
    let listing: Value = client()
        .get(server.url("/v1/nodes?detail=true&sort_key=name"))
        .header("X-OpenStack-Ironic-API-Version", "latest")
        .send()
        .unwrap()
        .json()
        .unwrap();
    listing["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            json!({
                "uuid": node["uuid"],
                "name": node["name"],
                "driver": node["driver"],
                "properties": node["properties"],
                "extra": node["extra"],
                "provision_state": node["provision_state"],
                "created_at": node["created_at"],
            })
        })
        .collect()
}

#[test]
fn schema_upgrade_is_explicit_with_no_db_upgrade() {
    let dir = tempfile::tempdir().unwrap();

    let check = ferric_db(dir.path(), &["upgrade", "--check"]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
    assert!(text(&check).contains("pending: 0001"), "{}", text(&check));

    let refused = Command::new(env!("CARGO_BIN_EXE_ferric"))
        .args(["server", "--no-db-upgrade", "--database-url", "ferric.db"])
        .args(["--api-listen", "127.0.0.1:0"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("run `ferric db upgrade`"),
        "{}",
        text(&refused)
    );

    let upgrade = ferric_db(dir.path(), &["upgrade"]);
    assert!(upgrade.status.success(), "{}", text(&upgrade));
    assert!(
        text(&upgrade).contains("applied: 0001"),
        "{}",
        text(&upgrade)
    );
    let check = ferric_db(dir.path(), &["upgrade", "--check"]);
    assert!(check.status.success(), "{}", text(&check));
    assert!(text(&check).contains("up to date"), "{}", text(&check));

    let mut server = Server::start(
        dir.path(),
        &["--no-db-upgrade", "--database-url", "ferric.db"],
    );
    assert!(server.terminate());
}

#[test]
fn backup_while_running_and_restore_when_stopped_bring_every_node_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(dir.path(), &["--database-url", "ferric.db"]);
    for n in 0..5 {
        create_node(&server, &format!("node-{n}"));
    }
    let before = nodes(&server);
    assert_eq!(before.len(), 5);

    let backup = ferric_db(dir.path(), &["backup", "backup.db"]);
    assert!(backup.status.success(), "{}", text(&backup));
    let again = ferric_db(dir.path(), &["backup", "backup.db"]);
    assert!(!again.status.success(), "a backup overwrote its file");

    // Life goes on after the backup: a node deleted, another created.
    let deleted = client()
        .delete(server.url("/v1/nodes/node-0"))
        .send()
        .unwrap();
    assert_eq!(deleted.status(), 204);
    create_node(&server, "node-after-backup");
    assert_ne!(nodes(&server), before);

    let refused = ferric_db(dir.path(), &["restore", "backup.db"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("a server is running"),
        "{}",
        text(&refused)
    );

    assert!(server.terminate());
    let restore = ferric_db(dir.path(), &["restore", "backup.db"]);
    assert!(restore.status.success(), "{}", text(&restore));

    let mut server = Server::start(dir.path(), &["--database-url", "ferric.db"]);
    assert_eq!(nodes(&server), before);
    assert!(server.terminate());
}
