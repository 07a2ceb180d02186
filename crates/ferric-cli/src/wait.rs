//! `--wait`: follow a node after a verb until it rests and its lease is released.
//!
//! The loop polls `GET /v1/nodes/{node}` (every 250 ms at first, backing off to 1 s), shows
//! where the node is — provision state, the running clean/deploy/service step, and during a
//! deploy the bytes the agent has written (`driver_internal_info.deploy_progress`, kept by the
//! `direct` deploy interface) — as a progress bar on a terminal or as one plain line per
//! change otherwise, and judges the resting state: a failure state, `error`, or a state the
//! verb does not lead to ends the command with the node's `last_error`.

use std::io::IsTerminal;
use std::str::FromStr;
use std::time::{Duration, Instant};

use ferric_model::ProvisionState;
use ferric_model::state::StateKind;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

use crate::CliError;
use crate::client::Client;
use crate::context::node_path;

const FIRST_INTERVAL: Duration = Duration::from_millis(250);
const LONGEST_INTERVAL: Duration = Duration::from_secs(1);
/// Failed looks in a row (connection refused, 5xx) tolerated before the wait gives up.
const MAX_FAILED_LOOKS: u32 = 30;

/// Whether a failed look at the node may succeed if tried again.
fn is_transient(error: &CliError) -> bool {
    match error {
        CliError::Connect { .. } | CliError::Http { .. } => true,
        CliError::Api { status, .. } => *status >= 500,
        _ => false,
    }
}

/// What one look at the node shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub state: String,
    pub target: Option<String>,
    /// `interface.step` of the running clean, deploy or service step.
    pub step: Option<String>,
    pub bytes_written: Option<u64>,
    pub total_bytes: Option<u64>,
    pub reserved: bool,
}

impl Observation {
    pub fn of(node: &Value) -> Self {
        let text = |key: &str| node.get(key).and_then(Value::as_str).map(str::to_owned);
        let running = ["deploy_step", "clean_step", "service_step"]
            .iter()
            .filter_map(|key| node.get(*key))
            .find_map(|step| {
                let name = step.get("step")?.as_str()?;
                Some((name, step.get("interface").and_then(Value::as_str)))
            });
        let step = running.map(|(name, interface)| match interface {
            Some(interface) => format!("{interface}.{name}"),
            None => name.to_owned(),
        });
        // The agent's count belongs to the step that is running; a count left over from an
        // earlier deploy is not progress.
        let progress = node
            .get("driver_internal_info")
            .and_then(|info| info.get("deploy_progress"))
            .filter(|progress| {
                running.is_some_and(|(name, _)| {
                    progress
                        .get("step")
                        .is_none_or(|step| step.as_str() == Some(name))
                })
            });
        let number = |key: &str| progress.and_then(|p| p.get(key)).and_then(Value::as_u64);
        Self {
            state: text("provision_state").unwrap_or_else(|| "unknown".to_owned()),
            target: text("target_provision_state"),
            step,
            bytes_written: number("bytes_written"),
            total_bytes: number("total_bytes").or_else(|| number("total")),
            reserved: !node.get("reservation").is_none_or(Value::is_null),
        }
    }

    /// One line for people: `deploying → active, step deploy.write_image, 1.2 GiB of 4 GiB`.
    pub fn describe(&self) -> String {
        let mut line = self.state.clone();
        if let Some(target) = &self.target {
            line.push_str(&format!(" → {target}"));
        }
        if let Some(step) = &self.step {
            line.push_str(&format!(", step {step}"));
        }
        match (self.bytes_written, self.total_bytes) {
            (Some(written), Some(total)) => {
                line.push_str(&format!(", {} of {} written", bytes(written), bytes(total)));
            }
            (Some(written), None) => line.push_str(&format!(", {} written", bytes(written))),
            _ => {}
        }
        line
    }

    /// Whether the node rests: no lease, and a state where nothing moves it on. A stable
    /// state must also have no target; a failure or hold state keeps the target of the
    /// request that led there (Ironic shows `deploy failed` with target `active`).
    fn at_rest(&self) -> bool {
        if self.reserved {
            return false;
        }
        match ProvisionState::from_str(&self.state).map(ProvisionState::kind) {
            Ok(StateKind::Transient) => false,
            Ok(StateKind::Failure | StateKind::Hold) => true,
            // A state this CLI does not know (a newer server): trust the cleared target.
            Ok(StateKind::Stable) | Err(_) => self.target.is_none(),
        }
    }
}

