//! Running inspection rules on a node after its data was processed, as Ironic's
//! `inspection_rules.engine` does: rules highest `priority` first; a rule's actions run, in
//! order, when every condition holds; a `fail` action or an action that cannot be done fails
//! the inspection with the reason. Pure: the node, its ports and the plugin data are edited
//! in memory and the caller saves them; `api-call` actions are returned for the caller to
//! make.

use std::net::IpAddr;

use ferric_model::resources::{InspectionRule, JsonObject, Node, Port};
use serde_json::{Map, Value};
use uuid::Uuid;

use super::format::{Scope, interpolate, python_str};
use super::{named_args, parse_op};

/// What the rules act on.
#[derive(Debug)]
pub struct RuleTarget<'a> {
    pub node: &'a mut Node,
    pub ports: &'a mut [Port],
    pub inventory: &'a Value,
    pub plugin_data: &'a mut Value,
}

/// An `api-call` action: a `GET` the caller makes (failure fails the inspection).
#[derive(Debug, Clone, PartialEq)]
pub struct ApiCall {
    pub url: String,
    pub headers: Map<String, Value>,
    pub timeout_seconds: f64,
    pub retries: u32,
}

/// What applying the rules did.
#[derive(Debug, Default)]
pub struct Applied {
    /// The rules whose conditions held, in the order they ran.
    pub matched: Vec<Uuid>,
    /// Ports an action changed (the caller saves them).
    pub changed_ports: Vec<Uuid>,
    pub api_calls: Vec<ApiCall>,
}

/// Node fields an action may set or delete (the rest are the conductor's).
const NODE_FIELDS: &[&str] = &[
    "name",
    "description",
    "driver",
    "driver_info",
    "properties",
    "instance_info",
    "extra",
    "resource_class",
    "owner",
    "lessee",
    "conductor_group",
    "shard",
    "network_data",
    "automated_clean",
    "boot_interface",
    "console_interface",
    "deploy_interface",
    "inspect_interface",
    "management_interface",
    "network_interface",
    "power_interface",
    "raid_interface",
    "rescue_interface",
    "storage_interface",
    "vendor_interface",
    "bios_interface",
    "firmware_interface",
];

/// Port fields an action may set or delete.
const PORT_FIELDS: &[&str] = &[
    "name",
    "description",
    "extra",
    "local_link_connection",
    "physical_network",
    "pxe_enabled",
    "is_smartnic",
    "vendor",
    "category",
];

/// Runs `rules` (already of the right phase) on `target`, highest priority first (a stable
/// sort: equal priorities keep their order); the reason when one fails the inspection.
pub fn apply(rules: &[InspectionRule], target: &mut RuleTarget<'_>) -> Result<Applied, String> {
    let mut ordered: Vec<&InspectionRule> = rules.iter().collect();
    ordered.sort_by_key(|rule| std::cmp::Reverse(rule.priority));
    let mut applied = Applied::default();
    for rule in ordered {
        let holds = conditions_hold(rule, target).map_err(|why| {
            format!(
                "inspection rule {} could not check its conditions: {why}",
                rule.uuid
            )
        })?;
        if !holds {
            continue;
        }
        tracing::info!(rule = %rule.uuid, node = %target.node.uuid, "applying inspection rule");
        applied.matched.push(rule.uuid);
        for action in &rule.actions {
            run_looped(action, target, &mut applied, rule)
                .map_err(|why| format!("inspection rule {} failed: {why}", rule.uuid))?;
        }
    }
    Ok(applied)
}

fn node_json(node: &Node) -> Value {
    serde_json::to_value(node).unwrap_or(Value::Null)
}

/// The loop of a condition or action: its items (an object is one item), or none.
fn loop_items(item: &JsonObject) -> Option<Vec<Value>> {
    match item.get("loop") {
        Some(Value::Array(items)) if !items.is_empty() => Some(items.clone()),
        Some(object @ Value::Object(_)) => Some(vec![object.clone()]),
        _ => None,
    }
}

