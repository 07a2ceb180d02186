//! The lab suites' API client: blocking HTTP at the newest microversion, with the scenario
//! verbs (`put_provision`, `run_until_state`, waiting for the agent's heartbeat) and errors
//! that carry the node's `last_error` and history.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use reqwest::Method;
use serde_json::{Value, json};

/// The microversion every lab request sends: the newest, so every verb is reachable.
const VERSION: &str = "1.110";

/// The API at `base` (`http://10.231.0.1:6385`), as a lab suite sees it.
pub struct Client {
    http: reqwest::blocking::Client,
    base: String,
    /// The suite's name, which prefixes what the client prints.
    suite: &'static str,
    /// How long one wait may take ([`Client::wait_for`] and the other waits).
    pub phase_timeout: Duration,
}

impl Client {
    /// A client of the API at `base` whose requests time out after `request_timeout`.
    pub fn new(
        suite: &'static str,
        base: &str,
        request_timeout: Duration,
        phase_timeout: Duration,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            http: reqwest::blocking::Client::builder()
                .timeout(request_timeout)
                .build()?,
            base: base.to_owned(),
            suite,
            phase_timeout,
        })
    }

    /// A client of the API at `base` over `http` (one that trusts the test's certificate,
    /// say).
    pub fn with_http(
        suite: &'static str,
        base: &str,
        http: reqwest::blocking::Client,
        phase_timeout: Duration,
    ) -> Self {
        Self {
            http,
            base: base.to_owned(),
            suite,
            phase_timeout,
        }
    }

    /// The API's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends a request; the answer's status and body (JSON, or the text as a string).
    pub fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut request = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .header("X-OpenStack-Ironic-API-Version", VERSION);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().with_context(|| format!("{method} {path}"))?;
        let status = response.status().as_u16();
        let text = response.text()?;
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }

    /// Sends a request and expects `status`; the answer's body.
    pub fn expect(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        status: u16,
    ) -> anyhow::Result<Value> {
        let (got, body) = self.send(method.clone(), path, body)?;
        ensure!(
            got == status,
            "{method} {path}: expected {status}, got {got}: {body}"
        );
        Ok(body)
    }

    /// GET, expecting 200.
    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.expect(Method::GET, path, None, 200)
    }

    /// POST, expecting 201 (a resource created).
    pub fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.expect(Method::POST, path, Some(body), 201)
    }

    /// PUT, expecting `status`.
    pub fn put(&self, path: &str, body: Option<Value>, status: u16) -> anyhow::Result<Value> {
        self.expect(Method::PUT, path, body, status)
    }

    /// DELETE, expecting `status`.
    pub fn delete(&self, path: &str, status: u16) -> anyhow::Result<Value> {
        self.expect(Method::DELETE, path, None, status)
    }

    /// Waits until the API answers `GET /v1` (the server is up), for at most `timeout`.
    pub fn wait_until_up(&self, timeout: Duration) -> anyhow::Result<()> {
        let up = Instant::now();
        while self.send(Method::GET, "/v1", None).is_err() {
            ensure!(
                up.elapsed() < timeout,
                "ferric server did not start; see server.log"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// The node as `GET /v1/nodes/{node}` shows it.
    pub fn node(&self, node: &str) -> anyhow::Result<Value> {
        self.get(&format!("/v1/nodes/{node}"))
    }

    /// PATCH /v1/nodes/{node} with a JSON patch, expecting 200.
    pub fn patch(&self, node: &str, patch: Value) -> anyhow::Result<()> {
        self.expect(
            Method::PATCH,
            &format!("/v1/nodes/{node}"),
            Some(patch),
            200,
        )
        .map(drop)
    }

    /// Requests the provision `target` with no other argument, expecting 202.
    pub fn put_provision(&self, node: &str, target: &str) -> anyhow::Result<()> {
        self.provision(node, json!({"target": target}))
    }

    /// PUT …/states/provision with `body`, expecting 202. A 409 "locked" (the conductor still
    /// holds the node for a moment after it reached the state the test waited for) is retried
    /// for a while, as openstacksdk and the `baremetal` CLI retry NodeLocked.
    pub fn provision(&self, node: &str, body: Value) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let result = self.put(
                &format!("/v1/nodes/{node}/states/provision"),
                Some(body.clone()),
                202,
            );
            match result {
                Err(error)
                    if error.to_string().contains("is locked by host")
                        && started.elapsed() < Duration::from_secs(60) =>
                {
                    eprintln!(
                        "{}: node {node} locked {:.1} s after the wait; retrying",
                        self.suite,
                        started.elapsed().as_secs_f64()
                    );
                    std::thread::sleep(Duration::from_millis(500));
                }
                result => return result.map(drop),
            }
        }
    }

    /// [`Client::run_until_state`] with the client's phase timeout.
    pub fn wait_for(&self, node: &str, state: &str) -> anyhow::Result<Value> {
        self.run_until_state(node, state, self.phase_timeout)
    }

    /// Waits until the node rests in `state` (no task holds it: an abort's clean-up runs
    /// after the state) and returns it. Resting or failing elsewhere, or still on its way
    /// after `timeout`, is an error with the node's `last_error` and history.
    pub fn run_until_state(
        &self,
        node: &str,
        state: &str,
        timeout: Duration,
    ) -> anyhow::Result<Value> {
        let started = Instant::now();
        loop {
            if let Some(shown) = self.arrived(node, state)? {
                return Ok(shown);
            }
            if started.elapsed() >= timeout {
                let shown = self.node(node)?;
                bail!(
                    "node {node} still in {} after {timeout:?}: last_error {}; history {}",
                    shown["provision_state"],
                    shown["last_error"],
                    self.history_line(node)
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// One look at the node: itself when it rests in `state`, `None` while it is on its way
    /// (or in `state` but still held by a task). Resting or failing elsewhere is an error with
    /// its `last_error` and history.
    pub fn arrived(&self, node: &str, state: &str) -> anyhow::Result<Option<Value>> {
        let shown = self.node(node)?;
        let now = shown["provision_state"].as_str().unwrap_or("?");
        if now == state {
            return Ok(shown["reservation"].is_null().then_some(shown));
        }
        let resting = shown["target_provision_state"].is_null();
        let failed = now.ends_with("failed") || now == "error";
        if failed || (resting && !now.ends_with("wait")) {
            bail!(
                "node {node} rests in {now}, not {state}: last_error {}; history {}",
                shown["last_error"],
                self.history_line(node)
            );
        }
        Ok(None)
    }

    /// Waits until the node has left `state` (a request to move on was accepted).
    pub fn wait_while(&self, node: &str, state: &str) -> anyhow::Result<()> {
        let started = Instant::now();
        while self.node(node)?["provision_state"] == state {
            ensure!(
                started.elapsed() < self.phase_timeout,
                "node {node} still in {state} after {:?}",
                self.phase_timeout
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Waits until the node's agent heartbeats: a heartbeat time other than `before` (the
    /// one read before the power-on; `None` for the first heartbeat ever).
    pub fn wait_for_heartbeat(&self, node: &str, before: Option<&str>) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let shown = self.node(node)?;
            let last = shown["driver_internal_info"]["agent_last_heartbeat"].as_str();
            if last.is_some() && last != before {
                return Ok(());
            }
            ensure!(
                !shown["provision_state"]
                    .as_str()
                    .unwrap_or("")
                    .ends_with("failed"),
                "node {node} failed while waiting for its agent: {}",
                shown["last_error"]
            );
            ensure!(
                started.elapsed() < self.phase_timeout,
                "no heartbeat from node {node}'s agent after {:?}",
                self.phase_timeout
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The events of the node's history after the `seen` entries already read, and the new
    /// count of entries.
    pub fn history_since(&self, node: &str, seen: usize) -> anyhow::Result<(Vec<String>, usize)> {
        let history = self.get(&format!("/v1/nodes/{node}/history?detail=true"))?;
        let events: Vec<String> = history["history"]
            .as_array()
            .context("no history")?
            .iter()
            .map(|entry| entry["event"].as_str().unwrap_or("").to_owned())
            .collect();
        let count = events.len();
        Ok((events.into_iter().skip(seen).collect(), count))
    }

    /// The node's history on one line, for an error message ("unavailable" if it cannot be read).
    fn history_line(&self, node: &str) -> String {
        match self.history_since(node, 0) {
            Ok((events, _)) => format!("{events:?}"),
            Err(error) => format!("unavailable ({error:#})"),
        }
    }
}
