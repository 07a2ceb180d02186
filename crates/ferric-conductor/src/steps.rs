//! Step lists: cleaning, deploying and servicing run as ordered steps (`reference/ironic.md`
//! §1.5–1.6), some of which finish at once and some of which leave the node waiting.
//!
//! Theory of operation: when a flow starts, the conductor writes its plan — the steps in the
//! order they will run — into `driver_internal_info` (`<kind>_steps`) with the index of the
//! current step (`<kind>_step_index`), and shows the current step in the node's
//! `clean_step` / `deploy_step` / `service_step`. A step that waits (the agent works on it)
//! ends the worker; when the node calls back the flow resumes at the next index. So a plan
//! survives a restart of the conductor and any conductor can continue it.
//!
//! Reserved steps work on every driver: `power.power_on`, `power.power_off`,
//! `power.reboot`, `<any>.hold` (the node waits in `* hold` for `unhold`) and `<any>.wait`
//! (pauses for `args.seconds`, at most an hour).

use std::time::Duration;

use ferric_drivers::{DriverError, Interfaces, Outcome, PowerAction, StepCall, StepKind};
use ferric_model::resources::{InterfaceKind, JsonObject, Node};
use serde_json::Value;

use crate::ConductorError;
use crate::abort::{Aborted, interruptible};
use crate::task::Task;

/// How far a step list got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Every step ran.
    Done,
    /// A step waits for the node to call back.
    Wait,
    /// A `hold` step: the node waits for an operator's `unhold`.
    Hold,
    /// The flow is marked for abort (`abort.rs`): what ran was stopped, nothing more runs,
    /// and the node is as the last step left it, not yet moved on.
    Aborted,
}

fn plan_key(kind: StepKind) -> String {
    format!("{}_steps", kind.as_str())
}

fn index_key(kind: StepKind) -> String {
    format!("{}_step_index", kind.as_str())
}

/// Set while the node waits for what [`DeployInterface::prepare`] started (the agent
/// booting): the callback resumes at the current step instead of after it.
///
/// [`DeployInterface::prepare`]: ferric_drivers::interfaces::DeployInterface::prepare
fn preparing_key(kind: StepKind) -> String {
    format!("{}_preparing", kind.as_str())
}

/// Set once the flow's environment is ready.
fn prepared_key(kind: StepKind) -> String {
    format!("{}_prepared", kind.as_str())
}

/// Set when a manual clean or service runs without the agent ramdisk (`disable_ramdisk`).
fn no_ramdisk_key(kind: StepKind) -> String {
    format!("{}_disable_ramdisk", kind.as_str())
}

/// Refuses, before anything starts, steps that need the agent ramdisk in a flow that
/// `disable_ramdisk` keeps from booting it.
pub(crate) fn check_without_ramdisk(
    interfaces: &Interfaces,
    kind: StepKind,
    requested: &[StepCall],
) -> Result<(), ConductorError> {
    match requested
        .iter()
        .find(|step| interfaces.step_needs_agent(step))
    {
        Some(step) => Err(ConductorError::Invalid(format!(
            "The {} step \"{}.{}\" runs in the agent ramdisk, which disable_ramdisk keeps from \
             booting; remove the step or do not set disable_ramdisk.",
            kind.as_str(),
            step.interface,
            step.step
        ))),
        None => Ok(()),
    }
}

/// The flow of `kind` runs its steps without booting the agent ramdisk, and does not undo a
/// boot it never did.
pub(crate) fn disable_ramdisk(node: &mut Node, kind: StepKind) {
    node.driver_internal_info
        .insert(no_ramdisk_key(kind), true.into());
    node.driver_internal_info
        .insert(prepared_key(kind), true.into());
}

/// Whether the flow of `kind` runs without the agent ramdisk.
pub(crate) fn ramdisk_disabled(node: &Node, kind: StepKind) -> bool {
    node.driver_internal_info
        .get(&no_ramdisk_key(kind))
        .and_then(Value::as_bool)
        == Some(true)
}