fn conditions_hold(rule: &InspectionRule, target: &RuleTarget<'_>) -> Result<bool, String> {
    let node = node_json(target.node);
    for condition in &rule.conditions {
        let op = condition.get("op").and_then(Value::as_str).unwrap_or("");
        let holds = match loop_items(condition) {
            None => check(condition, target, &node, None)?,
            Some(items) => {
                let multiple = condition
                    .get("multiple")
                    .and_then(Value::as_str)
                    .unwrap_or("any");
                let mut results = Vec::with_capacity(items.len());
                for item in &items {
                    results.push(check(condition, target, &node, Some(item))?);
                }
                match multiple {
                    "all" => results.iter().all(|r| *r),
                    "first" => results.iter().any(|r| *r),
                    "last" => results.last().copied().unwrap_or(false),
                    _ => results.iter().any(|r| *r),
                }
            }
        };
        if !holds {
            tracing::debug!(rule = %rule.uuid, op, "inspection rule skipped: a condition does not hold");
            return Ok(false);
        }
    }
    Ok(true)
}

/// The arguments of `item` by name, interpolated: in a loop every argument, otherwise those
/// the op formats (Ironic's `FORMATTED_ARGS`; and the values of `eq`, `lt`, `gt`).
fn arguments(
    op: &str,
    item: &JsonObject,
    condition: bool,
    scope: &Scope<'_>,
    formatted: &[&str],
) -> Map<String, Value> {
    let args = named_args(op, item.get("args").unwrap_or(&Value::Null), condition);
    args.into_iter()
        .map(|(name, value)| {
            let value = match (&value, scope.item.is_some()) {
                // In a loop a string is formatted twice, as Ironic does: an item may hold
                // `{inventory[…]}` itself (`"args": ["{item[value]}"]`).
                (Value::String(_), true) => interpolate(&interpolate(&value, scope), scope),
                (_, true) => interpolate(&value, scope),
                (_, false) if formatted.contains(&name.as_str()) => interpolate(&value, scope),
                (_, false) => value,
            };
            (name, value)
        })
        .collect()
}

fn check(
    condition: &JsonObject,
    target: &RuleTarget<'_>,
    node: &Value,
    item: Option<&Value>,
) -> Result<bool, String> {
    let (op, negated) = parse_op(condition.get("op").and_then(Value::as_str).unwrap_or(""));
    let scope = Scope {
        node,
        inventory: target.inventory,
        plugin_data: target.plugin_data,
        item,
    };
    let formatted: &[&str] = match op {
        "eq" | "lt" | "gt" => &["values"],
        "in-net" => &["address", "subnet"],
        _ => &["value"],
    };
    let args = arguments(op, condition, true, &scope, formatted);
    let arg = |name: &str| args.get(name).cloned().unwrap_or(Value::Null);
    let result = match op {
        "eq" | "lt" | "gt" => {
            let Value::Array(mut values) = arg("values") else {
                return Err(format!("'{op}' expects a list of values"));
            };
            let force_strings = item.is_some() || is_true(&arg("force_strings"));
            if force_strings {
                values = values
                    .iter()
                    .map(|v| Value::String(python_str(v)))
                    .collect();
            }
            let mut holds = true;
            for pair in values.windows(2) {
                let ordering = compare(&pair[0], &pair[1], op)?;
                let ok = match op {
                    "eq" => ordering == Some(std::cmp::Ordering::Equal),
                    "lt" => ordering == Some(std::cmp::Ordering::Less),
                    _ => ordering == Some(std::cmp::Ordering::Greater),
                };
                holds &= ok;
            }
            holds
        }
        "is-empty" => matches!(
            python_str(&arg("value")).as_str(),
            "" | "None" | "[]" | "{}"
        ),
        "is-none" => python_str(&arg("value")) == "None",
        "is-true" => is_true(&arg("value")),
        "is-false" => match arg("value") {
            Value::Bool(b) => !b,
            Value::Number(n) => n.as_f64() == Some(0.0),
            Value::String(s) => matches!(s.to_lowercase().as_str(), "no" | "false"),
            Value::Null => true,
            _ => false,
        },
        "one-of" => match arg("values") {
            Value::Array(values) => values.contains(&arg("value")),
            _ => false,
        },
        "in-net" => in_net(&python_str(&arg("address")), &python_str(&arg("subnet")))?,
        "matches" | "contains" => {
            let pattern = python_str(&arg("regex"));
            let pattern = if op == "matches" {
                let anchored = if pattern.ends_with('$') {
                    pattern
                } else {
                    format!("{pattern}$")
                };
                format!("^(?:{anchored})")
            } else {
                pattern
            };
            let regex = regex::Regex::new(&pattern)
                .map_err(|error| format!("invalid regular expression: {error}"))?;
            regex.is_match(&python_str(&arg("value")))
        }
        other => return Err(format!("unsupported condition operator '{other}'")),
    };
    Ok(result != negated)
}