/// Where each verb leads when it succeeds; `None` when any resting state is success.
pub fn expected_state(target: &str) -> Option<&'static [&'static str]> {
    Some(match target {
        "manage" | "inspect" | "clean" => &["manageable"],
        "provide" | "deleted" | "undeploy" => &["available"],
        "active" | "deploy" | "rebuild" | "adopt" | "unrescue" | "service" => &["active"],
        "rescue" => &["rescue"],
        _ => return None,
    })
}

/// The judgement on a resting node after `target`.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Succeeded,
    /// Resting in a hold: an operator must send `unhold`.
    Held,
    Failed,
}

pub fn verdict(observation: &Observation, target: &str) -> Verdict {
    // An abort leaves the node in the failure state of what it stopped: that is its success.
    if target == "abort" {
        return Verdict::Succeeded;
    }
    let state = ProvisionState::from_str(&observation.state).ok();
    match state.map(ProvisionState::kind) {
        Some(StateKind::Failure) => return Verdict::Failed,
        Some(StateKind::Hold) => return Verdict::Held,
        _ => {}
    }
    if state == Some(ProvisionState::Error) {
        return Verdict::Failed;
    }
    match expected_state(target) {
        Some(expected) if !expected.contains(&observation.state.as_str()) => Verdict::Failed,
        _ => Verdict::Succeeded,
    }
}

/// Follows `node` after the provision verb `target`; gives up after `seconds` (0: never).
/// Returns the resting node, or the failure with its `last_error`.
pub fn follow_provision(
    client: &Client,
    node: &str,
    target: &str,
    seconds: u64,
) -> Result<Value, CliError> {
    let record = follow(client, node, seconds, |record| {
        Observation::of(record).at_rest()
    })?;
    let observation = Observation::of(&record);
    match verdict(&observation, target) {
        Verdict::Succeeded => Ok(record),
        Verdict::Held => {
            eprintln!(
                "node {node} is held in '{}': `ferric node unhold {node}` resumes it",
                observation.state
            );
            Ok(record)
        }
        Verdict::Failed => Err(CliError::NodeFailed {
            node: node.to_owned(),
            state: observation.state,
            last_error: last_error(&record),
        }),
    }
}

/// Follows `node` after a power request until `target_power_state` clears; fails unless the
/// node's power state is then `expected`.
pub fn follow_power(
    client: &Client,
    node: &str,
    expected: &str,
    seconds: u64,
) -> Result<Value, CliError> {
    let record = follow(client, node, seconds, |record| {
        record.get("target_power_state").is_none_or(Value::is_null)
            && record.get("reservation").is_none_or(Value::is_null)
    })?;
    let power = record
        .get("power_state")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    if power != expected {
        return Err(CliError::NodeFailed {
            node: node.to_owned(),
            state: format!("{} (power {power}, not {expected})", state_of(&record)),
            last_error: last_error(&record),
        });
    }
    Ok(record)
}

fn state_of(record: &Value) -> String {
    Observation::of(record).state
}

fn last_error(record: &Value) -> String {
    match record.get("last_error").and_then(Value::as_str) {
        Some(error) if !error.is_empty() => error.to_owned(),
        _ => "no last_error recorded".to_owned(),
    }
}

/// Polls the node until `done` says so, showing each change; the deadline is `seconds` (0:
/// none).
fn follow(
    client: &Client,
    node: &str,
    seconds: u64,
    done: impl Fn(&Value) -> bool,
) -> Result<Value, CliError> {
    let deadline = (seconds > 0).then(|| Instant::now() + Duration::from_secs(seconds));
    let mut display = Display::new(node);
    let mut interval = FIRST_INTERVAL;
    let path = node_path(node);
    let mut failures = 0;
    loop {
        let record = match client.get(&path, &[]) {
            Ok(record) => {
                failures = 0;
                record
            }
            // A restarting server or a proxy's hiccup must not end a long deploy's wait.
            Err(error) if is_transient(&error) && failures < MAX_FAILED_LOOKS => {
                failures += 1;
                display.note(&format!("{error}; looking again"));
                std::thread::sleep(LONGEST_INTERVAL);
                continue;
            }
            Err(error) => {
                display.finish();
                return Err(error);
            }
        };
        let observation = Observation::of(&record);
        display.show(&observation);
        if done(&record) {
            display.finish();
            if display.is_bar() {
                // The bar is gone: leave one line saying where the node ended.
                eprintln!("node {node}: {}", observation.describe());
            }
            return Ok(record);
        }
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            display.finish();
            return Err(CliError::WaitTimeout {
                node: node.to_owned(),
                seconds,
                state: observation.state,
                target: observation.target.unwrap_or_else(|| "none".to_owned()),
            });
        }
        std::thread::sleep(interval);
        interval = (interval * 2).min(LONGEST_INTERVAL);
    }
}

