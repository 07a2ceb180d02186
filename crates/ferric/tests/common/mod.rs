//! What the binary's test files share: a real `ferric server` process on port 0.
#![allow(dead_code, reason = "each test file uses its own subset")]

pub(crate) mod deploy;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A running `ferric server` and the address it bound.
pub(crate) struct Server {
    child: Child,
    pub(crate) address: String,
    /// The inspection service's address, when the server runs it.
    pub(crate) inspector_address: Option<String>,
    /// The log lines up to the ready one.
    pub(crate) startup_log: Vec<String>,
    log: mpsc::Receiver<String>,
}

impl Server {
    /// Starts the binary in `dir` with `args`, JSON logs, and waits for its "listening" line.
    pub(crate) fn start(dir: &Path, args: &[&str]) -> Server {
        Self::start_with_env(dir, args, &[])
    }

    /// [`Server::start`] with extra environment variables.
    pub(crate) fn start_with_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Server {
        Self::start_until(dir, args, env, "Bare Metal API listening")
    }

    /// [`Server::start_with_env`], ready once the log line `ready` appears (a `--role
    /// conductor` process has no API: it is ready at "conductor running").
    pub(crate) fn start_until(
        dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        ready: &str,
    ) -> Server {
        Self::start_program_until(
            Path::new(env!("CARGO_BIN_EXE_ferric")),
            dir,
            args,
            env,
            ready,
        )
    }

    /// [`Server::start_until`] with another `ferric` binary (an older release's).
    pub(crate) fn start_program_until(
        program: &Path,
        dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        ready: &str,
    ) -> Server {
        let mut child = Command::new(program)
            .arg("server")
            .args(["--api-listen", "127.0.0.1:0", "--log-format", "json"])
            .args(args)
            .current_dir(dir)
            .env_remove("FERRIC_DATABASE_URL")
            .env_remove("FERRIC_API_LISTEN")
            .env_remove("FERRIC_CONFIG")
            .envs(env.iter().copied())
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
            inspector_address: None,
            startup_log: Vec::new(),
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
            if record["message"] == "inspection service listening" {
                server.inspector_address = record["address"].as_str().map(str::to_owned);
            }
            if record["message"] == "Bare Metal API listening" {
                server.address = record["address"].as_str().expect("address").to_owned();
            }
            server.startup_log.push(line);
            if record["message"] == ready {
                return server;
            }
        }
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Sends SIGTERM and returns whether the process exited successfully.
    pub(crate) fn terminate(&mut self) -> bool {
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

impl Server {
    /// Waits for a log line (after start-up) holding `needle` and returns it; the deadline
    /// only catches hangs.
    pub(crate) fn wait_for_log(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self
                .log
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no log line holding {needle:?}"));
            if line.contains(needle) {
                return line;
            }
        }
    }

    /// Sends `signal` (`STOP`, `CONT`, …) to the process.
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} failed");
    }

    /// Kills the process with SIGKILL, as a crash or the OOM killer would.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    /// A failed test must not leave a server running.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits for `check` to return `Some`; the deadline only catches hangs.
pub(crate) fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(100));
    }
}