fn is_true(value: &Value) -> bool {
    match value {
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|n| n != 0.0),
        Value::String(s) => matches!(s.to_lowercase().as_str(), "yes" | "true"),
        _ => false,
    }
}

/// Two values compared as Python would: numbers by value, strings by text, equal JSON
/// equal; an order between other kinds is an error (Python's `TypeError`).
fn compare(a: &Value, b: &Value, op: &str) -> Result<Option<std::cmp::Ordering>, String> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => Ok(x
            .as_f64()
            .zip(y.as_f64())
            .and_then(|(x, y)| x.partial_cmp(&y))),
        (Value::String(x), Value::String(y)) => Ok(Some(x.cmp(y))),
        _ if op == "eq" => Ok((a == b).then_some(std::cmp::Ordering::Equal)),
        _ => Err(format!("cannot compare {a} with {b}")),
    }
}

fn in_net(address: &str, subnet: &str) -> Result<bool, String> {
    let address: IpAddr = address
        .parse()
        .map_err(|_| format!("invalid address: {address}"))?;
    let (network, prefix) = subnet.split_once('/').unwrap_or((subnet, ""));
    let network: IpAddr = network
        .parse()
        .map_err(|_| format!("invalid value: {subnet} is not a network"))?;
    let bits = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)) << 96, 32u32),
        IpAddr::V6(v6) => (u128::from(v6), 128u32),
    };
    let ((address, width), (network, network_width)) = (bits(address), bits(network));
    if width != network_width {
        return Ok(false);
    }
    let prefix = if prefix.is_empty() {
        width
    } else {
        prefix
            .parse::<u32>()
            .ok()
            .filter(|p| *p <= width)
            .ok_or_else(|| format!("invalid value: {subnet} has a bad prefix length"))?
    };
    let mask = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - prefix)
    };
    Ok(address & mask == network & mask)
}

fn run_looped(
    action: &JsonObject,
    target: &mut RuleTarget<'_>,
    applied: &mut Applied,
    rule: &InspectionRule,
) -> Result<(), String> {
    match loop_items(action) {
        None => run(action, target, applied, rule, None),
        Some(items) => {
            for item in &items {
                run(action, target, applied, rule, Some(item))?;
            }
            Ok(())
        }
    }
}

