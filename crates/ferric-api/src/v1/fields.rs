//! Field tables and the helpers shared by every resource: version gates, who may write a
//! field, `?fields=` selection, typed reads of JSON input and secret masking.

use ferric_model::Microversion;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::ApiError;

/// Who may write a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// Set by the server (or the conductor) only.
    ReadOnly,
    /// Accepted in a create body, never patched (`uuid`).
    CreateOnly,
    /// Accepted at create and patchable.
    Writable,
}

/// The JSON type of a field as responses show it (the OpenAPI document is built from it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldType {
    /// A UUID string, always set.
    Uuid,
    /// A UUID string or null.
    OptUuid,
    Text,
    OptText,
    Bool,
    OptBool,
    /// An integer.
    Int,
    /// A JSON object.
    Object,
    /// A list of strings.
    StringList,
    /// An ISO 8601 timestamp.
    Time,
    OptTime,
    /// `[{"href", "rel"}]`.
    Links,
    /// A deploy template's steps: `[{interface, step, args, priority}]`.
    DeploySteps,
    /// A runbook's steps: `[{interface, step, args, order}]`.
    RunbookSteps,
    /// An inspection rule's conditions or actions: `[{op, args, loop?, multiple?}]` (null
    /// when the rule is sensitive).
    RuleItems,
}

/// One API field: its name, the minor version it appeared in, who may write it and its type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FieldSpec {
    pub(crate) name: &'static str,
    pub(crate) since: u16,
    pub(crate) access: Access,
    pub(crate) ty: FieldType,
}

pub(crate) const fn field(
    name: &'static str,
    since: u16,
    access: Access,
    ty: FieldType,
) -> FieldSpec {
    FieldSpec {
        name,
        since,
        access,
        ty,
    }
}

/// The spec of `name`, if the resource has such a field at all.
pub(crate) fn spec<'t>(table: &'t [FieldSpec], name: &str) -> Option<&'t FieldSpec> {
    table.iter().find(|spec| spec.name == name)
}

/// Whether a client at `version` sees `name`.
pub(crate) fn visible(table: &[FieldSpec], name: &str, version: Microversion) -> bool {
    spec(table, name).is_some_and(|spec| version.minor() >= spec.since)
}

/// 406 for a field (or a filter/sort on it) newer than the request's version.
pub(crate) fn require_version(
    table: &[FieldSpec],
    name: &str,
    version: Microversion,
) -> Result<(), ApiError> {
    match spec(table, name) {
        Some(spec) if version.minor() < spec.since => Err(ApiError::not_acceptable(format!(
            "'{name}' needs API version 1.{} or later; this request asked for {version}.",
            spec.since
        ))),
        _ => Ok(()),
    }
}

/// Checks that a client at `version` may write `name` (at create when `creating`, else by
/// PATCH): unknown or read-only → 400, newer than the version → 406.
pub(crate) fn check_writable(
    table: &[FieldSpec],
    resource: &str,
    name: &str,
    version: Microversion,
    creating: bool,
) -> Result<(), ApiError> {
    let Some(spec) = spec(table, name) else {
        return Err(ApiError::bad_request(format!(
            "'{name}' is not a {resource} field; remove it from the request."
        )));
    };
    require_version(table, name, version)?;
    match (spec.access, creating) {
        (Access::Writable, _) | (Access::CreateOnly, true) => Ok(()),
        _ => Err(ApiError::bad_request(format!(
            "'{name}' is a read-only {resource} field; it cannot be set by the API."
        ))),
    }
}

/// Which fields a response carries.
#[derive(Debug, Clone)]
pub(crate) enum Selection {
    /// Every field the version allows (show, detail, create and PATCH answers).
    All,
    /// Exactly these (`?fields=`, or a list's default fields). `links` is always added.
    Only(Vec<String>),
}

/// Parses `?fields=a,b`: every name must be a field visible at `version`.
pub(crate) fn parse_fields(
    table: &[FieldSpec],
    text: &str,
    version: Microversion,
) -> Result<Selection, ApiError> {
    let names: Vec<String> = text
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
        .collect();
    let invalid: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|name| !visible(table, name, version))
        .collect();
    if !invalid.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Field(s) \"{}\" are not valid",
            invalid.join(", ")
        )));
    }
    Ok(Selection::Only(names))
}

