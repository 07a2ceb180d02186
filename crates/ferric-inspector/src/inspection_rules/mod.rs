//! Inspection rules in Ironic's own format (`reference/ironic.md` §5.3, API 1.96), as
//! opposed to [`crate::rules`], ironic-inspector's older one.
//!
//! A rule is `{"conditions": [...], "actions": [...], "priority", "phase", "sensitive"}`;
//! each condition and action is `{"op", "args", "loop"?, "multiple"?}` where `args` is a list
//! (positional, in the order of the op's parameters) or an object (by name). Conditions may
//! be negated with a `!` before the op. [`check_rule`] is the API's validation (status 400
//! with the reason); [`apply`] (in `engine.rs`) runs the rules on a node after inspection.

mod engine;
mod format;

pub use engine::{ApiCall, Applied, RuleTarget, apply};

use serde_json::{Map, Value};

/// Ironic's condition operators and their parameters: `(op, required, optional)`. `eq`,
/// `lt` and `gt` take any number of values (a list is every value, not positional).
const CONDITIONS: &[(&str, &[&str], &[&str])] = &[
    ("eq", &["values"], &["force_strings"]),
    ("lt", &["values"], &["force_strings"]),
    ("gt", &["values"], &["force_strings"]),
    ("is-empty", &["value"], &[]),
    ("in-net", &["address", "subnet"], &[]),
    ("matches", &["value", "regex"], &[]),
    ("contains", &["value", "regex"], &[]),
    ("one-of", &["value"], &["values"]),
    ("is-none", &["value"], &[]),
    ("is-true", &["value"], &[]),
    ("is-false", &["value"], &[]),
];

/// Ironic's actions and their parameters: `(op, required, optional)`.
const ACTIONS: &[(&str, &[&str], &[&str])] = &[
    ("fail", &["msg"], &[]),
    ("log", &["msg"], &["level"]),
    ("set-attribute", &["path", "value"], &[]),
    ("extend-attribute", &["path", "value"], &["unique"]),
    ("del-attribute", &["path"], &[]),
    ("set-capability", &["name", "value"], &[]),
    ("unset-capability", &["name"], &[]),
    ("add-trait", &["name"], &[]),
    ("remove-trait", &["name"], &[]),
    ("set-plugin-data", &["path", "value"], &[]),
    ("extend-plugin-data", &["path", "value"], &["unique"]),
    ("unset-plugin-data", &["path"], &[]),
    ("set-port-attribute", &["port_id", "path", "value"], &[]),
    (
        "extend-port-attribute",
        &["port_id", "path", "value"],
        &["unique"],
    ),
    ("del-port-attribute", &["port_id", "path"], &[]),
    (
        "api-call",
        &["url"],
        &["headers", "proxies", "timeout", "retries", "backoff_factor"],
    ),
];

/// The only phase Ironic defines.
pub const PHASES: [&str; 1] = ["main"];
/// The priorities a rule made through the API may have (built-in rules may have any).
pub const PRIORITY_RANGE: std::ops::RangeInclusive<i64> = 0..=9999;
/// The longest description.
pub const DESCRIPTION_MAX: usize = 255;

/// The fields a rule body may hold.
pub const RULE_FIELDS: [&str; 7] = [
    "uuid",
    "description",
    "priority",
    "sensitive",
    "phase",
    "conditions",
    "actions",
];

/// Checks a whole rule (a create body, or a rule after a PATCH) as Ironic's schema and
/// plugins do; the reason when it is refused. `built_in` rules may have any priority.
pub fn check_rule(rule: &Map<String, Value>, built_in: bool) -> Result<(), String> {
    let mut errors = Vec::new();
    for key in rule.keys() {
        if !RULE_FIELDS.contains(&key.as_str()) {
            errors.push(format!("Additional properties are not allowed ('{key}')."));
        }
    }
    match rule.get("uuid") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) if uuid::Uuid::parse_str(text).is_ok() => {}
        Some(other) => errors.push(format!("Expected a UUID for uuid: {other}.")),
    }
    match rule.get("description") {
        None | Some(Value::Null) => {}
        Some(Value::String(text)) if text.chars().count() <= DESCRIPTION_MAX => {}
        Some(Value::String(_)) => errors.push(format!(
            "description is longer than {DESCRIPTION_MAX} characters."
        )),
        Some(other) => errors.push(format!("{other} is not of type 'string' (description).")),
    }
    match rule.get("sensitive") {
        None | Some(Value::Null | Value::Bool(_)) => {}
        Some(other) => errors.push(format!("{other} is not of type 'boolean' (sensitive).")),
    }
    match rule.get("phase") {
        None | Some(Value::Null) => {}
        Some(Value::String(phase)) if PHASES.contains(&phase.as_str()) => {}
        Some(other) => errors.push(format!(
            "Invalid phase: {other}. Valid phases are: {}.",
            PHASES.join(", ")
        )),
    }
    match rule.get("priority") {
        None => {}
        Some(Value::Number(number)) if number.as_i64().is_some() => {
            let priority = number.as_i64().unwrap_or_default();
            if !built_in && !PRIORITY_RANGE.contains(&priority) {
                errors.push(format!(
                    "Priority must be between {} and {} for user-defined rules, not \
                     {priority}.",
                    PRIORITY_RANGE.start(),
                    PRIORITY_RANGE.end()
                ));
            }
        }
        Some(other) => errors.push(format!("{other} is not of type 'integer' (priority).")),
    }
    match rule.get("conditions") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                if let Err(why) = check_item(item, true) {
                    errors.push(format!("conditions/{index}: {why}"));
                }
            }
        }
        Some(other) => errors.push(format!("{other} is not of type 'array' (conditions).")),
    }
    match rule.get("actions") {
        None => errors.push("'actions' is a required property.".to_owned()),
        Some(Value::Array(items)) if items.is_empty() => {
            errors.push("actions: [] should be non-empty (at least one action).".to_owned());
        }
        Some(Value::Array(items)) => {
            for (index, item) in items.iter().enumerate() {
                if let Err(why) = check_item(item, false) {
                    errors.push(format!("actions/{index}: {why}"));
                }
            }
        }
        Some(other) => errors.push(format!("{other} is not of type 'array' (actions).")),
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(format!(
            "Validation failed for inspection rule: {}",
            errors.remove(0)
        )),
        _ => Err(format!(
            "Multiple validation errors occurred: {}",
            errors.join("; ")
        )),
    }
}