fn current_step_field(node: &mut Node, kind: StepKind) -> &mut JsonObject {
    match kind {
        StepKind::Clean => &mut node.clean_step,
        StepKind::Deploy => &mut node.deploy_step,
        StepKind::Service => &mut node.service_step,
    }
}

fn is_reserved(step: &StepCall) -> bool {
    match step.step.as_str() {
        "power_on" | "power_off" | "reboot" => step.interface == InterfaceKind::Power,
        "hold" | "wait" => true,
        _ => false,
    }
}

/// Refuses requested steps the node's driver does not offer (400 before anything starts).
pub(crate) fn check_requested(
    interfaces: &Interfaces,
    kind: StepKind,
    requested: &[StepCall],
) -> Result<(), ConductorError> {
    let offered = interfaces.steps(kind);
    for step in requested {
        let known = is_reserved(step)
            || offered
                .iter()
                .any(|def| def.interface == step.interface && def.step == step.step);
        if !known {
            let names: Vec<String> = offered
                .iter()
                .map(|def| format!("{}.{}", def.interface, def.step))
                .chain(["power.power_on", "power.power_off", "power.reboot"].map(String::from))
                .collect();
            return Err(ConductorError::Invalid(format!(
                "The requested {} step \"{}.{}\" is not supported by the node's driver; \
                 supported steps: {}, and hold/wait on any interface.",
                kind.as_str(),
                step.interface,
                step.step,
                names.join(", ")
            )));
        }
    }
    Ok(())
}

/// The steps an automated flow runs: the driver's steps with a priority above 0, with
/// `requested` steps added or overriding a driver step's priority (priority 0 removes it),
/// highest priority first.
pub(crate) fn automated_plan(
    interfaces: &Interfaces,
    kind: StepKind,
    requested: &[StepCall],
) -> Vec<StepCall> {
    let mut plan: Vec<StepCall> = interfaces
        .steps(kind)
        .into_iter()
        .filter(|def| def.priority > 0)
        .map(|def| StepCall {
            interface: def.interface,
            step: def.step.to_owned(),
            args: JsonObject::new(),
            priority: def.priority,
        })
        .collect();
    for step in requested {
        plan.retain(|planned| !(planned.interface == step.interface && planned.step == step.step));
        if step.priority > 0 {
            plan.push(step.clone());
        }
    }
    plan.sort_by_key(|step| std::cmp::Reverse(step.priority));
    plan
}

/// Writes `plan` as the node's step list for `kind`, starting at its first step.
pub(crate) fn store_plan(node: &mut Node, kind: StepKind, plan: &[StepCall]) {
    let steps = plan
        .iter()
        .map(|step| Value::Object(step.to_json()))
        .collect();
    node.driver_internal_info
        .insert(plan_key(kind), Value::Array(steps));
    node.driver_internal_info.insert(index_key(kind), 0.into());
}

/// Forgets the step list of `kind` and the current step.
pub(crate) fn clear_plan(node: &mut Node, kind: StepKind) {
    node.driver_internal_info.remove(&plan_key(kind));
    node.driver_internal_info.remove(&index_key(kind));
    node.driver_internal_info.remove(&preparing_key(kind));
    node.driver_internal_info.remove(&prepared_key(kind));
    node.driver_internal_info.remove(&no_ramdisk_key(kind));
    current_step_field(node, kind).clear();
}