fn run(
    action: &JsonObject,
    target: &mut RuleTarget<'_>,
    applied: &mut Applied,
    rule: &InspectionRule,
    item: Option<&Value>,
) -> Result<(), String> {
    let op = action.get("op").and_then(Value::as_str).unwrap_or("");
    let node = node_json(target.node);
    let plugin_data = target.plugin_data.clone();
    let scope = Scope {
        node: &node,
        inventory: target.inventory,
        plugin_data: &plugin_data,
        item,
    };
    let formatted: &[&str] = match op {
        "log" => &["msg"],
        "api-call" => &["url"],
        _ => &["value"],
    };
    let args = arguments(op, action, false, &scope, formatted);
    let arg = |name: &str| args.get(name).cloned().unwrap_or(Value::Null);
    let text = |name: &str| python_str(&arg(name));
    match op {
        "fail" => Err(text("msg")),
        "log" => {
            let level = match arg("level") {
                Value::Null => "info".to_owned(),
                level => python_str(&level).to_lowercase(),
            };
            // A sensitive rule's messages may hold secrets: logged without them.
            let msg = if rule.sensitive {
                "(sensitive)".to_owned()
            } else {
                text("msg")
            };
            let node = target.node.uuid;
            match level.as_str() {
                "debug" => tracing::debug!(%node, rule = %rule.uuid, "{msg}"),
                "info" => tracing::info!(%node, rule = %rule.uuid, "{msg}"),
                "warning" => tracing::warn!(%node, rule = %rule.uuid, "{msg}"),
                "error" | "critical" => tracing::error!(%node, rule = %rule.uuid, "{msg}"),
                other => {
                    return Err(format!(
                        "Invalid log level: {other}. Choose from debug, info, warning, error, \
                         critical"
                    ));
                }
            }
            Ok(())
        }
        "set-attribute" | "extend-attribute" | "del-attribute" => {
            let path = text("path");
            let edit = Edit::new(op, arg("value"), is_true(&arg("unique")));
            let mut json = node;
            edit_path(&mut json, &path, NODE_FIELDS, &edit)
                .map_err(|why| format!("Failed to {} attribute {path}: {why}", edit.verb()))?;
            *target.node = serde_json::from_value(json)
                .map_err(|error| format!("Failed to set attribute {path}: {error}"))?;
            Ok(())
        }
        "set-capability" | "unset-capability" => {
            let name = text("name");
            let value = (op == "set-capability").then(|| text("value"));
            set_capability(&mut target.node.properties, &name, value.as_deref());
            Ok(())
        }
        "add-trait" => {
            let name = text("name");
            if !target.node.traits.contains(&name) {
                target.node.traits.push(name);
            }
            Ok(())
        }
        "remove-trait" => {
            let name = text("name");
            target.node.traits.retain(|t| *t != name);
            Ok(())
        }
        "set-plugin-data" | "extend-plugin-data" | "unset-plugin-data" => {
            let path = text("path");
            let edit = Edit::new(op, arg("value"), is_true(&arg("unique")));
            edit_dotted(target.plugin_data, &path, &edit)
                .map_err(|why| format!("Failed to {} plugin data at {path}: {why}", edit.verb()))
        }
        "set-port-attribute" | "extend-port-attribute" | "del-port-attribute" => {
            let port_id = text("port_id");
            let path = text("path");
            let port = target
                .ports
                .iter_mut()
                .find(|port| port.uuid.to_string() == port_id)
                .ok_or_else(|| format!("Port {port_id} could not be found."))?;
            let edit = Edit::new(op, arg("value"), is_true(&arg("unique")));
            let mut json = serde_json::to_value(&*port).unwrap_or(Value::Null);
            edit_path(&mut json, &path, PORT_FIELDS, &edit).map_err(|why| {
                format!(
                    "Failed to {} attribute {path} for port {port_id}: {why}",
                    edit.verb()
                )
            })?;
            *port = serde_json::from_value(json).map_err(|error| {
                format!("Failed to set attribute {path} for port {port_id}: {error}")
            })?;
            if !applied.changed_ports.contains(&port.uuid) {
                applied.changed_ports.push(port.uuid);
            }
            Ok(())
        }
        "api-call" => {
            let headers = match arg("headers") {
                Value::Object(headers) => headers,
                _ => Map::new(),
            };
            applied.api_calls.push(ApiCall {
                url: text("url"),
                headers,
                timeout_seconds: arg("timeout").as_f64().unwrap_or(5.0),
                retries: arg("retries")
                    .as_u64()
                    .and_then(|r| u32::try_from(r).ok())
                    .unwrap_or(3),
            });
            Ok(())
        }
        other => Err(format!("unsupported action '{other}'")),
    }
}

/// What a set, extend or delete action does at the end of its path.
enum Edit {
    Set(Value),
    Extend { value: Value, unique: bool },
    Delete,
}

impl Edit {
    fn new(op: &str, value: Value, unique: bool) -> Self {
        if op.starts_with("extend-") {
            Self::Extend { value, unique }
        } else if op.starts_with("del-") || op.starts_with("unset-") {
            Self::Delete
        } else {
            Self::Set(value)
        }
    }

