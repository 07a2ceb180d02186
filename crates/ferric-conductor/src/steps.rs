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
//!
//! Agent steps: before the first step that runs on the agent, `run` has the deploy interface read
//! the agent's steps (`refresh_agent_steps`) and makes the rest of the plan again with them
//! (`fit_plan`: automated flows by priority from the kept `<kind>_requested_steps`, manual ones
//! checked step by step). An agent's `CLEAN_VERSION_MISMATCH` (`DriverError::AgentVersionMismatch`)
//! reads them again and restarts automated cleaning or re-runs the step (`after_version_mismatch`).
//! Automated cleaning with nothing to run still boots the agent to ask for its steps
//! (`discovers_agent_steps`), and its plan takes the site's `clean_step_priority_override`
//! (`priority_override.rs`). A failing flow stores the ramdisk's logs first
//! (`collect_ramdisk_logs`).

use std::time::Duration;

use ferric_drivers::{
    DriverError, Interfaces, OfferedStep, Outcome, PowerAction, StepCall, StepKind,
};
use ferric_model::ProvisionState;
use ferric_model::resources::{InterfaceKind, JsonObject, Node};
use serde_json::Value;

use crate::ConductorError;
use crate::abort_signal::{Aborted, interruptible};
use crate::priority_override::PriorityOverride;
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
    /// The flow is marked for abort (`flows/mod.rs`): what ran was stopped, nothing more runs,
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

/// Set once the agent's own steps were read in this flow (`agent_steps.rs` in the drivers).
fn agent_steps_key(kind: StepKind) -> String {
    format!("{}_agent_steps_loaded", kind.as_str())
}

/// The steps a deployment was asked for (the request's and its deploy templates'), kept so
/// the plan can be made again once the agent has said which steps it offers.
fn requested_key(kind: StepKind) -> String {
    format!("{}_requested_steps", kind.as_str())
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

fn find<'a>(offered: &'a [OfferedStep], step: &StepCall) -> Option<&'a OfferedStep> {
    offered
        .iter()
        .find(|def| def.interface == step.interface && def.step == step.step)
}

/// The arguments of a step the agent offered, checked against what it declared
/// (`argsinfo`), as Ironic checks them: none it does not know, every required one given
/// (for deploy steps only when they run).
fn check_agent_args(kind: StepKind, step: &StepCall, def: &OfferedStep) -> Result<(), String> {
    let Some(agent) = &def.agent else {
        return Ok(());
    };
    let declared = agent.argsinfo.clone().unwrap_or_default();
    let mut unexpected: Vec<&str> = step
        .args
        .keys()
        .filter(|name| !declared.contains_key(*name))
        .map(String::as_str)
        .collect();
    unexpected.sort_unstable();
    if !unexpected.is_empty() {
        return Err(format!(
            "the {} step {}.{} the agent offers takes no argument {} (it takes: {})",
            kind.as_str(),
            step.interface,
            step.step,
            unexpected.join(", "),
            if declared.is_empty() {
                "none".to_owned()
            } else {
                declared.keys().cloned().collect::<Vec<_>>().join(", ")
            }
        ));
    }
    if kind != StepKind::Deploy || step.priority > 0 {
        let missing: Vec<&str> = agent
            .required_args()
            .into_iter()
            .filter(|name| !step.args.contains_key(*name))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "the {} step {}.{} the agent offers needs the argument {}",
                kind.as_str(),
                step.interface,
                step.step,
                missing.join(", ")
            ));
        }
    }
    Ok(())
}

fn unsupported(kind: StepKind, step: &StepCall, offered: &[OfferedStep], by: &str) -> String {
    let names: Vec<String> = offered
        .iter()
        .map(|def| format!("{}.{}", def.interface, def.step))
        .chain(["power.power_on", "power.power_off", "power.reboot"].map(String::from))
        .collect();
    format!(
        "The requested {} step \"{}.{}\" is not supported by {by}; supported steps: {}, and \
         hold/wait on any interface.",
        kind.as_str(),
        step.interface,
        step.step,
        names.join(", ")
    )
}

