//! `/v1/nodes/{node_ident}/traits` (1.37): list, replace, add one, remove one or all
//! (`reference/ironic.md` §2.5). Traits live in the node record; every write is a
//! revision-guarded node update, refused while a conductor holds the node.

use std::collections::BTreeSet;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header::LOCATION;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ferric_model::Microversion;
use ferric_model::resources::{Ident, Node};
use serde_json::{Value, json};

use super::ports::check_node_not_locked;
use super::{base_url, db_error};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// Ironic's `MAX_TRAITS_PER_NODE`.
pub const MAX_TRAITS_PER_NODE: usize = 50;

/// The namespaces of the standard traits (the `os-traits` library): `HW_CPU_X86_AVX2`,
/// `STORAGE_DISK_SSD`, …
// TODO-correctness: Ironic accepts exactly the names os-traits lists; we accept any
// upper-case name in one of its namespaces.
const STANDARD_NAMESPACES: &[&str] = &["COMPUTE_", "HW_", "MISC_", "NET_", "OWNER_", "STORAGE_"];

const CUSTOM_PATTERN: &str = "^CUSTOM_[A-Z0-9_]+$";

/// Checks one trait (`name` is what the error calls the input): 1–255 characters, either
/// `CUSTOM_` followed by `[A-Z0-9_]`, or a standard trait.
pub fn check_trait(name: &str, value: &str) -> Result<(), ApiError> {
    let schema_error =
        |detail: String| ApiError::bad_request(format!("Schema error for {name}: {detail}"));
    if value.is_empty() {
        return Err(schema_error(format!("'{value}' is too short")));
    }
    if value.chars().count() > 255 {
        return Err(schema_error(format!("'{value}' is too long")));
    }
    let upper_word = |rest: &str| {
        !rest.is_empty()
            && rest
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
    };
    let custom = value.strip_prefix("CUSTOM_").is_some_and(upper_word);
    let standard = STANDARD_NAMESPACES
        .iter()
        .any(|namespace| value.strip_prefix(namespace).is_some_and(upper_word));
    if custom || standard {
        return Ok(());
    }
    Err(schema_error(format!(
        "'{value}' is not valid under any of the given schemas. Possible root cause: \
         '{value}' does not match '{CUSTOM_PATTERN}'"
    )))
}

async fn traits_node(
    state: &ApiState,
    _version: Microversion,
    ident: &str,
) -> Result<Node, ApiError> {
    state
        .store
        .node_get(&Ident::parse(ident))
        .await
        .map_err(db_error)
}

/// Writes `traits` (deduplicated, sorted) as the node's traits.
async fn save_traits(
    state: &ApiState,
    node: &Node,
    traits: BTreeSet<String>,
) -> Result<(), ApiError> {
    if traits.len() > MAX_TRAITS_PER_NODE {
        return Err(ApiError::bad_request(format!(
            "Could not modify traits for node {} as it would exceed the maximum number of \
             traits per node ({} vs. {MAX_TRAITS_PER_NODE})",
            node.uuid,
            traits.len()
        )));
    }
    check_node_not_locked(&state.store, node.uuid).await?;
    // Read again once the node is free: a conductor that held it (a power change's result)
    // moved its revision meanwhile. `traits` came from `node`'s traits, which still hold unless
    // they changed too; then the write over `node`'s revision is refused as before (409).
    let fresh = state
        .store
        .node_get(&Ident::Uuid(node.uuid))
        .await
        .map_err(db_error)?;
    let base = if fresh.traits == node.traits {
        &fresh
    } else {
        node
    };
    let mut updated = base.clone();
    updated.traits = traits.into_iter().collect();
    state
        .store
        .node_update(&updated, base.version)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// `GET /v1/nodes/{node_ident}/traits`: `{"traits": [...]}`.
pub async fn trait_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let node = traits_node(&state, version, &ident).await?;
    Ok(Json(json!({ "traits": node.traits })))
}

const ONE_OR_ALL: &str = "A single node trait may be added via PUT /v1/nodes/<node identifier>/\
                          traits/<trait> with no body, or all node traits may be replaced via \
                          PUT /v1/nodes/<node identifier>/traits with the list of traits \
                          specified in the request body.";

