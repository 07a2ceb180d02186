//! `FERRIC_<NAME>` environment variables, read by the type of the setting they name.
//!
//! figment's own `Env` provider guesses a type from the text alone, so
//! `FERRIC_AGENT_VERIFY_CA=false` arrived as a boolean where the setting takes a string (the
//! server refused to start) and `FERRIC_CONDUCTOR_HOSTNAME=1234` as a number. Here the type
//! comes from the setting itself, through its built-in default: a boolean takes `true`/`false`
//! (also `yes`/`no`, `on`/`off`, `1`/`0`), a number a whole number, a list a comma-separated
//! list or a JSON array, and everything else (names, addresses, paths, choices, URLs) is text
//! as written. An optional setting (unset by default) is text, and an empty value unsets it.

use serde_json::{Map, Value};

use super::Settings;

/// The `FERRIC_*` variables naming a setting, typed, as a provider to merge over the file.
pub(crate) fn provider() -> anyhow::Result<figment::providers::Serialized<Map<String, Value>>> {
    let defaults = serde_json::to_value(Settings::default())?;
    let mut values = Map::new();
    for key in Settings::KEYS {
        let name = variable(key);
        let Some(raw) = std::env::var_os(&name) else {
            continue;
        };
        let raw = raw
            .into_string()
            .map_err(|_| anyhow::anyhow!("{name} is not valid UTF-8"))?;
        let value = parse(&name, &defaults[key], &raw).map_err(anyhow::Error::msg)?;
        values.insert(key.to_owned(), value);
    }
    Ok(figment::providers::Serialized::defaults(values))
}

/// The environment variable of setting `key`.
pub(crate) fn variable(key: &str) -> String {
    format!("FERRIC_{}", key.to_ascii_uppercase())
}

/// `raw`, the value of variable `name`, as the type of `default`.
fn parse(name: &str, default: &Value, raw: &str) -> Result<Value, String> {
    match default {
        Value::Bool(_) => parse_bool(raw)
            .map(Value::Bool)
            .ok_or_else(|| format!("{name} is '{raw}': give true or false")),
        Value::Number(_) => raw
            .trim()
            .parse::<u64>()
            .map(Value::from)
            .map_err(|_| format!("{name} is '{raw}': give a whole number (0 or more)")),
        Value::Array(_) => parse_list(name, raw).map(Value::Array),
        Value::Null if raw.is_empty() => Ok(Value::Null),
        _ => Ok(Value::String(raw.to_owned())),
    }
}

fn parse_bool(raw: &str) -> Option<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "on" | "1" => Some(true),
        "false" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// `a,b` or `["a", "b"]`; empty is the empty list.
fn parse_list(name: &str, raw: &str) -> Result<Vec<Value>, String> {
    let trimmed = raw.trim();
    if !trimmed.starts_with('[') {
        return Ok(trimmed
            .split(',')
            .map(str::trim)
            .filter(|item| !item.is_empty())
            .map(|item| Value::String(item.to_owned()))
            .collect());
    }
    let items: Vec<Value> = serde_json::from_str(trimmed).map_err(|error| {
        format!(
            "{name} is '{raw}', which is not a JSON array ({error}): give a comma-separated list \
             (a,b) or a JSON array ([\"a\", \"b\"])"
        )
    })?;
    Ok(items
        .into_iter()
        .map(|item| match item {
            Value::String(text) => Value::String(text),
            other => Value::String(other.to_string()),
        })
        .collect())
}

/// The environment form of a setting's value: what [`provider`] reads back as the same value.
#[cfg(test)]
pub(crate) fn render(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .map_or_else(|| item.to_string(), str::to_owned)
            })
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}