fn read_plan(node: &Node, kind: StepKind) -> Vec<StepCall> {
    node.driver_internal_info
        .get(&plan_key(kind))
        .and_then(Value::as_array)
        .map(|steps| {
            steps
                .iter()
                .filter_map(Value::as_object)
                .filter_map(StepCall::from_json)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether an `abort` may interrupt the step the node is in (reserved steps and steps the
/// driver does not know always may).
pub(crate) fn current_step_is_abortable(
    interfaces: &Interfaces,
    node: &Node,
    kind: StepKind,
) -> Result<(), String> {
    let current = match kind {
        StepKind::Clean => &node.clean_step,
        StepKind::Deploy => &node.deploy_step,
        StepKind::Service => &node.service_step,
    };
    let Some(step) = StepCall::from_json(current) else {
        return Ok(());
    };
    let refused = interfaces
        .steps(kind)
        .iter()
        .any(|def| def.interface == step.interface && def.step == step.step && !def.abortable);
    if refused {
        return Err(format!(
            "The {} step {}.{} running on node {} cannot be interrupted; wait for it to \
             finish.",
            kind.as_str(),
            step.interface,
            step.step,
            node.uuid
        ));
    }
    Ok(())
}

/// Runs the node's step list of `kind` from its current index (the next one when `resume`,
/// because the step that waited has finished). An error is the `last_error` text.
pub(crate) async fn run(task: &mut Task, kind: StepKind, resume: bool) -> Result<Progress, String> {
    let plan = read_plan(&task.node, kind);
    let mut index = task
        .node
        .driver_internal_info
        .get(&index_key(kind))
        .and_then(Value::as_u64)
        .and_then(|index| usize::try_from(index).ok())
        .unwrap_or(0);
    let interfaces = task.interfaces().map_err(|error| error.to_string())?;
    let info = &mut task.node.driver_internal_info;
    if info.remove(&preparing_key(kind)).is_some() {
        // The node called back because its environment is ready, not because a step ended.
        info.insert(prepared_key(kind), true.into());
    } else if resume {
        index += 1;
    }
    let needs_preparing = plan.get(index).is_some()
        && !task
            .node
            .driver_internal_info
            .contains_key(&prepared_key(kind));
    let signal = task.abort_signal();
    if needs_preparing {
        let Ok(prepared) = signal
            .unless_aborted(interfaces.deploy.prepare(&mut task.node, kind))
            .await
        else {
            return Ok(Progress::Aborted);
        };
        let prepared = prepared.map_err(|error| {
            format!(
                "Preparing node {} for {} failed: {error}",
                task.uuid(),
                step_noun(kind)
            )
        })?;
        let key = match prepared {
            Outcome::Wait => preparing_key(kind),
            Outcome::Done | Outcome::Poll(_) => prepared_key(kind),
        };
        task.node.driver_internal_info.insert(key, true.into());
        if prepared == Outcome::Wait {
            return saved_unless_aborted(task, Progress::Wait).await;
        }
    }
    while let Some(step) = plan.get(index) {
        // A step boundary: the abort mark is looked at in the write that starts the step.
        let previous = std::mem::replace(current_step_field(&mut task.node, kind), step.to_json());
        let previous_index = task
            .node
            .driver_internal_info
            .insert(index_key(kind), index.into());
        if saved_unless_aborted(task, Progress::Done).await? == Progress::Aborted {
            // The step never started: the abort names the one before it.
            *current_step_field(&mut task.node, kind) = previous;
            match previous_index {
                Some(previous_index) => task
                    .node
                    .driver_internal_info
                    .insert(index_key(kind), previous_index),
                None => task.node.driver_internal_info.remove(&index_key(kind)),
            };
            return Ok(Progress::Aborted);
        }
        let outcome = execute(task, &interfaces, kind, step)
            .await
            .map_err(|error| {
                format!(
                    "{} step {}.{} failed on node {}: {error}",
                    capitalized(kind.as_str()),
                    step.interface,
                    step.step,
                    task.uuid()
                )
            })?;
        match outcome {
            StepOutcome::Done => index += 1,
            StepOutcome::Wait => return Ok(Progress::Wait),
            StepOutcome::Hold => return Ok(Progress::Hold),
            StepOutcome::Aborted => return Ok(Progress::Aborted),
        }
    }
    if !plan.is_empty() && !ramdisk_disabled(&task.node, kind) {
        let Ok(finished) = signal
            .unless_aborted(interfaces.deploy.finish(&mut task.node, kind))
            .await
        else {
            return Ok(Progress::Aborted);
        };
        finished.map_err(|error| {
            format!(
                "Finishing {} on node {} failed: {error}",
                step_noun(kind),
                task.uuid()
            )
        })?;
    }
    clear_plan(&mut task.node, kind);
    Ok(Progress::Done)
}

/// Saves the node unless its flow is marked for abort: `progress`, or [`Progress::Aborted`].
async fn saved_unless_aborted(task: &mut Task, progress: Progress) -> Result<Progress, String> {
    match task.save_unless_aborted().await {
        Ok(true) => Ok(progress),
        Ok(false) => Ok(Progress::Aborted),
        Err(error) => Err(error.to_string()),
    }
}

fn step_noun(kind: StepKind) -> &'static str {
    match kind {
        StepKind::Clean => "cleaning",
        StepKind::Deploy => "deployment",
        StepKind::Service => "servicing",
    }
}

enum StepOutcome {
    Done,
    Wait,
    Hold,
    /// Stopped at an await point, or not polled again, because the flow is marked for abort.
    Aborted,
}

/// Runs one step. An interruptible step (every step but those the driver marks otherwise)
/// is dropped at its next await point when the flow is marked for abort; one that may not be
/// interrupted runs to its end and the abort waits for the next step boundary.
async fn execute(
    task: &mut Task,
    interfaces: &Interfaces,
    kind: StepKind,
    step: &StepCall,
) -> Result<StepOutcome, DriverError> {
    let signal = current_step_is_abortable(interfaces, &task.node, kind)
        .is_ok()
        .then(|| task.abort_signal());
    let signal = signal.as_ref();
    if is_reserved(step) {
        let action = match step.step.as_str() {
            "power_on" => PowerAction::On,
            "power_off" => PowerAction::Off,
            "reboot" => PowerAction::Reboot,
            "hold" => return Ok(StepOutcome::Hold),
            _ => {
                let seconds = step
                    .args
                    .get("seconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(0);
                let pause = tokio::time::sleep(Duration::from_secs(seconds.min(3600)));
                return Ok(match interruptible(signal, pause).await {
                    Ok(()) => StepOutcome::Done,
                    Err(Aborted) => StepOutcome::Aborted,
                });
            }
        };
        let powered = interfaces.power.set_power(&task.node, action, None);
        let Ok(powered) = interruptible(signal, powered).await else {
            return Ok(StepOutcome::Aborted);
        };
        powered?;
        task.node.power_state = Some(action.resulting_state());
        return Ok(StepOutcome::Done);
    }
    loop {
        let run = interfaces.execute_step(&mut task.node, kind, step);
        let Ok(outcome) = interruptible(signal, run).await else {
            return Ok(StepOutcome::Aborted);
        };
        match outcome? {
            Outcome::Done => {
                // What a BIOS or firmware step changed shows in `/bios` and `/firmware`.
                crate::hardware_data::after_step(task, interfaces, step).await?;
                return Ok(StepOutcome::Done);
            }
            Outcome::Wait => return Ok(StepOutcome::Wait),
            Outcome::Poll(after) => {
                // Progress the step recorded becomes visible; the lease stays ours. A step
                // that may not be interrupted is polled to its end whatever the mark says.
                let saved = if signal.is_some() {
                    task.save_unless_aborted().await
                } else {
                    task.save().await.map(|()| true)
                };
                if !saved.map_err(|error| DriverError::Failed(error.to_string()))? {
                    return Ok(StepOutcome::Aborted);
                }
                if interruptible(signal, tokio::time::sleep(after))
                    .await
                    .is_err()
                {
                    return Ok(StepOutcome::Aborted);
                }
            }
        }
    }
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}
