//! The `ferric` client commands as an operator runs them: the real binary against a real
//! `ferric server` (SQLite file, port 0), through a node's whole lifecycle with `--wait`,
//! reading both the tables people see and the JSON scripts parse.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::Server;
use serde_json::Value;

/// Runs `ferric ARGS` against `url`, with none of the caller's client settings leaking in.
fn ferric(url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferric"))
        .args(args)
        .env("FERRIC_URL", url)
        .env_remove("FERRIC_USERNAME")
        .env_remove("FERRIC_PASSWORD")
        .env_remove("FERRIC_API_VERSION")
        .output()
        .expect("run ferric")
}

/// The client of one server.
struct Cli {
    url: String,
}

impl Cli {
    fn of(server: &Server) -> Self {
        Self {
            url: server.url(""),
        }
    }

    /// Runs a command that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let output = ferric(&self.url, args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "`ferric {}` failed ({}): {stderr}",
            args.join(" "),
            output.status
        );
        String::from_utf8(output.stdout).expect("UTF-8 output")
    }

    /// Runs a command that must succeed; returns its stderr (progress and notes).
    fn ok_stderr(&self, args: &[&str]) -> String {
        let output = ferric(&self.url, args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(
            output.status.success(),
            "`ferric {}`: {stderr}",
            args.join(" ")
        );
        stderr
    }

    /// Runs a command with `-f json` that must succeed; returns the parsed document.
    fn json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.extend(["-f", "json"]);
        let text = self.ok(&args);
        serde_json::from_str(&text).unwrap_or_else(|error| {
            panic!("`ferric {}` is not JSON ({error}): {text}", args.join(" "))
        })
    }

    /// Runs a command that must fail with exit code 1; returns its stderr.
    fn fails(&self, args: &[&str]) -> String {
        let output = ferric(&self.url, args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert_eq!(
            output.status.code(),
            Some(1),
            "`ferric {}` should fail with 1: {stderr}",
            args.join(" ")
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
        stderr
    }
}

/// The cells of a table's rows (lines between `|`), header included.
fn rows(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .filter(|line| line.starts_with('|'))
        .map(|line| {
            line.trim_matches('|')
                .split('|')
                .map(|cell| cell.trim().to_owned())
                .collect()
        })
        .collect()
}

/// The value of `field` in a Field/Value table.
fn field(table: &str, field: &str) -> String {
    rows(table)
        .into_iter()
        .find(|row| row.first().map(String::as_str) == Some(field))
        .and_then(|row| row.get(1).cloned())
        .unwrap_or_else(|| panic!("no field {field} in:\n{table}"))
}

/// The row of a listing whose `key` column is `value`, as column → cell.
fn row_where(table: &str, key: &str, value: &str) -> Vec<(String, String)> {
    let rows = rows(table);
    let header = rows.first().expect("a header row").clone();
    let column = header
        .iter()
        .position(|name| name == key)
        .unwrap_or_else(|| panic!("no column {key} in:\n{table}"));
    let row = rows
        .iter()
        .skip(1)
        .find(|row| row.get(column).map(String::as_str) == Some(value))
        .unwrap_or_else(|| panic!("no row with {key} = {value} in:\n{table}"));
    header.into_iter().zip(row.iter().cloned()).collect()
}

fn cell(row: &[(String, String)], column: &str) -> String {
    row.iter()
        .find(|(name, _)| name == column)
        .map(|(_, value)| value.clone())
        .unwrap_or_else(|| panic!("no column {column} in {row:?}"))
}

fn start(dir: &Path) -> Server {
    Server::start(dir, &["--database-url", "cli.db"])
}

#[test]
fn a_node_goes_through_its_lifecycle_with_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let cli = Cli::of(&server);

    // Enroll: the table shows the new node.
    let table = cli.ok(&[
        "node",
        "create",
        "--driver",
        "fake-hardware",
        "--name",
        "n1",
    ]);
    assert_eq!(field(&table, "name"), "n1");
    assert_eq!(field(&table, "provision_state"), "enroll");
    assert_eq!(field(&table, "driver"), "fake-hardware");
    let uuid = field(&table, "uuid");
    assert!(!table.contains("\"href\""), "links are not shown:\n{table}");

    let node = cli.json(&["node", "show", "n1"]);
    assert_eq!(node["uuid"], uuid.as_str());
    assert_eq!(node["provision_state"], "enroll");
    assert!(node.get("links").is_none());
    let node = cli.json(&["node", "show", "n1", "--fields", "name,provision_state"]);
    let keys: Vec<&String> = node.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["name", "provision_state"]);

    // A port, by the node's name.
    let port = cli.json(&["port", "create", "52:54:00:12:34:56", "--node", "n1"]);
    assert_eq!(port["node_uuid"], uuid.as_str());
    assert_eq!(port["address"], "52:54:00:12:34:56");
    let ports = cli.ok(&["port", "list", "--node", "n1"]);
    let row = row_where(&ports, "address", "52:54:00:12:34:56");
    assert_eq!(cell(&row, "uuid"), port["uuid"].as_str().unwrap());

    // Traits and VIFs: data on the node.
    cli.ok(&["node", "trait", "add", "n1", "CUSTOM_GPU", "CUSTOM_FAST"]);
    let traits = cli.ok(&["node", "trait", "list", "n1"]);
    row_where(&traits, "trait", "CUSTOM_GPU");
    cli.ok(&["node", "trait", "remove", "n1", "CUSTOM_FAST"]);
    assert_eq!(
        cli.json(&["node", "trait", "list", "n1"]),
        serde_json::json!([{"trait": "CUSTOM_GPU"}])
    );
    cli.ok(&["node", "vif", "attach", "n1", "vif-1"]);
    assert_eq!(
        cli.json(&["node", "vif", "list", "n1"]),
        serde_json::json!([{"id": "vif-1"}])
    );
    cli.ok(&["node", "vif", "detach", "n1", "vif-1"]);

    // The lifecycle, each step followed to its end.
    let table = cli.ok(&["node", "manage", "n1", "--wait", "120"]);
    assert_eq!(field(&table, "provision_state"), "manageable");
    // Not a terminal: plain progress lines on stderr, ending where the node rests.
    let progress = cli.ok_stderr(&["node", "inspect", "n1", "--wait", "120"]);
    assert_eq!(
        progress.lines().last(),
        Some("node n1: manageable"),
        "{progress}"
    );
    let node = cli.json(&["node", "provide", "n1", "--wait", "120"]);
    assert_eq!(node["provision_state"], "available");
    assert_eq!(node["target_provision_state"], Value::Null);
    let node = cli.json(&["node", "deploy", "n1", "--wait"]);
    assert_eq!(node["provision_state"], "active");

    // Power, followed too.
    let node = cli.json(&["node", "power", "on", "n1", "--wait", "60"]);
    assert_eq!(node["power_state"], "power on");
    let node = cli.json(&["node", "power", "off", "n1", "--wait", "60"]);
    assert_eq!(node["power_state"], "power off");
    let table = cli.ok(&["node", "power", "on", "n1", "--wait", "60"]);
    assert_eq!(field(&table, "power_state"), "power on");

    // Boot device.
    cli.ok(&["node", "boot-device", "set", "n1", "pxe", "--persistent"]);
    let boot = cli.json(&["node", "boot-device", "show", "n1"]);
    assert_eq!(boot["boot_device"], "pxe");
    assert_eq!(boot["persistent"], true);
    let table = cli.ok(&["node", "boot-device", "show", "n1"]);
    assert_eq!(field(&table, "boot_device"), "pxe");

    // Maintenance.
    cli.ok(&["node", "maintenance", "set", "n1", "--reason", "new DIMM"]);
    let node = cli.json(&["node", "show", "n1"]);
    assert_eq!(node["maintenance"], true);
    assert_eq!(node["maintenance_reason"], "new DIMM");
    let list = cli.ok(&["node", "list"]);
    assert_eq!(cell(&row_where(&list, "name", "n1"), "maintenance"), "true");
    cli.ok(&["node", "maintenance", "unset", "n1"]);
    assert_eq!(cli.json(&["node", "show", "n1"])["maintenance"], false);

    // Validate: one row per interface.
    let table = cli.ok(&["node", "validate", "n1"]);
    assert_eq!(
        cell(&row_where(&table, "interface", "power"), "result"),
        "true"
    );
    let validation = cli.json(&["node", "validate", "n1"]);
    let power = validation
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["interface"] == "power")
        .expect("a power row");
    assert_eq!(power["result"], true);

    // Set and unset fields.
    let table = cli.ok(&[
        "node",
        "set",
        "n1",
        "--extra",
        "rack=4",
        "--description",
        "web",
    ]);
    assert_eq!(field(&table, "extra"), r#"{"rack":"4"}"#);
    let node = cli.json(&["node", "unset", "n1", "--extra", "rack", "--description"]);
    assert_eq!(node["extra"], serde_json::json!({}));
    assert_eq!(node["description"], Value::Null);

    let node = cli.json(&["node", "undeploy", "n1", "--wait", "120"]);
    assert_eq!(node["provision_state"], "available");

    // Listings: the summary table, --long and --fields as JSON.
    let list = cli.ok(&["node", "list"]);
    let row = row_where(&list, "name", "n1");
    assert_eq!(cell(&row, "uuid"), uuid);
    assert_eq!(cell(&row, "provision_state"), "available");
    let power = cli.json(&["node", "show", "n1", "--fields", "power_state"]);
    assert_eq!(
        cell(&row, "power_state"),
        power["power_state"].as_str().unwrap()
    );
    let long = cli.json(&["node", "list", "--long"]);
    assert_eq!(long[0]["driver"], "fake-hardware");
    assert!(long[0].get("driver_info").is_some());
    let picked = cli.json(&["node", "list", "--fields", "uuid,provision_state"]);
    assert_eq!(
        picked,
        serde_json::json!([{"uuid": uuid, "provision_state": "available"}])
    );
    let yaml = cli.ok(&["node", "list", "-f", "yaml"]);
    assert!(yaml.contains("name: n1"), "{yaml}");

    // History records the way here.
    let history = cli.json(&["node", "history", "list", "n1"]);
    let events = history.as_array().expect("a list of events");
    assert!(!events.is_empty(), "no history");
    let table = cli.ok(&["node", "history", "list", "n1"]);
    assert_eq!(rows(&table).len(), events.len() + 1, "{table}");
    let first = events[0]["uuid"].as_str().unwrap();
    let event = cli.json(&["node", "history", "get", "n1", first]);
    assert_eq!(event["uuid"], first);

    // A port group, and an allocation that claims the available node.
    let portgroup = cli.json(&["portgroup", "create", "--node", "n1", "--name", "bond0"]);
    assert_eq!(portgroup["node_uuid"], uuid.as_str());
    let table = cli.ok(&["portgroup", "list", "--node", "n1"]);
    assert_eq!(
        cell(&row_where(&table, "name", "bond0"), "uuid"),
        portgroup["uuid"].as_str().unwrap()
    );
    cli.ok(&["portgroup", "delete", "bond0"]);
    cli.ok(&["node", "set", "n1", "--resource-class", "baremetal"]);
    let allocation = cli.json(&[
        "allocation",
        "create",
        "--resource-class",
        "baremetal",
        "--name",
        "job-1",
    ]);
    assert_eq!(allocation["state"], "active");
    assert_eq!(allocation["node_uuid"], uuid.as_str());
    let table = cli.ok(&["allocation", "list"]);
    assert_eq!(cell(&row_where(&table, "name", "job-1"), "node_uuid"), uuid);
    let stderr = cli.fails(&[
        "allocation",
        "create",
        "--resource-class",
        "gpu",
        "--name",
        "job-2",
    ]);
    assert!(stderr.contains("allocation job-2 failed"), "{stderr}");
    cli.ok(&["allocation", "delete", "job-1", "job-2"]);
    assert_eq!(cli.json(&["allocation", "list"]), serde_json::json!([]));

    // Chassis.
    let chassis = cli.json(&["chassis", "create", "--description", "rack 4"]);
    let chassis_uuid = chassis["uuid"].as_str().unwrap();
    let table = cli.ok(&["chassis", "list"]);
    assert_eq!(
        cell(&row_where(&table, "uuid", chassis_uuid), "description"),
        "rack 4"
    );
    cli.ok(&["chassis", "delete", chassis_uuid]);

    // Drivers and conductors.
    let drivers = cli.ok(&["driver", "list"]);
    row_where(&drivers, "name", "fake-hardware");
    let conductors = cli.json(&["conductor", "list"]);
    assert_eq!(conductors[0]["alive"], true);

    // What Prometheus scrapes after that walk counts the transitions the CLI asked for.
    let metrics = reqwest::blocking::get(server.url("/metrics"))
        .unwrap()
        .text()
        .unwrap();
    for transition in [
        r#"from="enroll",event="manage",to="verifying""#,
        r#"from="manageable",event="inspect",to="inspecting""#,
        r#"from="manageable",event="provide",to="cleaning""#,
        r#"from="available",event="deploy",to="deploying""#,
        r#"from="deploying",event="done",to="active""#,
        r#"from="active",event="delete",to="deleting""#,
    ] {
        let series = format!("ferric_node_transitions_total{{{transition}}} ");
        let count: f64 = metrics
            .lines()
            .find_map(|line| line.strip_prefix(&series))
            .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
            .parse()
            .unwrap();
        assert!(count >= 1.0, "{series}{count}");
    }

    // Delete, and the API's own words when the node is gone.
    cli.ok(&["port", "delete", port["uuid"].as_str().unwrap()]);
    cli.ok(&["node", "delete", "n1"]);
    let stderr = cli.fails(&["node", "show", "n1"]);
    assert!(stderr.contains("Node n1 could not be found"), "{stderr}");
    assert!(stderr.contains("HTTP 404"), "{stderr}");
    assert!(!stderr.contains("faultstring"), "decoded: {stderr}");
}