/// Refuses requested steps the node does not offer (400 before anything starts). A step the
/// node's agent may offer (its interface hands steps to the agent) but that is not known yet
/// is checked once the agent has said which steps it offers, as Ironic does.
pub(crate) fn check_requested(
    interfaces: &Interfaces,
    node: &Node,
    kind: StepKind,
    requested: &[StepCall],
) -> Result<(), ConductorError> {
    let offered = interfaces.offered_steps(node, kind);
    for step in requested.iter().filter(|step| !is_reserved(step)) {
        match find(&offered, step) {
            Some(def) => check_agent_args(kind, step, def).map_err(ConductorError::Invalid)?,
            None if interfaces.hands_to_agent(step.interface) => {}
            None => {
                return Err(ConductorError::Invalid(unsupported(
                    kind,
                    step,
                    &offered,
                    "the node's driver",
                )));
            }
        }
    }
    Ok(())
}

/// What the node's interfaces and agent offer for `kind`, with the site's
/// `clean_step_priority_override` applied in automated cleaning.
pub(crate) fn offered_steps(
    interfaces: &Interfaces,
    overrides: &[PriorityOverride],
    node: &Node,
    kind: StepKind,
) -> Vec<OfferedStep> {
    let mut offered = interfaces.offered_steps(node, kind);
    if kind == StepKind::Clean && is_automated(node, kind) {
        crate::priority_override::apply(&mut offered, overrides);
    }
    offered
}