    fn verb(&self) -> &'static str {
        match self {
            Self::Set(_) => "set",
            Self::Extend { .. } => "extend",
            Self::Delete => "delete",
        }
    }

    /// Applies the edit to `key` of `object`.
    fn at(&self, object: &mut Map<String, Value>, key: &str) -> Result<(), String> {
        match self {
            Self::Set(value) => {
                object.insert(key.to_owned(), value.clone());
                Ok(())
            }
            Self::Extend { value, unique } => {
                let list = object
                    .entry(key.to_owned())
                    .or_insert_with(|| Value::Array(Vec::new()));
                if list.is_null() {
                    *list = Value::Array(Vec::new());
                }
                let Value::Array(list) = list else {
                    return Err(format!("cannot extend non-list attribute {key}"));
                };
                if !*unique || !list.contains(value) {
                    list.push(value.clone());
                }
                Ok(())
            }
            Self::Delete => match object.get(key) {
                Some(_) => {
                    object.remove(key);
                    Ok(())
                }
                None => Err(format!("{key} is not set")),
            },
        }
    }
}

/// Edits a record's JSON at a `/`-separated path whose first part is one of `allowed`
/// (deleting a top-level field sets it to `null`, its default).
fn edit_path(record: &mut Value, path: &str, allowed: &[&str], edit: &Edit) -> Result<(), String> {
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let Some((first, rest)) = parts.split_first() else {
        return Err("the path is empty".to_owned());
    };
    if !allowed.contains(first) {
        return Err(format!(
            "'{first}' cannot be changed by an inspection rule (allowed: {})",
            allowed.join(", ")
        ));
    }
    let Value::Object(object) = record else {
        return Err("the record is not an object".to_owned());
    };
    if rest.is_empty() {
        return match edit {
            Edit::Delete => {
                let default = match object.get(*first) {
                    Some(Value::Object(_)) => Value::Object(Map::new()),
                    _ => Value::Null,
                };
                object.insert((*first).to_owned(), default);
                Ok(())
            }
            edit => edit.at(object, first),
        };
    }
    let mut current = object
        .get_mut(*first)
        .ok_or_else(|| format!("{first} is not a field"))?;
    let (last, middle) = rest.split_last().unwrap_or((first, &[]));
    for part in middle {
        let Value::Object(object) = current else {
            return Err(format!("{part} is not inside an object"));
        };
        if !object.contains_key(*part) && matches!(edit, Edit::Delete) {
            return Err(format!("{part} is not set"));
        }
        current = object
            .entry((*part).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    match current {
        Value::Object(object) => edit.at(object, last),
        _ => Err(format!("{last} is not inside an object")),
    }
}

/// Edits plugin data at a `.`-separated path (objects created on the way).
fn edit_dotted(data: &mut Value, path: &str, edit: &Edit) -> Result<(), String> {
    if !data.is_object() {
        *data = Value::Object(Map::new());
    }
    let parts: Vec<&str> = path.split('.').collect();
    let (last, middle) = parts.split_last().ok_or("the path is empty")?;
    let mut current = data;
    for part in middle {
        let Value::Object(object) = current else {
            return Err(format!("{part} is not inside an object"));
        };
        if !object.contains_key(*part) && matches!(edit, Edit::Delete) {
            tracing::warn!(path, "plugin data path not found");
            return Ok(());
        }
        current = object
            .entry((*part).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    let Value::Object(object) = current else {
        return Err(format!("{last} is not inside an object"));
    };
    if matches!(edit, Edit::Delete) && !object.contains_key(*last) {
        tracing::warn!(path, "plugin data path not found");
        return Ok(());
    }
    edit.at(object, last)
}

/// Sets (`Some`) or removes (`None`) one `name:value` of `properties.capabilities`
/// (`"k1:v1,k2:v2"`).
fn set_capability(properties: &mut JsonObject, name: &str, value: Option<&str>) {
    let current = properties
        .get("capabilities")
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut pairs: Vec<String> = current
        .split(',')
        .filter(|pair| !pair.is_empty())
        .filter(|pair| pair.split(':').next() != Some(name))
        .map(str::to_owned)
        .collect();
    if let Some(value) = value {
        pairs.push(format!("{name}:{value}"));
    }
    properties.insert("capabilities".to_owned(), Value::String(pairs.join(",")));
}