/// The selection of a `GET /v1/<resources>/{ident}`: every field, or `?fields=` (from 1.8);
/// any other query parameter is refused.
pub(crate) fn show_selection(
    table: &[FieldSpec],
    resource: &str,
    query: &[(String, String)],
    version: Microversion,
) -> Result<Selection, ApiError> {
    let mut selection = Selection::All;
    for (name, value) in query {
        if name != "fields" {
            return Err(ApiError::bad_request(format!(
                "Unknown query parameter '{name}' for showing a {resource}."
            )));
        }
        if version < Microversion::new(8) {
            return Err(ApiError::not_acceptable(format!(
                "'fields' needs API version 1.8 or later; this request asked for {version}."
            )));
        }
        selection = parse_fields(table, value, version)?;
    }
    Ok(selection)
}

/// Keeps the fields `selection` and `version` allow; `links` always stays.
pub(crate) fn select(
    table: &[FieldSpec],
    full: Map<String, Value>,
    selection: &Selection,
    version: Microversion,
) -> Map<String, Value> {
    full.into_iter()
        .filter(|(name, _)| {
            visible(table, name, version)
                && match selection {
                    Selection::All => true,
                    Selection::Only(names) => name == "links" || names.iter().any(|n| n == name),
                }
        })
        .collect()
}

/// The masking rule and the mask, shared with the conductor (`ferric_model::secrets`).
pub(crate) use ferric_model::secrets::{MASK, mask_secrets};

/// A logical name as Ironic accepts one for nodes and portgroups: 1 to 255 RFC 3986
/// unreserved characters (letters, digits, `-`, `.`, `_`, `~`).
pub(crate) fn is_valid_logical_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'))
}

// Typed reads of input values, each with a message that says what to send instead.

fn wrong_type(name: &str, expected: &str, value: &Value) -> ApiError {
    ApiError::bad_request(format!(
        "Invalid value for {name}: expected {expected}, got {value}."
    ))
}

pub(crate) fn opt_string(
    name: &str,
    value: Value,
    max_len: usize,
) -> Result<Option<String>, ApiError> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) if text.chars().count() <= max_len => Ok(Some(text)),
        Value::String(_) => Err(ApiError::bad_request(format!(
            "Invalid value for {name}: at most {max_len} characters are allowed."
        ))),
        other => Err(wrong_type(name, "a string or null", &other)),
    }
}

pub(crate) fn string(name: &str, value: Value, max_len: usize) -> Result<String, ApiError> {
    opt_string(name, value, max_len)?
        .filter(|text| !text.is_empty())
        .ok_or_else(|| ApiError::bad_request(format!("{name} is required and cannot be empty.")))
}

pub(crate) fn boolean(name: &str, value: Value) -> Result<bool, ApiError> {
    match value {
        Value::Bool(flag) => Ok(flag),
        other => Err(wrong_type(name, "true or false", &other)),
    }
}

pub(crate) fn opt_boolean(name: &str, value: Value) -> Result<Option<bool>, ApiError> {
    match value {
        Value::Null => Ok(None),
        other => boolean(name, other).map(Some),
    }
}

pub(crate) fn object(name: &str, value: Value) -> Result<Map<String, Value>, ApiError> {
    match value {
        Value::Null => Ok(Map::new()),
        Value::Object(object) => Ok(object),
        other => Err(wrong_type(name, "a JSON object", &other)),
    }
}

pub(crate) fn opt_uuid(name: &str, value: Value) -> Result<Option<Uuid>, ApiError> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Uuid::parse_str(&text).map(Some).map_err(|_| {
            ApiError::bad_request(format!("Invalid value for {name}: '{text}' is not a UUID."))
        }),
        other => Err(wrong_type(name, "a UUID string or null", &other)),
    }
}

pub(crate) fn uuid_value(uuid: Option<Uuid>) -> Value {
    uuid.map_or(Value::Null, |uuid| Value::String(uuid.to_string()))
}

pub(crate) fn opt_text_value(text: Option<&str>) -> Value {
    text.map_or(Value::Null, |text| Value::String(text.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_masked_at_any_depth() {
        let Value::Object(info) = json!({
            "redfish_password": "p",
            "redfish_address": "https://bmc",
            "nested": {"auth_token": "t", "plain": 1},
            "ssh_key": "k",
        }) else {
            unreachable!()
        };
        assert_eq!(
            mask_secrets(&info),
            json!({
                "redfish_password": MASK,
                "redfish_address": "https://bmc",
                "nested": {"auth_token": MASK, "plain": 1},
                "ssh_key": MASK,
            })
        );
    }
}