/// A progress bar on a terminal; plain lines on stderr otherwise (logs, CI, tests).
enum Display {
    Bar(ProgressBar, bool),
    Lines { node: String, last: LineLog },
}

/// What the plain-line display last printed, so it prints again only on a change: a new
/// state, target or step, or another tenth of the image written (64 MiB when the total is
/// unknown).
#[derive(Debug, Default)]
struct LineLog(Option<(String, Option<String>, Option<String>, u64)>);

impl LineLog {
    fn next_line(&mut self, observation: &Observation) -> Option<String> {
        let written = match (observation.bytes_written, observation.total_bytes) {
            (Some(written), Some(total)) if total > 0 => written * 10 / total,
            (Some(written), _) => written >> 26,
            _ => 0,
        };
        let key = (
            observation.state.clone(),
            observation.target.clone(),
            observation.step.clone(),
            written,
        );
        if self.0.as_ref() == Some(&key) {
            return None;
        }
        self.0 = Some(key);
        Some(observation.describe())
    }
}

impl Display {
    fn new(node: &str) -> Self {
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new_spinner();
            bar.set_style(spinner_style());
            bar.set_prefix(node.to_owned());
            bar.enable_steady_tick(Duration::from_millis(120));
            Display::Bar(bar, false)
        } else {
            Display::Lines {
                node: node.to_owned(),
                last: LineLog::default(),
            }
        }
    }

    fn show(&mut self, observation: &Observation) {
        match self {
            Display::Bar(bar, with_bytes) => {
                let mut message = observation.state.clone();
                if let Some(target) = &observation.target {
                    message.push_str(&format!(" → {target}"));
                }
                if let Some(step) = &observation.step {
                    message.push_str(&format!(" [{step}]"));
                }
                match (observation.bytes_written, observation.total_bytes) {
                    (Some(written), Some(total)) => {
                        if !*with_bytes {
                            bar.set_style(bytes_style());
                            *with_bytes = true;
                        }
                        bar.set_length(total);
                        bar.set_position(written);
                    }
                    (Some(written), None) => {
                        message.push_str(&format!(", {} written", bytes(written)));
                    }
                    _ => {
                        if *with_bytes {
                            bar.set_style(spinner_style());
                            *with_bytes = false;
                        }
                    }
                }
                bar.set_message(message);
            }
            Display::Lines { node, last } => {
                if let Some(line) = last.next_line(observation) {
                    eprintln!("node {node}: {line}");
                }
            }
        }
    }

    /// A message beside the progress (above the bar, or as a line).
    fn note(&self, message: &str) {
        match self {
            Display::Bar(bar, _) => bar.println(message),
            Display::Lines { node, .. } => eprintln!("node {node}: {message}"),
        }
    }

    fn is_bar(&self) -> bool {
        matches!(self, Display::Bar(..))
    }

    fn finish(&mut self) {
        if let Display::Bar(bar, _) = self {
            bar.finish_and_clear();
        }
    }
}

fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {prefix}: {msg} ({elapsed})")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
}

fn bytes_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{spinner} {prefix}: {msg} [{bar:30}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ")
}