/// The steps an automated flow runs: the offered steps with a priority above 0, with
/// `requested` steps added or overriding a driver step's priority (priority 0 removes it),
/// highest priority first.
pub(crate) fn automated_plan(offered: &[OfferedStep], requested: &[StepCall]) -> Vec<StepCall> {
    let mut plan: Vec<StepCall> = offered
        .iter()
        .filter(|def| def.priority > 0)
        .map(|def| StepCall {
            interface: def.interface,
            step: def.step.clone(),
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

fn steps_json(steps: &[StepCall]) -> Value {
    Value::Array(
        steps
            .iter()
            .map(|step| Value::Object(step.to_json()))
            .collect(),
    )
}

/// Writes `plan` as the node's step list for `kind`, starting at its first step.
pub(crate) fn store_plan(node: &mut Node, kind: StepKind, plan: &[StepCall]) {
    node.driver_internal_info
        .insert(plan_key(kind), steps_json(plan));
    node.driver_internal_info.insert(index_key(kind), 0.into());
}

/// Keeps the steps an automated flow was asked for, to plan again with the agent's steps.
pub(crate) fn store_requested(node: &mut Node, kind: StepKind, requested: &[StepCall]) {
    node.driver_internal_info
        .insert(requested_key(kind), steps_json(requested));
}

/// Whether the flow of `kind` runs the offered steps by priority (automated cleaning, every
/// deployment) rather than the steps an operator listed (manual cleaning, servicing).
fn is_automated(node: &Node, kind: StepKind) -> bool {
    match kind {
        StepKind::Deploy => true,
        StepKind::Clean => node.target_provision_state != Some(ProvisionState::Manageable),
        StepKind::Service => false,
    }
}

/// The plan of `kind` made again with the agent's steps known: the steps before `index` ran
/// already and stay; an automated flow runs the rest of its offered and requested steps by
/// priority (the agent's steps among them), a manual one the steps asked for, each now
/// checked against what the agent offers. The error says which step does not fit.
fn fit_plan(
    interfaces: &Interfaces,
    overrides: &[PriorityOverride],
    node: &Node,
    kind: StepKind,
    plan: &[StepCall],
    index: usize,
) -> Result<Vec<StepCall>, String> {
    let offered = offered_steps(interfaces, overrides, node, kind);
    let (done, rest) = plan.split_at(index.min(plan.len()));
    let wanted = if is_automated(node, kind) {
        read_steps(node, &requested_key(kind))
    } else {
        rest.to_vec()
    };
    for step in wanted.iter().filter(|step| !is_reserved(step)) {
        let def = find(&offered, step)
            .ok_or_else(|| unsupported(kind, step, &offered, "the node's driver or its agent"))?;
        check_agent_args(kind, step, def)?;
    }
    let mut fitted = done.to_vec();
    if is_automated(node, kind) {
        fitted.extend(
            automated_plan(&offered, &wanted)
                .into_iter()
                .filter(|step| {
                    !done
                        .iter()
                        .any(|ran| ran.interface == step.interface && ran.step == step.step)
                }),
        );
    } else {
        fitted.extend(wanted);
    }
    Ok(fitted)
}

/// Forgets the step list of `kind` and the current step.
pub(crate) fn clear_plan(node: &mut Node, kind: StepKind) {
    node.driver_internal_info.remove(&plan_key(kind));
    node.driver_internal_info.remove(&index_key(kind));
    node.driver_internal_info.remove(&preparing_key(kind));
    node.driver_internal_info.remove(&prepared_key(kind));
    node.driver_internal_info.remove(&no_ramdisk_key(kind));
    node.driver_internal_info.remove(&agent_steps_key(kind));
    node.driver_internal_info.remove(&requested_key(kind));
    current_step_field(node, kind).clear();
}

fn read_plan(node: &Node, kind: StepKind) -> Vec<StepCall> {
    read_steps(node, &plan_key(kind))
}

fn read_steps(node: &Node, key: &str) -> Vec<StepCall> {
    node.driver_internal_info
        .get(key)
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
        .offered_steps(node, kind)
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
    let mut plan = read_plan(&task.node, kind);
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
    // Automated cleaning with nothing to run yet may still have agent steps to discover: as
    // Ironic, boot the agent and ask it (its steps with a priority above 0 then run).
    let discover = plan.len() <= index && discovers_agent_steps(&task.node, &interfaces, kind);
    let needs_preparing = (plan.get(index).is_some() || discover)
        && !task
            .node
            .driver_internal_info
            .contains_key(&prepared_key(kind));
    let signal = task.abort_signal();
    if needs_preparing {
        // The switch ports first: the agent boots on the flow's network.
        let Ok(moved) = signal
            .unless_aborted(crate::networking::enter_steps(
                &interfaces,
                &mut task.node,
                kind,
            ))
            .await
        else {
            return Ok(Progress::Aborted);
        };
        moved.map_err(|error| {
            format!(
                "Moving node {}'s switch ports for {} failed: {error}",
                task.uuid(),
                step_noun(kind)
            )
        })?;
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
    if discover {
        let Ok(read) = signal
            .unless_aborted(interfaces.deploy.refresh_agent_steps(&mut task.node, kind))
            .await
        else {
            return Ok(Progress::Aborted);
        };
        read.map_err(|error| agent_steps_failed(task, kind, &error))?;
        plan = refit(task, &interfaces, kind, &plan, index)?;
    }
    while let Some(step) = plan.get(index).cloned() {
        if wants_agent_steps(&task.node, &interfaces, kind, &step) {
            // The agent is up: read its steps and fit the rest of the flow to them.
            let Ok(read) = signal
                .unless_aborted(interfaces.deploy.refresh_agent_steps(&mut task.node, kind))
                .await
            else {
                return Ok(Progress::Aborted);
            };
            read.map_err(|error| agent_steps_failed(task, kind, &error))?;
            plan = refit(task, &interfaces, kind, &plan, index)?;
            continue;
        }
        if kind == StepKind::Deploy && step.priority < crate::networking::TENANT_SWITCH_PRIORITY {
            // Ironic's `switch_to_tenant_network` runs here (networking.rs).
            crate::networking::to_tenant(&interfaces, &mut task.node)
                .await
                .map_err(|error| {
                    format!(
                        "Moving node {}'s switch ports to the tenant network failed: {error}",
                        task.uuid()
                    )
                })?;
        }
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
        let outcome = match execute(task, &interfaces, kind, &step).await {
            Err(mismatch @ DriverError::AgentVersionMismatch { .. }) => {
                let detail = mismatch.to_string();
                (plan, index) =
                    after_version_mismatch(task, &interfaces, kind, &plan, index, &detail).await?;
                continue;
            }
            other => other.map_err(|error| {
                format!(
                    "{} step {}.{} failed on node {}: {error}",
                    capitalized(kind.as_str()),
                    step.interface,
                    step.step,
                    task.uuid()
                )
            })?,
        };
        match outcome {
            StepOutcome::Done => index += 1,
            StepOutcome::Wait => return Ok(Progress::Wait),
            StepOutcome::Hold => return Ok(Progress::Hold),
            StepOutcome::Aborted => return Ok(Progress::Aborted),
        }
    }
    let prepared = task
        .node
        .driver_internal_info
        .contains_key(&prepared_key(kind));
    if (!plan.is_empty() || prepared) && !ramdisk_disabled(&task.node, kind) {
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
        crate::networking::leave_steps(&interfaces, &mut task.node, kind)
            .await
            .map_err(|error| {
                format!(
                    "Moving node {}'s switch ports after {} failed: {error}",
                    task.uuid(),
                    step_noun(kind)
                )
            })?;
    }
    clear_plan(&mut task.node, kind);
    Ok(Progress::Done)
}

/// Whether the agent's steps must be read before `step` runs: it is the flow's first step
/// that runs on the agent (which is up by then) and the node's deploy interface hands steps
/// to an agent.
fn wants_agent_steps(
    node: &Node,
    interfaces: &Interfaces,
    kind: StepKind,
    step: &StepCall,
) -> bool {
    interfaces.deploy.runs_agent()
        && !is_reserved(step)
        && !ramdisk_disabled(node, kind)
        && !node
            .driver_internal_info
            .contains_key(&agent_steps_key(kind))
        && interfaces.step_needs_agent(step)
}

/// Whether an automated cleaning must boot the agent only to learn its steps: the node's
/// deploy interface hands steps to an agent whose clean steps are not known yet (Ironic boots
/// the ramdisk for every automated cleaning with an agent deploy interface).
fn discovers_agent_steps(node: &Node, interfaces: &Interfaces, kind: StepKind) -> bool {
    kind == StepKind::Clean
        && is_automated(node, kind)
        && interfaces.deploy.runs_agent()
        && !ramdisk_disabled(node, kind)
        && !node
            .driver_internal_info
            .contains_key(&agent_steps_key(kind))
}

fn agent_steps_failed(task: &Task, kind: StepKind, error: &DriverError) -> String {
    format!(
        "Reading the {} steps of node {}'s agent failed: {error}",
        kind.as_str(),
        task.uuid()
    )
}

/// Makes the plan again now that the agent's steps are cached, and records it.
fn refit(
    task: &mut Task,
    interfaces: &Interfaces,
    kind: StepKind,
    plan: &[StepCall],
    index: usize,
) -> Result<Vec<StepCall>, String> {
    let overrides = &task.inner.config.clean_step_priority_override;
    let fitted =
        fit_plan(interfaces, overrides, &task.node, kind, plan, index).map_err(|error| {
            format!(
                "The {} steps of node {} do not fit what its driver and agent offer: {error}",
                kind.as_str(),
                task.uuid()
            )
        })?;
    let info = &mut task.node.driver_internal_info;
    info.insert(agent_steps_key(kind), true.into());
    info.insert(plan_key(kind), steps_json(&fitted));
    Ok(fitted)
}

/// The agent refused a step because its hardware managers changed since its steps were read
/// (IPA's `CLEAN_VERSION_MISMATCH`). As Ironic: read the steps and versions again; automated
/// cleaning starts over from its first step with the new steps, manual cleaning, servicing
/// and deployments run the refused step again. An agent that reports the same versions it
/// refused cannot be driven: the flow fails naming them. Returns the plan and the index to
/// go on at.
async fn after_version_mismatch(
    task: &mut Task,
    interfaces: &Interfaces,
    kind: StepKind,
    plan: &[StepCall],
    index: usize,
    detail: &str,
) -> Result<(Vec<StepCall>, usize), String> {
    let before = ferric_drivers::agent_steps::version(&task.node);
    interfaces
        .deploy
        .refresh_agent_steps(&mut task.node, kind)
        .await
        .map_err(|error| agent_steps_failed(task, kind, &error))?;
    let after = ferric_drivers::agent_steps::version(&task.node);
    if after == before {
        return Err(format!(
            "The agent of node {} refused a {} step for a hardware manager version mismatch, \
             yet reports the same versions ({after}) when asked again; Ferric cannot run its \
             steps. Check the ramdisk. The agent said: {detail}",
            task.uuid(),
            kind.as_str()
        ));
    }
    let restart = kind == StepKind::Clean && is_automated(&task.node, kind);
    tracing::info!(
        node = %task.uuid(),
        kind = kind.as_str(),
        versions = %after,
        restart,
        "the agent's hardware managers changed; its steps were read again"
    );
    if restart {
        let overrides = &task.inner.config.clean_step_priority_override;
        let offered = offered_steps(interfaces, overrides, &task.node, kind);
        let fresh = automated_plan(&offered, &[]);
        let info = &mut task.node.driver_internal_info;
        info.insert(agent_steps_key(kind), true.into());
        info.insert(plan_key(kind), steps_json(&fresh));
        return Ok((fresh, 0));
    }
    Ok((refit(task, interfaces, kind, plan, index)?, index))
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
                if !saved.map_err(|error| {
                    DriverError::failed(ferric_drivers::Component::Conductor, error.to_string())
                })? {
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
