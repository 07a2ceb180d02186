//! Introspection rules in ironic-inspector's format (`reference/ironic.md` §5.1): conditions on
//! the inspection data or the node, and actions on the node when all conditions hold.
//!
//! Supported: condition ops `eq`, `ne`, `lt`, `gt`, `le`, `ge`, `is-empty`, `contains`,
//! `matches`, `in-net` with `multiple` (`any`, `all`, `first`) and `invert`; actions `fail`,
//! `set-attribute`, `extend-attribute`, `set-capability`, `add-trait`, `remove-trait`.
//! Fields are simple JSONPaths (`inventory.cpu.count`, `inventory.interfaces[*].name`),
//! prefixed `data://` (the default) or `node://`.
//!
//! `regex` serves `matches` and `contains`; the JSONPath subset of fields (dotted names, `[n]`,
//! `[*]`) is written here, since the JSONPath crates bring a whole query language for what is a
//! path walk.

use std::net::IpAddr;

use chrono::{DateTime, Utc};
use ferric_model::resources::{JsonObject, Node};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

const CONDITION_OPS: [&str; 10] = [
    "eq", "ne", "lt", "gt", "le", "ge", "is-empty", "contains", "matches", "in-net",
];
const ACTIONS: [&str; 6] = [
    "fail",
    "set-attribute",
    "extend-attribute",
    "set-capability",
    "add-trait",
    "remove-trait",
];

/// A stored rule, as `GET /v1/rules/{uuid}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub uuid: Uuid,
    pub description: Option<String>,
    #[serde(default)]
    pub scope: Option<String>,
    pub conditions: Vec<JsonObject>,
    pub actions: Vec<JsonObject>,
    pub created_at: DateTime<Utc>,
}

/// A stored rule: it was checked by [`Rule::from_body`] before it was stored.
impl From<ferric_db::IntrospectionRule> for Rule {
    fn from(record: ferric_db::IntrospectionRule) -> Self {
        Self {
            uuid: record.uuid,
            description: record.description,
            scope: record.scope,
            conditions: record.conditions,
            actions: record.actions,
            created_at: record.created_at,
        }
    }
}

/// Why a rule body is refused (HTTP 400).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid rule: {0}")]
pub struct InvalidRule(pub String);