/// Bytes for people, in binary units.
fn bytes(count: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = count as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{count} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_observation_reads_state_step_and_deploy_progress() {
        let node = json!({
            "provision_state": "deploying",
            "target_provision_state": "active",
            "reservation": "conductor-1",
            "deploy_step": {"interface": "deploy", "step": "write_image", "priority": 80},
            "clean_step": {},
            "driver_internal_info": {"deploy_progress": {
                "step": "write_image", "bytes_written": 3 << 29, "total_bytes": 4u64 << 30,
            }},
        });
        let observation = Observation::of(&node);
        assert_eq!(observation.step.as_deref(), Some("deploy.write_image"));
        assert_eq!(observation.bytes_written, Some(3 << 29));
        assert!(!observation.at_rest());
        assert_eq!(
            observation.describe(),
            "deploying → active, step deploy.write_image, 1.5 GiB of 4.0 GiB written"
        );
    }

    #[test]
    fn a_count_from_another_step_is_not_progress() {
        let mut node = json!({
            "provision_state": "active",
            "deploy_step": {},
            "driver_internal_info": {"deploy_progress": {"step": "write_image",
                                                         "bytes_written": 42}},
        });
        assert_eq!(Observation::of(&node).bytes_written, None, "no step runs");
        node["deploy_step"] = json!({"interface": "deploy", "step": "prepare_image"});
        assert_eq!(Observation::of(&node).bytes_written, None, "another step");
        node["deploy_step"] = json!({"interface": "deploy", "step": "write_image"});
        assert_eq!(Observation::of(&node).bytes_written, Some(42));
    }

    #[test]
    fn a_node_rests_only_without_target_or_lease_outside_transient_states() {
        let mut node = json!({"provision_state": "active", "target_provision_state": null,
                              "reservation": "c1"});
        assert!(!Observation::of(&node).at_rest(), "still leased");
        node["reservation"] = Value::Null;
        assert!(Observation::of(&node).at_rest());
        node["provision_state"] = json!("wait call-back");
        assert!(!Observation::of(&node).at_rest(), "transient");
        node["provision_state"] = json!("deploy failed");
        assert!(Observation::of(&node).at_rest());
        node["target_provision_state"] = json!("active");
        assert!(
            Observation::of(&node).at_rest(),
            "failure states keep their target"
        );
        node["provision_state"] = json!("available");
        assert!(!Observation::of(&node).at_rest(), "a target still to reach");
    }

    #[test]
    fn plain_lines_come_once_per_state_step_or_tenth_written() {
        let mut log = LineLog::default();
        let mut node = json!({"provision_state": "deploying", "target_provision_state": "active"});
        assert_eq!(
            log.next_line(&Observation::of(&node)).as_deref(),
            Some("deploying → active")
        );
        assert_eq!(log.next_line(&Observation::of(&node)), None, "no change");
        node["deploy_step"] = json!({"interface": "deploy", "step": "write_image"});
        node["driver_internal_info"] =
            json!({"deploy_progress": {"bytes_written": 10, "total_bytes": 1000}});
        assert!(log.next_line(&Observation::of(&node)).is_some(), "a step");
        node["driver_internal_info"]["deploy_progress"]["bytes_written"] = json!(50);
        assert_eq!(log.next_line(&Observation::of(&node)), None, "same tenth");
        node["driver_internal_info"]["deploy_progress"]["bytes_written"] = json!(500);
        assert_eq!(
            log.next_line(&Observation::of(&node)).as_deref(),
            Some("deploying → active, step deploy.write_image, 500 B of 1000 B written")
        );
    }

    #[test]
    fn verdicts_follow_the_verb_and_the_state_groups() {
        let at = |state: &str| Observation::of(&json!({"provision_state": state}));
        assert_eq!(verdict(&at("active"), "active"), Verdict::Succeeded);
        assert_eq!(verdict(&at("deploy failed"), "active"), Verdict::Failed);
        assert_eq!(verdict(&at("error"), "deleted"), Verdict::Failed);
        assert_eq!(
            verdict(&at("enroll"), "manage"),
            Verdict::Failed,
            "verification failed"
        );
        assert_eq!(verdict(&at("deploy hold"), "active"), Verdict::Held);
        assert_eq!(verdict(&at("manageable"), "abort"), Verdict::Succeeded);
        assert_eq!(verdict(&at("clean failed"), "abort"), Verdict::Succeeded);
        assert_eq!(verdict(&at("available"), "deleted"), Verdict::Succeeded);
        assert_eq!(bytes(512), "512 B");
        assert!(is_transient(&CliError::Api {
            status: 503,
            message: String::new()
        }));
        assert!(!is_transient(&CliError::Api {
            status: 404,
            message: String::new()
        }));
        assert_eq!(bytes(64 << 20), "64.0 MiB");
    }
}
