//! The Bare Metal API v1 resources (`reference/ironic.md` §2.4–2.7): nodes and their
//! sub-resources (traits, VIFs, history), ports, portgroups, chassis, conductors, allocations,
//! deploy templates and runbooks.
//!
//! Theory of operation: each resource has one field table ([`fields::FieldSpec`]) naming every
//! API field, the microversion it appeared in and whether callers may write it. Responses,
//! `?fields=`, create bodies, PATCH paths, filters and `sort_key` all consult that table, so a
//! field's version gate lives in exactly one place. Records are turned into JSON field by
//! field, newer fields are dropped for older clients, and secrets are masked last. The
//! machinery that drives a field table (listing, selection, create, PATCH) is generic, in
//! [`resource`]; a resource module adds only its own rules.
//!
//! Handlers never write `provision_state` except the initial state at create: state changes
//! belong to the conductor.

pub mod allocations;
pub(crate) mod body;
pub mod chassis;
pub mod children;
pub mod conductors;
pub mod console;
pub mod deploy_templates;
pub mod drivers;
pub(crate) mod fields;
pub mod history;
pub mod inspection_rules;
pub mod node_data;
pub(crate) mod node_document;
pub(crate) mod node_fields;
pub mod node_management;
pub mod nodes;
pub(crate) mod paging;
pub(crate) mod patch;
pub(crate) mod port_fields;
pub(crate) mod portgroup_fields;
pub mod portgroups;
pub mod ports;
pub mod raid;
pub mod ramdisk;
pub(crate) mod rendered;
pub(crate) mod resource;
pub mod runbook_traits;
pub mod runbooks;
pub mod states;
pub(crate) mod step_lists;
pub mod traits;
pub mod vendor;
pub mod vifs;
pub mod vmedia;
pub mod volumes;

use axum::http::HeaderMap;
use axum::http::header::HOST;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use crate::ApiError;

/// The base URL clients used to reach us, from the `Host` header.
// TODO-correctness: a `public_url` setting for deployments behind a TLS-terminating proxy.
pub(crate) fn base_url(headers: &HeaderMap) -> String {
    let host = headers
        .get(HOST)
        .and_then(|host| host.to_str().ok())
        .unwrap_or("localhost");
    format!("http://{host}")
}

/// The `self` + `bookmark` links of one resource (`nodes/<uuid>`, `nodes/<uuid>/ports`).
pub(crate) fn links(base: &str, path: &str) -> Value {
    json!([
        { "href": format!("{base}/v1/{path}"), "rel": "self" },
        { "href": format!("{base}/{path}"), "rel": "bookmark" },
    ])
}

/// Ironic's timestamps: ISO 8601 with microseconds and an explicit `+00:00` offset.
pub(crate) fn timestamp(time: DateTime<Utc>) -> Value {
    // As Python's `isoformat()`, which Ironic uses: no fraction when it is zero (MySQL's
    // `DATETIME`, which Ironic's tables use there, keeps whole seconds only).
    let format = if time.timestamp_subsec_micros() == 0 {
        SecondsFormat::Secs
    } else {
        SecondsFormat::Micros
    };
    Value::String(time.to_rfc3339_opts(format, false))
}

pub(crate) fn opt_timestamp(time: Option<DateTime<Utc>>) -> Value {
    time.map_or(Value::Null, timestamp)
}

/// A request body that must be a JSON object.
pub(crate) fn json_object_body(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        ApiError::bad_request(format!("The request body is not valid JSON: {error}"))
    })?;
    match value {
        Value::Object(object) => Ok(object),
        _ => Err(ApiError::bad_request(
            "The request body must be a JSON object.",
        )),
    }
}

/// Maps a storage error to what the caller sees: missing → 404, duplicates and races → 409,
/// a stale marker → 400, anything else → 500 (logged, not shown).
pub(crate) fn db_error(error: ferric_db::Error) -> ApiError {
    use ferric_db::{Error, Kind};
    match error {
        Error::NotFound {
            kind: Kind::NodeHistory,
            ident,
        } => ApiError::not_found(format!("Node history record {ident} could not be found.")),
        Error::NotFound { kind, ident } => {
            ApiError::not_found(format!("{} {ident} could not be found.", capitalized(kind)))
        }
        Error::Duplicate {
            kind: kind @ (Kind::Port | Kind::Portgroup),
            field: "address",
            value,
        } => ApiError::conflict(format!("A {kind} with MAC address {value} already exists.")),
        // Ironic's ChassisNotEmpty and PortgroupNotEmpty are "Invalid" errors: 400, not 409.
        Error::InUse {
            kind: kind @ (Kind::Chassis | Kind::Portgroup),
            ident,
            dependents,
        } => ApiError::bad_request(format!(
            "Cannot complete the requested action because {kind} {ident} contains {dependents}."
        )),
        Error::Duplicate {
            kind: Kind::Node,
            field: "instance_uuid",
            value,
        } => ApiError::conflict(format!(
            "Instance {value} is already associated with a node."
        )),
        Error::Duplicate {
            kind: Kind::VolumeTarget,
            field: "boot_index",
            value,
        } => ApiError::conflict(format!(
            "A volume target with boot index '{value}' for the same node already exists."
        )),
        Error::Duplicate { kind, field, value } => {
            let field = if field == "uuid" { "UUID" } else { field };
            ApiError::conflict(format!("A {kind} with {field} {value} already exists."))
        }
        Error::StaleRevision { kind, ident, .. } => ApiError::conflict(format!(
            "{} {ident} was changed by another request while this one was processed; read it \
             again and retry.",
            capitalized(kind)
        )),
        error @ Error::MarkerNotFound { .. } => ApiError::bad_request(error.to_string()),
        error if error.is_conflict() => ApiError::conflict(error.to_string()),
        error => ApiError::internal(&error),
    }
}

fn capitalized(kind: ferric_db::Kind) -> String {
    let text = kind.as_str();
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// `true`/`false` query values as Ironic accepts them (`strutils.bool_from_string`, strict).
pub(crate) fn parse_bool_param(name: &str, value: &str) -> Result<bool, ApiError> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "y" | "t" => Ok(true),
        "false" | "0" | "no" | "off" | "n" | "f" => Ok(false),
        _ => Err(ApiError::bad_request(format!(
            "Invalid value for {name}: '{value}' is not a boolean (use true or false)."
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use ferric_db::{Error, Kind};

    #[test]
    fn storage_errors_map_to_caller_statuses() {
        let not_found = db_error(Error::NotFound {
            kind: Kind::Node,
            ident: "n1".to_owned(),
        });
        assert_eq!(not_found.status, StatusCode::NOT_FOUND);
        assert_eq!(not_found.message, "Node n1 could not be found.");
        let stale = db_error(Error::StaleRevision {
            kind: Kind::Node,
            ident: "n1".to_owned(),
            expected: 1,
            actual: 2,
        });
        assert_eq!(stale.status, StatusCode::CONFLICT);
        let duplicate = db_error(Error::Duplicate {
            kind: Kind::Node,
            field: "name",
            value: "n1".to_owned(),
        });
        assert_eq!(duplicate.status, StatusCode::CONFLICT);
        assert_eq!(duplicate.message, "A node with name n1 already exists.");
    }
}