impl Rule {
    /// Checks a `POST /v1/rules` body and builds the rule.
    pub fn from_body(body: &Value) -> Result<Self, InvalidRule> {
        let object = body
            .as_object()
            .ok_or_else(|| InvalidRule("the body is not a JSON object".to_owned()))?;
        for key in object.keys() {
            if !["uuid", "description", "scope", "conditions", "actions"].contains(&key.as_str()) {
                return Err(InvalidRule(format!("unknown field \"{key}\"")));
            }
        }
        let uuid = match object.get("uuid") {
            None | Some(Value::Null) => Uuid::new_v4(),
            Some(Value::String(text)) => Uuid::parse_str(text)
                .map_err(|_| InvalidRule(format!("\"{text}\" is not a UUID")))?,
            Some(other) => return Err(InvalidRule(format!("uuid {other} is not a string"))),
        };
        let text = |key: &str| -> Result<Option<String>, InvalidRule> {
            match object.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(text)) => Ok(Some(text.clone())),
                Some(other) => Err(InvalidRule(format!("{key} {other} is not a string"))),
            }
        };
        let list = |key: &str| -> Result<Vec<JsonObject>, InvalidRule> {
            match object.get(key) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|item| {
                        item.as_object()
                            .cloned()
                            .ok_or_else(|| InvalidRule(format!("every {key} item is an object")))
                    })
                    .collect(),
                Some(_) => Err(InvalidRule(format!("{key} must be a list"))),
            }
        };
        let conditions = list("conditions")?;
        let actions = list("actions")?;
        if actions.is_empty() {
            return Err(InvalidRule("a rule needs at least one action".to_owned()));
        }
        for condition in &conditions {
            let op = condition.get("op").and_then(Value::as_str).unwrap_or("");
            if !CONDITION_OPS.contains(&op) {
                return Err(InvalidRule(format!(
                    "unknown condition op \"{op}\"; supported: {}",
                    CONDITION_OPS.join(", ")
                )));
            }
            if condition.get("field").and_then(Value::as_str).is_none() {
                return Err(InvalidRule(format!("condition \"{op}\" needs a field")));
            }
            if op != "is-empty" && !condition.contains_key("value") {
                return Err(InvalidRule(format!("condition \"{op}\" needs a value")));
            }
            if matches!(op, "contains" | "matches") {
                let pattern = condition.get("value").and_then(Value::as_str).unwrap_or("");
                regex::Regex::new(pattern)
                    .map_err(|error| InvalidRule(format!("bad regular expression: {error}")))?;
            }
            if let Some(multiple) = condition.get("multiple").and_then(Value::as_str)
                && !["any", "all", "first"].contains(&multiple)
            {
                return Err(InvalidRule(format!(
                    "multiple \"{multiple}\" is not any, all or first"
                )));
            }
        }
        for action in &actions {
            let name = action.get("action").and_then(Value::as_str).unwrap_or("");
            if !ACTIONS.contains(&name) {
                return Err(InvalidRule(format!(
                    "unknown action \"{name}\"; supported: {}",
                    ACTIONS.join(", ")
                )));
            }
            let needs: &[&str] = match name {
                "fail" => &["message"],
                "set-attribute" | "extend-attribute" => &["path", "value"],
                "set-capability" | "add-trait" | "remove-trait" => &["name"],
                _ => &[],
            };
            for param in needs {
                if !action.contains_key(*param) {
                    return Err(InvalidRule(format!("action \"{name}\" needs \"{param}\"")));
                }
            }
        }
        Ok(Self {
            uuid,
            description: text("description")?,
            scope: text("scope")?,
            conditions,
            actions,
            created_at: Utc::now(),
        })
    }

    /// The record the store keeps.
    pub fn to_record(&self) -> ferric_db::IntrospectionRule {
        ferric_db::IntrospectionRule {
            uuid: self.uuid,
            description: self.description.clone(),
            scope: self.scope.clone(),
            conditions: self.conditions.clone(),
            actions: self.actions.clone(),
            created_at: self.created_at,
        }
    }

    /// The rule as the API shows it.
    pub fn to_json(&self) -> Value {
        serde_json::json!({
            "uuid": self.uuid,
            "description": self.description,
            "scope": self.scope,
            "conditions": self.conditions,
            "actions": self.actions,
        })
    }

    /// Whether the rule applies to `node` (its `properties.inspection_scope`) and every
    /// condition holds on `data`.
    pub fn matches(&self, node: &Node, data: &Value) -> bool {
        if let Some(scope) = &self.scope {
            let node_scope = node
                .properties
                .get("inspection_scope")
                .and_then(Value::as_str);
            if node_scope != Some(scope.as_str()) {
                return false;
            }
        }
        let node_json = node_view(node);
        self.conditions
            .iter()
            .all(|condition| condition_holds(condition, data, &node_json))
    }

    /// Applies the actions to `node`. `Err`: a `fail` action, with its message.
    pub fn apply(&self, node: &mut Node, data: &Value) -> Result<(), String> {
        for action in &self.actions {
            let name = action.get("action").and_then(Value::as_str).unwrap_or("");
            let param = |key: &str| action.get(key).map(|value| format_value(value, data));
            match name {
                "fail" => {
                    let message = param("message").unwrap_or(Value::Null);
                    return Err(message
                        .as_str()
                        .map_or_else(|| message.to_string(), str::to_owned));
                }
                "set-attribute" | "extend-attribute" => {
                    let path = param("path")
                        .and_then(|path| path.as_str().map(str::to_owned))
                        .unwrap_or_default();
                    let value = param("value").unwrap_or(Value::Null);
                    let unique = action
                        .get("unique")
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    set_node_attribute(node, &path, value, name == "extend-attribute", unique)?;
                }
                "set-capability" => {
                    let capability = param("name").unwrap_or(Value::Null);
                    let value = param("value").unwrap_or(Value::Null);
                    set_capability(node, &plain(&capability), &plain(&value));
                }
                "add-trait" => {
                    let name = plain(&param("name").unwrap_or(Value::Null));
                    if !node.traits.contains(&name) {
                        node.traits.push(name);
                    }
                }
                "remove-trait" => {
                    let name = plain(&param("name").unwrap_or(Value::Null));
                    node.traits.retain(|existing| existing != &name);
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Runs `rules` in order on `node`; the first failing action's message is the error.
pub fn apply_rules(rules: &[Rule], node: &mut Node, data: &Value) -> Result<Vec<Uuid>, String> {
    let mut applied = Vec::new();
    for rule in rules {
        if rule.matches(node, data) {
            rule.apply(node, data)?;
            applied.push(rule.uuid);
        }
    }
    Ok(applied)
}

fn plain(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_owned)
}

/// The node as `node://` fields see it.
fn node_view(node: &Node) -> Value {
    serde_json::json!({
        "uuid": node.uuid,
        "name": node.name,
        "driver": node.driver,
        "driver_info": node.driver_info,
        "properties": node.properties,
        "extra": node.extra,
        "instance_info": node.instance_info,
        "traits": node.traits,
        "provision_state": node.provision_state.as_str(),
    })
}

/// The values a field names: several with `[*]`.
fn resolve<'a>(root: &'a Value, path: &str) -> Vec<&'a Value> {
    let path = path.trim_start_matches('$').trim_start_matches('.');
    let mut current = vec![root];
    for segment in path.split('.').filter(|segment| !segment.is_empty()) {
        let (name, indexes) = match segment.find('[') {
            Some(start) => (&segment[..start], &segment[start..]),
            None => (segment, ""),
        };
        if !name.is_empty() {
            current = current.into_iter().filter_map(|v| v.get(name)).collect();
        }
        for index in indexes.split(['[', ']']).filter(|index| !index.is_empty()) {
            current = if index == "*" {
                current
                    .into_iter()
                    .filter_map(Value::as_array)
                    .flatten()
                    .collect()
            } else {
                let Ok(position) = index.parse::<usize>() else {
                    return Vec::new();
                };
                current
                    .into_iter()
                    .filter_map(|value| value.get(position))
                    .collect()
            };
        }
    }
    current
}

fn condition_holds(condition: &JsonObject, data: &Value, node: &Value) -> bool {
    let field = condition
        .get("field")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let values = match field.strip_prefix("node://") {
        Some(path) => resolve(node, path),
        None => resolve(data, field.strip_prefix("data://").unwrap_or(field)),
    };
    let op = condition.get("op").and_then(Value::as_str).unwrap_or("");
    let expected = condition.get("value").unwrap_or(&Value::Null);
    let invert = condition
        .get("invert")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let check = |value: &Value| check_op(op, value, expected) != invert;
    if op == "is-empty" && values.is_empty() {
        return !invert;
    }
    match condition
        .get("multiple")
        .and_then(Value::as_str)
        .unwrap_or("any")
    {
        "all" => !values.is_empty() && values.into_iter().all(check),
        "first" => values.first().is_some_and(|value| check(value)),
        _ => values.into_iter().any(check),
    }
}

fn check_op(op: &str, value: &Value, expected: &Value) -> bool {
    let as_f64 = |v: &Value| {
        v.as_f64()
            .or_else(|| v.as_str().and_then(|text| text.trim().parse().ok()))
    };
    let compare = || as_f64(value).zip(as_f64(expected));
    match op {
        "eq" => match compare() {
            Some((a, b)) => a == b,
            None => value == expected,
        },
        "ne" => match compare() {
            Some((a, b)) => a != b,
            None => value != expected,
        },
        "lt" => compare().is_some_and(|(a, b)| a < b),
        "gt" => compare().is_some_and(|(a, b)| a > b),
        "le" => compare().is_some_and(|(a, b)| a <= b),
        "ge" => compare().is_some_and(|(a, b)| a >= b),
        "is-empty" => match value {
            Value::Null => true,
            Value::String(text) => text.is_empty(),
            Value::Array(items) => items.is_empty(),
            Value::Object(map) => map.is_empty(),
            _ => false,
        },
        "contains" | "matches" => {
            let (Some(text), Some(pattern)) = (value_text(value), expected.as_str()) else {
                return false;
            };
            let pattern = if op == "matches" {
                format!("^(?:{pattern})$")
            } else {
                pattern.to_owned()
            };
            regex::Regex::new(&pattern).is_ok_and(|regex| regex.is_match(&text))
        }
        "in-net" => {
            let (Some(address), Some(network)) = (value.as_str(), expected.as_str()) else {
                return false;
            };
            in_network(address, network)
        }
        _ => false,
    }
}

fn value_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Null => None,
        other => Some(other.to_string()),
    }
}

