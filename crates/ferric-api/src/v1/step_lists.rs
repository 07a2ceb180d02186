//! What deploy templates and runbooks share: their step objects (closed schemas, the step
//! interfaces Ironic allows, non-negative priorities and orders), the duplicate-step rule,
//! naming by UUID or name, and the answer to a request below the resource's version.

use std::collections::BTreeSet;

use ferric_model::resources::{DeployStep, Ident, RunbookStep, STEP_INTERFACES};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::fields::{is_valid_logical_name, mask_secrets};
use crate::ApiError;

/// A path's `{ident}`: a UUID, or a logical name (Ironic's `InvalidUuidOrName` otherwise).
pub(crate) fn parse_ident(text: &str) -> Result<Ident, ApiError> {
    match Ident::parse(text) {
        Ident::Name(name) if !is_valid_logical_name(&name) => Err(ApiError::bad_request(format!(
            "Expected a logical name or UUID but received {text}."
        ))),
        ident => Ok(ident),
    }
}

/// A step's `priority` or `order`: a non-negative integer, or a string of digits (Ironic's
/// schema accepts both).
fn step_number(field: &str, position: usize, key: &str, value: &Value) -> Result<u32, ApiError> {
    let parsed = match value {
        Value::Number(number) => number.as_u64(),
        Value::String(text) if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => {
            text.parse::<u64>().ok()
        }
        _ => None,
    };
    parsed
        .and_then(|number| u32::try_from(number).ok())
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "Invalid {field}: step {position} has {key} {value}; it must be a non-negative \
                 integer."
            ))
        })
}

/// The parts every step has: `interface` (one of [`STEP_INTERFACES`]), a non-empty `step`
/// and `args` (an object; `required` for deploy steps). Unknown keys are refused.
fn step_common(
    field: &str,
    position: usize,
    item: Value,
    number_key: &str,
    args_required: bool,
) -> Result<(String, String, Map<String, Value>, Value), ApiError> {
    let bad =
        |why: String| ApiError::bad_request(format!("Invalid {field}: step {position} {why}"));
    let Value::Object(mut object) = item else {
        return Err(bad("is not an object.".to_owned()));
    };
    if let Some(unknown) = object
        .keys()
        .find(|key| !["interface", "step", "args", number_key].contains(&key.as_str()))
    {
        return Err(bad(format!(
            "has the unknown key '{unknown}'; a step has interface, step, args and {number_key}."
        )));
    }
    let interface = match object.remove("interface") {
        Some(Value::String(name)) if STEP_INTERFACES.contains(&name.as_str()) => name,
        Some(other) => {
            return Err(bad(format!(
                "has interface {other}; use one of {}.",
                STEP_INTERFACES.join(", ")
            )));
        }
        None => return Err(bad("lacks 'interface'.".to_owned())),
    };
    let step = match object.remove("step") {
        Some(Value::String(name)) if !name.trim().is_empty() => name,
        Some(other) => return Err(bad(format!("has step {other}; name the step."))),
        None => return Err(bad("lacks 'step'.".to_owned())),
    };
    let args = match object.remove("args") {
        Some(Value::Object(args)) => args,
        Some(other) => return Err(bad(format!("has args {other}; args must be an object."))),
        None if args_required => return Err(bad("lacks 'args' (use {} for none).".to_owned())),
        None => Map::new(),
    };
    let number = object
        .remove(number_key)
        .ok_or_else(|| bad(format!("lacks '{number_key}'.")))?;
    Ok((interface, step, args, number))
}

fn step_items(field: &str, value: Value) -> Result<Vec<Value>, ApiError> {
    match value {
        Value::Array(items) => Ok(items),
        other => Err(ApiError::bad_request(format!(
            "Invalid {field}: expected a list of step objects, got {other}."
        ))),
    }
}

/// A deploy template's `steps`: each `{interface, step, args, priority}`.
pub(crate) fn deploy_steps(field: &str, value: Value) -> Result<Vec<DeployStep>, ApiError> {
    step_items(field, value)?
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let position = index + 1;
            let (interface, step, args, priority) =
                step_common(field, position, item, "priority", true)?;
            Ok(DeployStep {
                priority: step_number(field, position, "priority", &priority)?,
                interface,
                step,
                args,
            })
        })
        .collect()
}