#[test]
fn a_failing_deploy_makes_wait_exit_non_zero_with_last_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = start(dir.path());
    let cli = Cli::of(&server);
    cli.ok(&[
        "node",
        "create",
        "--driver",
        "fake-hardware",
        "--name",
        "n2",
        "--driver-info",
        "fake_fail=deploy",
    ]);
    cli.ok(&["node", "manage", "n2", "--wait", "120"]);
    cli.ok(&["node", "provide", "n2", "--wait", "120"]);
    let stderr = cli.fails(&["node", "deploy", "n2", "--wait", "120"]);
    assert!(stderr.contains("deploy failed"), "{stderr}");
    assert!(
        stderr.contains("Fake failure of 'deploy' injected by driver_info fake_fail"),
        "{stderr}"
    );
    let node = cli.json(&["node", "show", "n2"]);
    assert_eq!(node["provision_state"], "deploy failed");

    // A deploy that waits for a callback that never comes: the wait gives up, saying where
    // the node is; an abort then lands it in `deploy failed`, which is what abort is for.
    cli.ok(&[
        "node",
        "create",
        "--driver",
        "fake-hardware",
        "--name",
        "n3",
        "--driver-info",
        "fake_wait=deploy",
    ]);
    cli.ok(&["node", "manage", "n3", "--wait", "120"]);
    cli.ok(&["node", "provide", "n3", "--wait", "120"]);
    let stderr = cli.fails(&["node", "deploy", "n3", "--wait", "1"]);
    assert!(
        stderr.contains("gave up waiting for node n3 after 1 s"),
        "{stderr}"
    );
    assert!(
        stderr.contains("'wait call-back' (target active)"),
        "{stderr}"
    );
    let node = cli.json(&["node", "abort", "n3", "--wait", "120"]);
    assert_eq!(node["provision_state"], "deploy failed");

    // A verb the state machine refuses: the API's message, exit 1.
    let stderr = cli.fails(&["node", "provide", "n2"]);
    assert!(stderr.contains("HTTP 400"), "{stderr}");
    assert!(stderr.contains("deploy failed"), "{stderr}");

    // Bad flags are clap's usage errors (exit 2), not requests.
    let output = ferric(&cli.url, &["node", "set", "n2", "--extra", "novalue"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("KEY=VALUE"));
}