/// Whether `address` lies in `network` (`10.0.0.0/24`, `fd00::/8`).
fn in_network(address: &str, network: &str) -> bool {
    let Ok(address) = address.trim().parse::<IpAddr>() else {
        return false;
    };
    let Some((base, prefix)) = network.split_once('/') else {
        return false;
    };
    let (Ok(base), Ok(prefix)) = (base.trim().parse::<IpAddr>(), prefix.trim().parse::<u32>())
    else {
        return false;
    };
    match (address, base) {
        (IpAddr::V4(address), IpAddr::V4(base)) if prefix <= 32 => {
            let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
            u32::from(address) & mask == u32::from(base) & mask
        }
        (IpAddr::V6(address), IpAddr::V6(base)) if prefix <= 128 => {
            let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
            u128::from(address) & mask == u128::from(base) & mask
        }
        _ => false,
    }
}

/// Replaces `{data[a][b]}` in string parameters with the data's values.
fn format_value(value: &Value, data: &Value) -> Value {
    let Value::String(text) = value else {
        return value.clone();
    };
    if !text.contains("{data") {
        return value.clone();
    }
    let Ok(pattern) = regex::Regex::new(r"\{data((?:\[[^\]]+\])+)\}") else {
        return value.clone();
    };
    let replaced = pattern.replace_all(text, |captures: &regex::Captures<'_>| {
        let mut current = data;
        for key in captures[1].trim_matches(['[', ']']).split("][") {
            let key = key.trim_matches(['\'', '"']);
            let next = match key.parse::<usize>() {
                Ok(index) if current.is_array() => current.get(index),
                _ => current.get(key),
            };
            match next {
                Some(next) => current = next,
                None => return String::new(),
            }
        }
        plain(current)
    });
    Value::String(replaced.into_owned())
}

