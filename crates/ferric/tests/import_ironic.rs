//! `ferric import ironic` against a real Ironic 39 (unmodified, from PyPI, run by
//! `scripts/ironic-standalone.sh` on SQLite): a scripted workload populates it through its
//! API, the import copies its database into Ferric's (SQLite, then PostgreSQL), and every
//! `GET` of every resource on Ferric must equal Ironic's answer at the same microversion,
//! field by field, except the documented list in [`IGNORED`]. Then the imported nodes go on
//! living (undeploy, manage, provide, deploy again on fake-hardware; a redfish node drives
//! sushy-tools' emulator with its imported credentials), and bad input (a live
//! Ironic, an empty or foreign database, a newer schema, a hardware type not enabled) is
//! refused with a clear message and nothing written.
//!
//! A second test does the same with Ironic on the local MariaDB, imported into PostgreSQL.
//!
//! Each test walks through every step, like a runbook: populating Ironic takes ~15 s. The venv
//! comes from `scripts/install-deps.sh` (`scripts/ironic-standalone.sh install`); without it
//! the test says so and passes.
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
#[path = "import_ironic/workload.rs"]
mod workload;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::Server;
use reqwest::blocking::Client;
use serde_json::Value;
use workload::Api;

/// What may differ between Ironic's answers and Ferric's: the links' host and port (each
/// service names itself) and the conductor names (Ironic's conductor is not imported; Ferric's
/// hash ring gives each node one of its own).
const IGNORED: &[&str] = &["conductor"];

/// No power sync while the answers are compared: it would only rewrite what it reads.
const QUIET: &[(&str, &str)] = &[("FERRIC_SYNC_POWER_STATE_INTERVAL", "0")];

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn venv() -> PathBuf {
    std::env::var_os("IRONIC_VENV").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_default();
            PathBuf::from(home).join(".cache/ferric/ironic-venv")
        },
        PathBuf::from,
    )
}

/// Ironic in a directory of its own; stopped (and its MariaDB database dropped) when dropped.
struct Ironic {
    dir: PathBuf,
    port: u16,
    /// `sqlite` or `mariadb`.
    db: &'static str,
}