/// The parameters of a condition operator (without its `!`) or an action.
fn signature(
    op: &str,
    condition: bool,
) -> Option<(&'static [&'static str], &'static [&'static str])> {
    let table = if condition { CONDITIONS } else { ACTIONS };
    table
        .iter()
        .find(|(name, _, _)| *name == op)
        .map(|(_, required, optional)| (*required, *optional))
}

/// Whether `op` is variadic: a list of args is all its values.
fn variadic(op: &str) -> bool {
    matches!(op, "eq" | "lt" | "gt")
}

/// The op of a condition without its negation, and whether it was negated.
pub(crate) fn parse_op(op: &str) -> (&str, bool) {
    match op.strip_prefix('!') {
        Some(op) => (op, true),
        None => (op, false),
    }
}

/// One condition or action: an object with a known `op`, `args` a list or object holding
/// every required parameter and no unknown one, `loop` a list or object, `multiple` one of
/// `any`, `all`, `first`, `last` (conditions).
fn check_item(item: &Value, condition: bool) -> Result<(), String> {
    let kind = if condition { "condition" } else { "action" };
    let object = item
        .as_object()
        .ok_or_else(|| format!("{item} is not of type 'object'"))?;
    let op = match object.get("op") {
        Some(Value::String(op)) => op.as_str(),
        Some(other) => return Err(format!("{other} is not a valid {kind} operator")),
        None => return Err("'op' is a required property".to_owned()),
    };
    let (name, _negated) = if condition { parse_op(op) } else { (op, false) };
    let Some((required, optional)) = signature(name, condition) else {
        let known: Vec<&str> = if condition { CONDITIONS } else { ACTIONS }
            .iter()
            .map(|(name, _, _)| *name)
            .collect();
        return Err(format!(
            "Unsupported {kind} operator: {op} (supported: {})",
            known.join(", ")
        ));
    };
    if condition
        && let Some(multiple) = object.get("multiple")
        && !matches!(multiple.as_str(), Some("any" | "all" | "first" | "last"))
    {
        return Err(format!(
            "{multiple} is not one of 'any', 'all', 'first', 'last'"
        ));
    }
    if let Some(looped) = object.get("loop")
        && !(looped.is_array() || looped.is_object())
    {
        return Err(format!("{looped} is not of type 'array', 'object' (loop)"));
    }
    match object.get("args") {
        None => Err("'args' is a required property".to_owned()),
        Some(Value::Array(args)) => {
            if !variadic(name) && args.len() < required.len() {
                return Err(format!(
                    "Invalid parameters for {kind} operator {name}: not enough arguments \
                     provided. Missing: {}",
                    required[args.len()..].join(", ")
                ));
            }
            Ok(())
        }
        Some(Value::Object(args)) => {
            let missing: Vec<&str> = required
                .iter()
                .copied()
                .filter(|param| !args.contains_key(*param))
                .collect();
            let unexpected: Vec<&str> = args
                .keys()
                .map(String::as_str)
                .filter(|key| !required.contains(key) && !optional.contains(key))
                .collect();
            let mut why = Vec::new();
            if !missing.is_empty() {
                why.push(format!(
                    "missing required argument(s): {}",
                    missing.join(", ")
                ));
            }
            if !unexpected.is_empty() {
                why.push(format!("unexpected argument(s): {}", unexpected.join(", ")));
            }
            if why.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "Invalid parameters for {kind} operator {name}: {}",
                    why.join("; ")
                ))
            }
        }
        Some(other) => Err(format!("{other} is not of type 'array', 'object' (args)")),
    }
}

/// `args` of a condition or action by parameter name: an object as it is, a list
/// positionally (a variadic op's list is all its `values`).
pub(crate) fn named_args(op: &str, args: &Value, condition: bool) -> Map<String, Value> {
    match args {
        Value::Object(args) => args.clone(),
        Value::Array(items) => {
            let mut named = Map::new();
            if condition && variadic(op) {
                named.insert("values".to_owned(), Value::Array(items.clone()));
                return named;
            }
            let Some((required, optional)) = signature(op, condition) else {
                return named;
            };
            for (param, value) in required.iter().chain(optional.iter()).zip(items) {
                named.insert((*param).to_owned(), value.clone());
            }
            named
        }
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests;
