//! `ferric server` as a user runs it: the real binary, a real SQLite file, real HTTP, and a
//! real SIGTERM.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// A running `ferric server` and the address it bound.
struct Server {
    child: Child,
    address: String,
    log: mpsc::Receiver<String>,
}

impl Server {
    /// Starts the binary in `dir` with `args`, JSON logs, and waits for its "listening" line.
    fn start(dir: &Path, args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ferric"))
            .arg("server")
            .args(["--api-listen", "127.0.0.1:0", "--log-format", "json"])
            .args(args)
            .current_dir(dir)
            .env_remove("FERRIC_DATABASE_URL")
            .env_remove("FERRIC_API_LISTEN")
            .env_remove("FERRIC_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start ferric");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (sender, log) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        // From here on, Drop kills the child if the test panics.
        let mut server = Server {
            child,
            address: String::new(),
            log,
        };
        // Generous: a cold debug build on a loaded 2-core machine. Only a hang trips it.
        let deadline = Duration::from_secs(120);
        loop {
            let line = server
                .log
                .recv_timeout(deadline)
                .expect("no 'listening' log line");
            let record: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|error| panic!("log line is not JSON ({error}): {line}"));
            if record["message"] == "Bare Metal API listening" {
                server.address = record["address"].as_str().expect("address").to_owned();
                return server;
            }
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Sends SIGTERM and returns whether the process exited successfully.
    fn terminate(&mut self) -> bool {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(status.success());
        let exit = self.child.wait().expect("wait for ferric");
        // The reader thread ends at EOF, which the exit has caused: read to the end, or a
        // line still in flight would be missed.
        let stopped = self
            .log
            .iter()
            .any(|line| line.contains("SIGTERM received"));
        assert!(stopped, "no shutdown log line");
        exit.success()
    }
}

impl Drop for Server {
    /// A failed test must not leave a server running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

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