#[test]
fn an_unreachable_server_is_named_with_what_to_do() {
    // Port 9 (discard) on loopback: nothing listens there in a test environment.
    let output = ferric("http://127.0.0.1:9", &["node", "list"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("http://127.0.0.1:9"), "{stderr}");
    assert!(stderr.contains("ferric server"), "{stderr}");
    assert!(stderr.contains("--url"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn http_basic_credentials_come_from_flags_or_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let hash = bcrypt::hash("s3cret", 4).unwrap();
    std::fs::write(dir.path().join("htpasswd"), format!("admin:{hash}\n")).unwrap();
    let server = Server::start(
        dir.path(),
        &[
            "--database-url",
            "auth.db",
            "--auth-strategy",
            "http_basic",
            "--http-basic-auth-user-file",
            "htpasswd",
        ],
    );
    let cli = Cli::of(&server);
    let stderr = cli.fails(&["node", "list"]);
    assert!(stderr.contains("HTTP 401"), "{stderr}");
    cli.ok(&[
        "node",
        "list",
        "--username",
        "admin",
        "--password",
        "s3cret",
    ]);
    let output = Command::new(env!("CARGO_BIN_EXE_ferric"))
        .args(["driver", "list", "-f", "json"])
        .env("FERRIC_URL", &cli.url)
        .env("FERRIC_USERNAME", "admin")
        .env("FERRIC_PASSWORD", "s3cret")
        .output()
        .unwrap();
    assert!(output.status.success());
    let drivers: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        drivers
            .as_array()
            .unwrap()
            .iter()
            .any(|driver| driver["name"] == "fake-hardware")
    );
}