/// `set-attribute` / `extend-attribute` on `/properties/…`, `/extra/…`, `/driver_info/…`,
/// `/instance_info/…` or `/name`.
fn set_node_attribute(
    node: &mut Node,
    path: &str,
    value: Value,
    extend: bool,
    unique: bool,
) -> Result<(), String> {
    let mut parts: Vec<&str> = path
        .trim_start_matches('/')
        .split('/')
        .filter(|part| !part.is_empty())
        .collect();
    if parts.is_empty() {
        return Err(format!("rule action path \"{path}\" names no attribute"));
    }
    let root = parts.remove(0);
    if root == "name" && parts.is_empty() && !extend {
        node.name = value.as_str().map(str::to_owned);
        return Ok(());
    }
    let object = match root {
        "properties" => &mut node.properties,
        "extra" => &mut node.extra,
        "driver_info" => &mut node.driver_info,
        "instance_info" => &mut node.instance_info,
        other => {
            return Err(format!(
                "rule actions may not change \"{other}\"; use properties, extra, driver_info or \
                 instance_info"
            ));
        }
    };
    let Some(last) = parts.pop() else {
        return Err(format!("rule action path \"{path}\" names a whole object"));
    };
    let mut current = object;
    for part in parts {
        let entry = current
            .entry(part.to_owned())
            .or_insert_with(|| Value::Object(JsonObject::new()));
        if !entry.is_object() {
            *entry = Value::Object(JsonObject::new());
        }
        let Value::Object(next) = entry else {
            return Err(format!("rule action path \"{path}\" crosses a non-object"));
        };
        current = next;
    }
    if extend {
        let entry = current
            .entry(last.to_owned())
            .or_insert_with(|| Value::Array(Vec::new()));
        if !entry.is_array() {
            *entry = Value::Array(vec![entry.clone()]);
        }
        if let Value::Array(items) = entry
            && !(unique && items.contains(&value))
        {
            items.push(value);
        }
    } else {
        current.insert(last.to_owned(), value);
    }
    Ok(())
}