impl Ironic {
    fn script(&self, args: &[&str]) -> String {
        let output = Command::new(repository().join("scripts/ironic-standalone.sh"))
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .args(["--port", &self.port.to_string(), "--db", self.db])
            .output()
            .expect("run scripts/ironic-standalone.sh");
        assert!(
            output.status.success(),
            "ironic-standalone.sh {args:?} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap().trim().to_owned()
    }

    /// The database's URL as in ironic.conf (SQLAlchemy's form).
    fn database_url(&self) -> String {
        self.script(&["dburl"])
    }
}

impl Drop for Ironic {
    fn drop(&mut self) {
        for command in ["stop", "dropdb"] {
            let _ = Command::new(repository().join("scripts/ironic-standalone.sh"))
                .args([command, "--db", self.db, "--dir"])
                .arg(&self.dir)
                .output();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `ferric import ironic --from FROM` with `args`; its output.
fn import(from: &str, args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferric"))
        .args(["import", "ironic", "--from", from])
        .args(args)
        .current_dir(dir)
        .env_remove("FERRIC_DATABASE_URL")
        .env_remove("FERRIC_CONFIG")
        .output()
        .expect("run ferric import")
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// An import that must fail saying `expected`.
fn refused(from: &str, args: &[&str], dir: &Path, expected: &str) -> String {
    let output = import(from, args, dir);
    let said = text(&output);
    assert!(!output.status.success(), "import succeeded:\n{said}");
    assert!(said.contains(expected), "expected '{expected}' in:\n{said}");
    said
}

/// `value` with the service's own base URL in every string replaced by `BASE`, and the
/// [`IGNORED`] fields removed.
fn normalized(value: &Value, base: &str) -> Value {
    match value {
        Value::String(text) => Value::String(text.replace(base, "BASE")),
        Value::Array(items) => Value::Array(items.iter().map(|v| normalized(v, base)).collect()),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(key, _)| !IGNORED.contains(&key.as_str()))
                .map(|(key, v)| (key.clone(), normalized(v, base)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Every difference between `ours` and `theirs`, by JSON path.
fn differences(path: &str, ours: &Value, theirs: &Value, found: &mut Vec<String>) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            for key in a.keys().chain(b.keys().filter(|key| !a.contains_key(*key))) {
                let (x, y) = (
                    a.get(key).unwrap_or(&Value::Null),
                    b.get(key).unwrap_or(&Value::Null),
                );
                if a.contains_key(key) != b.contains_key(key) {
                    found.push(format!(
                        "{path}.{key}: ferric {} ironic {}",
                        if a.contains_key(key) {
                            x.to_string()
                        } else {
                            "(absent)".into()
                        },
                        if b.contains_key(key) {
                            y.to_string()
                        } else {
                            "(absent)".into()
                        },
                    ));
                    continue;
                }
                differences(&format!("{path}.{key}"), x, y, found);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (n, (x, y)) in a.iter().zip(b).enumerate() {
                differences(&format!("{path}[{n}]"), x, y, found);
            }
        }
        _ if ours != theirs => found.push(format!("{path}: ferric {ours} ironic {theirs}")),
        _ => {}
    }
}

/// Ironic's answers, taken once: `(path, status, normalized body)`.
type Snapshot = Vec<(String, u16, Value)>;

fn snapshot(api: &Api<'_>, paths: &[String]) -> Snapshot {
    paths
        .iter()
        .map(|path| {
            let (status, body) = api.get(path);
            (path.clone(), status, normalized(&body, &api.base))
        })
        .collect()
}

/// Compares Ferric's answers with Ironic's snapshot (`ironic_base`: where Ironic ran, which
/// its own records may name too); panics listing every difference.
fn compare(ferric: &Api<'_>, ironic: &Snapshot, ironic_base: &str, backend: &str) {
    let mut found = Vec::new();
    for (path, status, expected) in ironic {
        let (ours, body) = ferric.get(path);
        if ours != *status {
            found.push(format!("{path}: status ferric {ours} ironic {status}"));
            continue;
        }
        if *status >= 400 {
            continue; // error bodies name the service; the status is what clients act on
        }
        let body = normalized(&normalized(&body, &ferric.base), ironic_base);
        differences(path, &body, expected, &mut found);
    }
    assert!(
        found.is_empty(),
        "{backend}: {} differences between Ferric and Ironic:\n{}",
        found.len(),
        found.join("\n")
    );
    eprintln!("{backend}: {} GETs equal Ironic's", ironic.len());
}

/// The imported nodes go on living on fake-hardware.
fn lifecycle(ferric: &Api<'_>, nodes: &[(String, String)]) {
    let uuid = |name: &str| workload::uuid_of(nodes, name);
    let active = uuid("node-active");
    ferric.ok(
        "PATCH",
        &format!("/v1/nodes/{active}"),
        serde_json::json!([{"op": "replace", "path": "/protected", "value": false}]),
    );
    ferric.provision(&active, "deleted", "available");
    ferric.provision(&active, "manage", "manageable");
    ferric.provision(&active, "provide", "available");
    let deployed = ferric.provision(&active, "active", "active");
    assert!(deployed["last_error"].is_null(), "{deployed}");
    assert_eq!(deployed["instance_uuid"], Value::Null, "{deployed}");
    let manageable = uuid("node-manageable");
    ferric.provision(&manageable, "provide", "available");
    eprintln!("imported nodes undeployed, managed, provided and deployed again on Ferric");
}

/// Skips (passing) without the Ironic venv.
fn have_ironic() -> bool {
    if venv().join("bin/ironic").is_file() {
        return true;
    }
    eprintln!(
        "SKIPPED: no Ironic venv at {}; run scripts/install-deps.sh (or \
         scripts/ironic-standalone.sh install)",
        venv().display()
    );
    false
}

/// Ironic populated by the workload and stopped, with Ironic's answers to every `GET`.
struct Populated {
    ironic: Ironic,
    nodes: Vec<(String, String)>,
    expected: Snapshot,
    base: String,
}

/// Starts Ironic on `db`, runs the workload, checks that an import is refused while Ironic
/// runs, and stops it. On SQLite, the node data fake-hardware cannot produce (BIOS
/// settings, firmware, inventory, tags) is written into Ironic's tables and Ironic restarted
/// to answer for it.
fn populate(work: &Path, db: &'static str, http: &Client) -> Populated {
    let ironic = Ironic {
        dir: work.join(format!("ironic-{db}")),
        port: free_port(),
        db,
    };
    let base = ironic.script(&["start"]);
    let api = Api {
        http,
        base: base.clone(),
    };
    let nodes = workload::populate(&api);
    if db == "sqlite" {
        ironic.script(&["stop"]);
        workload::seed_node_data(&ironic.dir.join("ironic.sqlite"), &nodes);
        assert_eq!(ironic.script(&["start", "--keep-db"]), base);
    }
    let paths = workload::paths(&api, &nodes);
    let expected = snapshot(&api, &paths);

    // Refused while Ironic's conductor is alive: nothing written, not even a database file.
    let target = work.join(format!("refused-{db}.db"));
    let target_url = target.display().to_string();
    refused(
        &ironic.database_url(),
        &["--database-url", &target_url],
        work,
        "are alive",
    );
    assert!(!target.exists(), "a refused import created {target_url}");
    ironic.script(&["stop"]);
    Populated {
        ironic,
        nodes,
        expected,
        base,
    }
}

#[test]
fn import_from_ironic_on_sqlite_keeps_every_record() {
    if !have_ironic() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let http = Client::new();
    let Populated {
        ironic,
        nodes,
        expected,
        base,
    } = populate(work.path(), "sqlite", &http);
    let from = ironic.database_url();

    bad_input(&from, work.path());
    takeover(&from, work.path(), &http);

    // A dry run counts and writes nothing.
    let target = work.path().join("ferric.db");
    let target_url = target.display().to_string();
    let dry = import(
        &from,
        &["--dry-run", "--database-url", &target_url],
        work.path(),
    );
    let said = text(&dry);
    assert!(dry.status.success(), "{said}");
    assert!(said.contains("Ironic release: Ironic 39"), "{said}");
    assert!(said.contains("dry run: nothing was written"), "{said}");
    assert!(said.contains("not imported: 2 node tags"), "{said}");
    assert!(
        !said.contains("s3cret-bmc"),
        "a secret was printed:\n{said}"
    );
    assert!(!target.exists());

    // SQLite: import, compare every GET, then the nodes live on.
    let done = import(&from, &["--database-url", &target_url], work.path());
    let said = text(&done);
    assert!(done.status.success(), "{said}");
    assert!(
        !said.contains("s3cret-bmc"),
        "a secret was printed:\n{said}"
    );
    eprintln!("{said}");
    // Re-running is safe: everything is already stored and kept.
    let again = import(&from, &["--database-url", &target_url], work.path());
    assert!(again.status.success(), "{}", text(&again));
    assert!(
        text(&again).contains("kept as they are"),
        "{}",
        text(&again)
    );
    {
        let server = Server::start_with_env(work.path(), &["--database-url", &target_url], QUIET);
        let ferric = Api {
            http: &http,
            base: server.url(""),
        };
        compare(&ferric, &expected, &base, "sqlite");
        lifecycle(&ferric, &nodes);
    }

    // PostgreSQL.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let database = runtime.block_on(ferric_db::testing::PgDatabase::create());
    let done = import(&from, &["--database-url", &database.url], work.path());
    assert!(done.status.success(), "{}", text(&done));
    let server = Server::start_with_env(work.path(), &["--database-url", &database.url], QUIET);
    let ferric = Api {
        http: &http,
        base: server.url(""),
    };
    compare(&ferric, &expected, &base, "postgres");
    drop(server);

    update(&ironic, &from, &target_url, work.path(), &http);
}

/// Ironic on MariaDB (how most sites run it), imported into PostgreSQL.
#[test]
fn import_from_ironic_on_mariadb_keeps_every_record() {
    if !have_ironic() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let http = Client::new();
    let populated = populate(work.path(), "mariadb", &http);
    let from = populated.ironic.database_url();
    assert!(from.starts_with("mysql+pymysql://"), "{from}");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let database = runtime.block_on(ferric_db::testing::PgDatabase::create());
    let done = import(&from, &["--database-url", &database.url], work.path());
    let said = text(&done);
    assert!(done.status.success(), "{said}");
    assert!(
        said.contains("MySQL/MariaDB database of Ironic 39"),
        "{said}"
    );
    let server = Server::start_with_env(work.path(), &["--database-url", &database.url], QUIET);
    let ferric = Api {
        http: &http,
        base: server.url(""),
    };
    compare(
        &ferric,
        &populated.expected,
        &populated.base,
        "mariadb → postgres",
    );
    lifecycle(&ferric, &populated.nodes);
}

/// A redfish node enrolled and verified by Ironic against sushy-tools' emulator, imported
/// with its `driver_info` (the BMC password included): Ferric drives the same BMC with it.
#[test]
fn imported_redfish_node_drives_its_bmc() {
    if !have_ironic() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let sushy = runtime.block_on(emulators::Sushy::start("admin", "bmc-s3cret"));
    let work = tempfile::tempdir().unwrap();
    let ironic = Ironic {
        dir: work.path().join("ironic-redfish"),
        port: free_port(),
        db: "sqlite",
    };
    let http = Client::new();
    let api = Api {
        http: &http,
        base: ironic.script(&["start", "--profile", "bmo"]),
    };
    let node = api.ok(
        "POST",
        "/v1/nodes",
        serde_json::json!({
            "name": "redfish-0", "driver": "redfish",
            "driver_info": {"redfish_address": sushy.address, "redfish_system_id": sushy.system_path,
                            "redfish_username": "admin", "redfish_password": "bmc-s3cret"},
            "boot_interface": "ipxe", "deploy_interface": "direct", "bios_interface": "no-bios",
            "firmware_interface": "no-firmware", "inspect_interface": "no-inspect",
            "raid_interface": "no-raid", "vendor_interface": "no-vendor",
            "console_interface": "no-console", "rescue_interface": "no-rescue",
        }),
    )["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let managed = api.provision(&node, "manage", "manageable");
    assert_eq!(managed["power_state"], "power off", "{managed}");
    ironic.script(&["stop"]);

    let target = work.path().join("ferric.db").display().to_string();
    let done = import(
        &ironic.database_url(),
        &["--database-url", &target],
        work.path(),
    );
    let said = text(&done);
    assert!(done.status.success(), "{said}");
    assert!(
        !said.contains("bmc-s3cret"),
        "a secret was printed:\n{said}"
    );
    let server = Server::start_with_env(work.path(), &["--database-url", &target], QUIET);
    let ferric = Api {
        http: &http,
        base: server.url(""),
    };
    ferric.ok(
        "PUT",
        &format!("/v1/nodes/{node}/states/power"),
        serde_json::json!({"target": "power on"}),
    );
    common::eventually("the node to be powered on", || {
        (ferric.get(&format!("/v1/nodes/{node}")).1["power_state"] == "power on").then_some(())
    });
    let system = runtime.block_on(sushy.system());
    assert_eq!(system["PowerState"], "On", "{system}");
    eprintln!("the imported redfish node powered its emulated machine on through Ferric");
}

/// `--update` brings a record changed in Ironic over again; without it the stored one stays.
fn update(ironic: &Ironic, from: &str, target_url: &str, dir: &Path, http: &Client) {
    let base = ironic.script(&["start", "--keep-db"]);
    let api = Api { http, base };
    api.ok(
        "PATCH",
        "/v1/nodes/node-enroll",
        serde_json::json!([{"op": "replace", "path": "/description", "value": "changed"}]),
    );
    ironic.script(&["stop"]);
    let description = || {
        let server = Server::start_with_env(dir, &["--database-url", target_url], QUIET);
        let ferric = Api {
            http,
            base: server.url(""),
        };
        ferric.get("/v1/nodes/node-enroll").1["description"].clone()
    };
    let kept = import(from, &["--database-url", target_url], dir);
    assert!(kept.status.success(), "{}", text(&kept));
    assert_eq!(description(), "new");
    let updated = import(from, &["--database-url", target_url, "--update"], dir);
    assert!(updated.status.success(), "{}", text(&updated));
    assert!(text(&updated).contains("overwritten"), "{}", text(&updated));
    assert_eq!(description(), "changed");
    eprintln!("--update brought the changed node over; without it the stored one stayed");
}

/// A node Ironic's conductor was deploying when it stopped is imported as it is, and Ferric's
/// conductor fails it at start, as it does a dead conductor's node (docs/import.md); a node
/// of a hardware type this Ferric does not enable is left out with the reason, the rest
/// imported.
fn takeover(from: &str, dir: &Path, http: &Client) {
    let copy = dir.join("deploying.sqlite");
    std::fs::copy(from.trim_start_matches("sqlite:///"), &copy).unwrap();
    let status = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
             c.execute(\"UPDATE nodes SET provision_state = 'deploying', \
             target_provision_state = 'active', reservation = 'ironic-reference' \
             WHERE name = 'node-manageable'\"); \
             c.execute(\"UPDATE nodes SET driver = 'ipmi' WHERE name = 'node-enroll'\"); \
             c.commit()",
        ])
        .arg(&copy)
        .status()
        .unwrap();
    assert!(status.success());
    let config = dir.join("no-ipmi.toml");
    std::fs::write(
        &config,
        "enabled_hardware_types = [\"fake-hardware\", \"redfish\"]\n",
    )
    .unwrap();
    let target = dir.join("takeover.db").display().to_string();
    let done = import(
        &format!("sqlite:///{}", copy.display()),
        &[
            "--database-url",
            &target,
            "--config",
            &config.display().to_string(),
        ],
        dir,
    );
    let said = text(&done);
    assert!(done.status.success(), "{said}");
    assert!(
        said.contains("its driver ipmi is not enabled here"),
        "the ipmi node is not listed as left out:\n{said}"
    );
    let server = Server::start_with_env(dir, &["--database-url", &target], QUIET);
    let ferric = Api {
        http,
        base: server.url(""),
    };
    assert_eq!(ferric.get("/v1/nodes/node-enroll").0, 404);
    let failed = common::eventually("the deploying node to be failed", || {
        let (_, node) = ferric.get("/v1/nodes/node-manageable");
        (node["provision_state"] == "deploy failed").then_some(node)
    });
    assert!(failed["last_error"].is_string(), "{failed}");
    eprintln!(
        "a node taken over mid-deploy failed with: {}",
        failed["last_error"]
    );
}

/// Bad input: a clear message, and nothing written.
fn bad_input(from: &str, dir: &Path) {
    let target = dir.join("untouched.db");
    let target_url = target.display().to_string();
    let into = ["--database-url", target_url.as_str()];

    // An empty database.
    let empty = dir.join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    refused(
        &format!("sqlite:///{}", empty.display()),
        &into,
        dir,
        "not an Ironic database",
    );
    // A database that is not Ironic's (Ferric's own).
    let foreign = dir.join("foreign.db");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let store = ferric_db::Store::open(&foreign.display().to_string())
            .await
            .unwrap();
        store.close().await;
    });
    refused(
        &format!("sqlite:///{}", foreign.display()),
        &into,
        dir,
        "no alembic_version",
    );
    // A newer Ironic schema.
    let newer = dir.join("newer.sqlite");
    std::fs::copy(from.trim_start_matches("sqlite:///"), &newer).unwrap();
    let status = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); \
             c.execute(\"UPDATE alembic_version SET version_num = 'ffffffffffff'\"); c.commit()",
        ])
        .arg(&newer)
        .status()
        .unwrap();
    assert!(status.success());
    refused(
        &format!("sqlite:///{}", newer.display()),
        &into,
        dir,
        "alembic revision ffffffffffff, which this ferric does not know",
    );
    // A hardware type this Ferric does not enable: with --strict, nothing is imported.
    let config = dir.join("no-fake.toml");
    std::fs::write(
        &config,
        "enabled_hardware_types = [\"redfish\", \"ipmi\"]\n",
    )
    .unwrap();
    let config = config.display().to_string();
    let said = refused(
        from,
        &[
            "--config",
            &config,
            "--database-url",
            &target_url,
            "--strict",
        ],
        dir,
        "--strict",
    );
    assert!(
        said.contains("its driver fake-hardware is not enabled here"),
        "{said}"
    );
    assert!(!target.exists(), "a refused import wrote {target_url}");
    eprintln!("bad input refused, nothing written");
}