/// A runbook's `steps`: each `{interface, step, args?, order}`.
pub(crate) fn runbook_steps(field: &str, value: Value) -> Result<Vec<RunbookStep>, ApiError> {
    step_items(field, value)?
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            let position = index + 1;
            let (interface, step, args, order) =
                step_common(field, position, item, "order", false)?;
            Ok(RunbookStep {
                order: step_number(field, position, "order", &order)?,
                interface,
                step,
                args,
            })
        })
        .collect()
}

/// At least one step, and no `interface.step` twice (Ironic's `duplicate_steps`).
pub(crate) fn check_steps<'s>(
    resource: &str,
    steps: impl Iterator<Item = (&'s str, &'s str)>,
) -> Result<(), String> {
    let mut seen = BTreeSet::new();
    let mut duplicates = BTreeSet::new();
    let mut count = 0;
    for (interface, step) in steps {
        count += 1;
        if !seen.insert((interface, step)) {
            duplicates.insert(format!("interface: {interface}, step: {step}"));
        }
    }
    if count == 0 {
        return Err(format!(
            "No steps specified. A {resource} must have at least one step"
        ));
    }
    if !duplicates.is_empty() {
        return Err(format!(
            "Duplicate deploy steps. A {resource} cannot have multiple steps with the same \
             interface and step. Duplicates: {}",
            duplicates.into_iter().collect::<Vec<_>>().join("; ")
        ));
    }
    Ok(())
}

/// A step as responses show it, secrets in `args` masked; `number` is `priority` or `order`.
pub(crate) fn step_json(
    interface: &str,
    step: &str,
    args: &Map<String, Value>,
    number: (&str, u32),
    masked: bool,
) -> Value {
    let args = if masked {
        mask_secrets(args)
    } else {
        Value::Object(args.clone())
    };
    let mut shown = json!({ "interface": interface, "step": step, "args": args });
    shown[number.0] = json!(number.1);
    shown
}

/// A fresh UUID unless the body named one.
pub(crate) fn uuid_or_new(value: Value) -> Result<Uuid, ApiError> {
    Ok(super::fields::opt_uuid("uuid", value)?.unwrap_or_else(Uuid::new_v4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_closed_and_checked() {
        let steps = deploy_steps(
            "steps",
            json!([{"interface": "bios", "step": "apply_configuration", "args": {}, "priority": "10"}]),
        )
        .unwrap();
        assert_eq!(steps[0].priority, 10);
        for (bad, needle) in [
            (
                json!([{"interface": "boot", "step": "s", "args": {}, "priority": 1}]),
                "interface",
            ),
            (
                json!([{"interface": "bios", "step": "", "args": {}, "priority": 1}]),
                "step",
            ),
            (
                json!([{"interface": "bios", "step": "s", "priority": 1}]),
                "args",
            ),
            (
                json!([{"interface": "bios", "step": "s", "args": {}, "priority": -1}]),
                "non-negative",
            ),
            (
                json!([{"interface": "bios", "step": "s", "args": {}, "priority": 1, "x": 1}]),
                "unknown key 'x'",
            ),
            (json!({"interface": "bios"}), "list of step objects"),
        ] {
            let error = deploy_steps("steps", bad).unwrap_err();
            assert!(error.message.contains(needle), "{}", error.message);
        }
        let runbook = runbook_steps(
            "steps",
            json!([{"interface": "deploy", "step": "erase_devices", "order": 0}]),
        )
        .unwrap();
        assert!(runbook[0].args.is_empty());
        assert!(runbook_steps("steps", json!([{"interface": "deploy", "step": "e"}])).is_err());
    }

    #[test]
    fn duplicates_and_empty_lists_are_refused() {
        assert!(
            check_steps(
                "deploy template",
                [("bios", "a"), ("bios", "b")].into_iter()
            )
            .is_ok()
        );
        let error = check_steps(
            "deploy template",
            [("bios", "a"), ("bios", "a")].into_iter(),
        )
        .unwrap_err();
        assert!(
            error.contains("Duplicates: interface: bios, step: a"),
            "{error}"
        );
        assert!(check_steps("runbook", std::iter::empty()).is_err());
    }
}