/// Sets `name:value` in `properties.capabilities` (a `k:v,k:v` string, as Ironic keeps it).
fn set_capability(node: &mut Node, name: &str, value: &str) {
    let existing = node
        .properties
        .get("capabilities")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut pairs: Vec<(String, String)> = existing
        .split(',')
        .filter_map(|pair| pair.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .filter(|(k, _)| k != name)
        .collect();
    pairs.push((name.to_owned(), value.to_owned()));
    let text = pairs
        .into_iter()
        .map(|(k, v)| format!("{k}:{v}"))
        .collect::<Vec<_>>()
        .join(",");
    node.properties
        .insert("capabilities".to_owned(), Value::String(text));
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use serde_json::json;

    fn data() -> Value {
        json!({"inventory": {
            "cpu": {"count": 4, "architecture": "x86_64"},
            "interfaces": [
                {"name": "eth0", "mac_address": "52:54:00:00:00:01", "ipv4_address": "10.0.0.5"},
                {"name": "eth1", "mac_address": "52:54:00:00:00:02", "ipv4_address": null}
            ],
            "system_vendor": {"manufacturer": "QEMU"}
        }})
    }

    fn rule(body: Value) -> Rule {
        Rule::from_body(&body).expect("valid rule")
    }

    #[test]
    fn conditions_select_and_actions_change_the_node() {
        let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::InspectWait);
        let rules = [
            rule(json!({
                "conditions": [
                    {"op": "ge", "field": "inventory.cpu.count", "value": 2},
                    {"op": "in-net", "field": "inventory.interfaces[*].ipv4_address",
                     "value": "10.0.0.0/24"},
                    {"op": "matches", "field": "data://inventory.system_vendor.manufacturer",
                     "value": "QEM."}
                ],
                "actions": [
                    {"action": "set-attribute", "path": "/extra/vendor",
                     "value": "{data[inventory][system_vendor][manufacturer]}"},
                    {"action": "add-trait", "name": "CUSTOM_QEMU"},
                    {"action": "set-capability", "name": "boot_mode", "value": "uefi"},
                    {"action": "extend-attribute", "path": "/extra/tags", "value": "a",
                     "unique": true}
                ]
            })),
            rule(json!({
                "conditions": [{"op": "gt", "field": "inventory.cpu.count", "value": 64}],
                "actions": [{"action": "fail", "message": "too big"}]
            })),
        ];
        let applied = apply_rules(&rules, &mut node, &data()).expect("no failure");
        assert_eq!(applied, vec![rules[0].uuid]);
        assert_eq!(node.extra["vendor"], "QEMU");
        assert_eq!(node.extra["tags"], json!(["a"]));
        assert_eq!(node.traits, vec!["CUSTOM_QEMU".to_owned()]);
        assert_eq!(node.properties["capabilities"], "boot_mode:uefi");
    }

    #[test]
    fn fail_actions_fail_and_multiple_all_needs_every_value() {
        let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::InspectWait);
        let all_have_ip = rule(json!({
            "conditions": [{"op": "is-empty", "field": "inventory.interfaces[*].ipv4_address",
                            "multiple": "all", "invert": true}],
            "actions": [{"action": "fail", "message": "all up"}]
        }));
        assert!(!all_have_ip.matches(&node, &data()));
        let one_lacks_ip = rule(json!({
            "conditions": [{"op": "is-empty", "field": "inventory.interfaces[*].ipv4_address"}],
            "actions": [{"action": "fail", "message": "NIC {data[inventory][interfaces][1][name]} has no IP"}]
        }));
        let error = apply_rules(&[one_lacks_ip], &mut node, &data()).unwrap_err();
        assert_eq!(error, "NIC eth1 has no IP");
    }

    #[test]
    fn scope_and_node_fields() {
        let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::InspectWait);
        let scoped = rule(json!({
            "scope": "rack1",
            "conditions": [{"op": "eq", "field": "node://driver", "value": "fake-hardware"}],
            "actions": [{"action": "set-attribute", "path": "properties/rack", "value": 1}]
        }));
        assert!(!scoped.matches(&node, &data()));
        node.properties
            .insert("inspection_scope".into(), "rack1".into());
        assert!(scoped.matches(&node, &data()));
    }

    #[test]
    fn bad_rules_are_refused() {
        for body in [
            json!({"actions": []}),
            json!({"conditions": [{"op": "nope", "field": "a", "value": 1}],
                   "actions": [{"action": "fail", "message": "x"}]}),
            json!({"actions": [{"action": "explode"}]}),
            json!({"actions": [{"action": "set-attribute", "path": "/extra/x"}]}),
            json!({"conditions": [{"op": "matches", "field": "a", "value": "("}],
                   "actions": [{"action": "fail", "message": "x"}]}),
            json!({"bogus": 1, "actions": [{"action": "fail", "message": "x"}]}),
        ] {
            assert!(Rule::from_body(&body).is_err(), "{body}");
        }
    }

    #[test]
    fn networks() {
        assert!(in_network("10.0.0.5", "10.0.0.0/24"));
        assert!(!in_network("10.0.1.5", "10.0.0.0/24"));
        assert!(in_network("fd00::1", "fd00::/8"));
        assert!(in_network("1.2.3.4", "0.0.0.0/0"));
        assert!(!in_network("nope", "10.0.0.0/8"));
    }
}
