//! `/v1/runbooks/{runbook_ident}/traits` (1.112): list, replace, add one, remove one or all of
//! a runbook's traits. A node may run a runbook when it has one of them (`states.rs`). Traits
//! live in the runbook record; every write is a revision-guarded runbook update. Below 1.112
//! the endpoint answers 404, as Ironic's does.

use std::collections::BTreeSet;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use ferric_model::Microversion;
use ferric_model::resources::Runbook;
use serde_json::{Value, json};

use super::db_error;
use super::runbooks::load;
use super::traits::{check_trait_add, trait_added, traits_body};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

const ONE_OR_ALL: &str = "A single runbook trait may be added via PUT /v1/runbooks/<runbook \
                          identifier>/traits/<trait> with no body, or all runbook traits may be \
                          replaced via PUT /v1/runbooks/<runbook identifier>/traits with the \
                          list of traits specified in the request body.";

async fn traits_runbook(
    state: &ApiState,
    _version: Microversion,
    ident: &str,
) -> Result<Runbook, ApiError> {
    load(state, ident).await
}

/// Writes `traits` (deduplicated, sorted) as the runbook's traits.
async fn save_traits(
    state: &ApiState,
    runbook: &Runbook,
    traits: BTreeSet<String>,
) -> Result<(), ApiError> {
    let mut updated = runbook.clone();
    updated.traits = traits.into_iter().collect();
    state
        .store
        .runbook_update(&updated, runbook.version)
        .await
        .map_err(db_error)?;
    Ok(())
}

/// `GET /v1/runbooks/{runbook_ident}/traits`: `{"traits": [...]}`.
pub async fn runbook_trait_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let runbook = traits_runbook(&state, version, &ident).await?;
    Ok(Json(json!({ "traits": runbook.traits })))
}

/// `PUT /v1/runbooks/{runbook_ident}/traits` with `{"traits": [...]}`: replaces them all. 204.
pub async fn runbook_trait_replace_all(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ApiError> {
    let runbook = traits_runbook(&state, version, &ident).await?;
    let traits = traits_body(&body, ONE_OR_ALL)?;
    save_traits(&state, &runbook, traits).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `PUT /v1/runbooks/{runbook_ident}/traits/{trait_name}` (no body): adds one. 204 with its
/// `Location`.
pub async fn runbook_trait_add(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path((ident, trait_name)): Path<(String, String)>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let runbook = traits_runbook(&state, version, &ident).await?;
    check_trait_add(&body, &trait_name)?;
    let mut traits: BTreeSet<String> = runbook.traits.iter().cloned().collect();
    if traits.insert(trait_name.clone()) {
        save_traits(&state, &runbook, traits).await?;
    }
    Ok(trait_added(
        &headers,
        &format!("/v1/runbooks/{ident}/traits/{trait_name}"),
    ))
}

/// `DELETE /v1/runbooks/{runbook_ident}/traits/{trait_name}`: removes one; removing a trait
/// the runbook does not have changes nothing (Ironic's rule for runbooks). 204.
pub async fn runbook_trait_delete(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path((ident, trait_name)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let runbook = traits_runbook(&state, version, &ident).await?;
    let mut traits: BTreeSet<String> = runbook.traits.iter().cloned().collect();
    if traits.remove(&trait_name) {
        save_traits(&state, &runbook, traits).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /v1/runbooks/{runbook_ident}/traits`: removes them all. 204.
pub async fn runbook_trait_delete_all(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let runbook = traits_runbook(&state, version, &ident).await?;
    save_traits(&state, &runbook, BTreeSet::new()).await?;
    Ok(StatusCode::NO_CONTENT)
}