/// `PUT /v1/nodes/{node_ident}/traits` with `{"traits": [...]}`: replaces them all. 204.
pub async fn trait_replace_all(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let node = traits_node(&state, version, &ident).await?;
    let traits = traits_body(&body, ONE_OR_ALL)?;
    save_traits(&state, &node, traits).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The `{"traits": [...]}` body of a replace-all request, each name checked; `one_or_all` is
/// the error for a body without `traits`.
pub(crate) fn traits_body(body: &[u8], one_or_all: &str) -> Result<BTreeSet<String>, ApiError> {
    let body: Value = if body.iter().all(u8::is_ascii_whitespace) {
        Value::Null
    } else {
        serde_json::from_slice(body).map_err(|error| {
            ApiError::bad_request(format!("The request body is not valid JSON: {error}"))
        })?
    };
    let Some(Value::Array(items)) = body.get("traits") else {
        return Err(match &body {
            Value::Null => ApiError::bad_request(one_or_all),
            Value::Object(object) if !object.contains_key("traits") => {
                ApiError::bad_request(one_or_all)
            }
            _ => ApiError::bad_request(
                "Schema error for body: 'traits' must be a list of trait names.",
            ),
        });
    };
    if let Some(key) = body
        .as_object()
        .and_then(|object| object.keys().find(|key| *key != "traits"))
    {
        return Err(ApiError::bad_request(format!(
            "Schema error for body: Additional properties are not allowed ('{key}' was \
             unexpected)"
        )));
    }
    let mut traits = BTreeSet::new();
    for item in items {
        let Value::String(name) = item else {
            return Err(ApiError::bad_request(format!(
                "Schema error for body: {item} is not of type 'string'"
            )));
        };
        check_trait("body", name)?;
        traits.insert(name.clone());
    }
    Ok(traits)
}

/// The checks of a request adding one trait (to a node or a runbook), made after the owner
/// was found: no body, and a valid trait name.
pub(crate) fn check_trait_add(body: &[u8], trait_name: &str) -> Result<(), ApiError> {
    if has_body(body) {
        return Err(ApiError::bad_request(
            "No body should be provided when adding a trait",
        ));
    }
    check_trait("trait", trait_name)
}

/// The answer to an added trait: 204 with the trait's URL (`path` below the API's base URL)
/// as `Location`.
pub(crate) fn trait_added(headers: &HeaderMap, path: &str) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("{}{path}", base_url(headers))) {
        response.headers_mut().insert(LOCATION, location);
    }
    response
}

/// Whether a request that must have no body has one (`{}`, `[]` and `null` count as none).
pub(crate) fn has_body(body: &[u8]) -> bool {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Null) => false,
        Ok(Value::Object(object)) => !object.is_empty(),
        Ok(Value::Array(items)) => !items.is_empty(),
        Ok(_) => true,
        Err(_) => !body.iter().all(u8::is_ascii_whitespace),
    }
}

/// `PUT /v1/nodes/{node_ident}/traits/{trait_name}` (no body): adds one. 204 with its
/// `Location`.
pub async fn trait_add(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path((ident, trait_name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let node = traits_node(&state, version, &ident).await?;
    check_trait_add(&body, &trait_name)?;
    let mut traits: BTreeSet<String> = node.traits.iter().cloned().collect();
    if traits.insert(trait_name.clone()) {
        save_traits(&state, &node, traits).await?;
    }
    Ok(trait_added(
        &headers,
        &format!("/v1/nodes/{ident}/traits/{trait_name}"),
    ))
}

/// `DELETE /v1/nodes/{node_ident}/traits/{trait_name}`: removes one; 404 if the node does not
/// have it. 204.
pub async fn trait_delete(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path((ident, trait_name)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let node = traits_node(&state, version, &ident).await?;
    let mut traits: BTreeSet<String> = node.traits.iter().cloned().collect();
    if !traits.remove(&trait_name) {
        return Err(ApiError::not_found(format!(
            "Node {} doesn't have a trait '{trait_name}'",
            node.uuid
        )));
    }
    save_traits(&state, &node, traits).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /v1/nodes/{node_ident}/traits`: removes them all. 204.
pub async fn trait_delete_all(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let node = traits_node(&state, version, &ident).await?;
    save_traits(&state, &node, BTreeSet::new()).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_and_standard_traits_are_accepted() {
        for good in [
            "CUSTOM_GPU",
            "CUSTOM_RACK_4",
            "HW_CPU_X86_AVX2",
            "STORAGE_DISK_SSD",
        ] {
            assert!(check_trait("trait", good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "CUSTOM_",
            "CUSTOM_lower",
            "custom_gpu",
            "GPU",
            "CUSTOM_GPU-1",
            &format!("CUSTOM_{}", "A".repeat(250)),
        ] {
            assert!(check_trait("trait", bad).is_err(), "{bad}");
        }
    }
}
