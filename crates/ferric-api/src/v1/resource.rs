//! The handler machinery every field-table resource shares (nodes, ports, portgroups,
//! chassis): record → JSON with version hiding and `?fields=`, list parameters and the
//! collection body, closed create bodies, PATCH application, and the 201 answer.
//!
//! Theory of operation: a resource implements [`Resource`] on its record type — its field
//! table, its default list fields, how one record becomes JSON and how one checked field is
//! written. The generic functions here do the rest the same way for every resource, so a
//! field's version gate, a PATCH path's checks and a listing's paging rules exist once.
//! Resource-specific rules (node state checks, referenced records that must exist, …) stay in
//! the resource's handler module and run before or after these steps.

use std::str::FromStr;

use axum::Json;
use axum::http::header::LOCATION;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use ferric_db::UnknownSortKey;
use ferric_model::Microversion;
use serde_json::{Map, Value};
use uuid::Uuid;

use super::fields::{FieldSpec, Selection, check_writable};
use super::paging::{ListParams, collection_body, parse_list_params};
use super::patch::{OpKind, PatchOp, apply_nested};
use crate::ApiError;

/// A resource served from a field table.
pub(crate) trait Resource: Clone {
    /// What a listing may be sorted by (the storage's sort-key enum).
    type SortKey: FromStr<Err = UnknownSortKey> + Default;

    /// Singular and lowercase, as messages name it (`"port"`).
    const NAME: &'static str;
    /// The collection's path segment and JSON key (`"ports"`).
    const COLLECTION: &'static str;
    /// Every API field with its microversion and access.
    const FIELDS: &'static [FieldSpec];
    /// What a list shows without `?fields=` or `detail` (plus `links`).
    const DEFAULT_LIST_FIELDS: &'static [&'static str];
    /// Fields that cannot be sort keys (JSON documents).
    const UNSORTABLE: &'static [&'static str];

    fn uuid(&self) -> Uuid;

    /// One field as responses show it (computed fields included, secrets masked), before
    /// version hiding.
    fn field_json(&self, name: &str, version: Microversion, base: &str) -> Value;

    /// One field's stored value, unmasked: what a PATCH below the top level edits.
    fn field_value(&self, name: &str, version: Microversion) -> Value;

    /// Writes one field from JSON after checking its type and rules (`null` unsets or
    /// restores the default). Access and version were checked by the caller.
    fn set_field(&mut self, name: &str, value: Value) -> Result<(), ApiError>;
}

/// The record as a client at `version` sees it, restricted to `selection`. Only the fields
/// shown are computed: a listing of 1,000 nodes with `?fields=uuid` builds two values per node,
/// not seventy.
pub(crate) fn record_json<R: Resource>(
    record: &R,
    version: Microversion,
    selection: &Selection,
    base: &str,
) -> Value {
    let mut shown = Map::new();
    for spec in R::FIELDS {
        if version.minor() < spec.since {
            continue;
        }
        let wanted = match selection {
            Selection::All => true,
            // Link lists (a node's `ports`, …) too are shown only when named.
            Selection::Only(names) => {
                spec.name == "links" || names.iter().any(|name| name == spec.name)
            }
        };
        if wanted {
            shown.insert(
                spec.name.to_owned(),
                record.field_json(spec.name, version, base),
            );
        }
    }
    Value::Object(shown)
}

/// The paging part of a listing and the fields it shows. `detail_path` is
/// `/v1/<collection>/detail`, which always shows every field.
pub(crate) fn list_params<R: Resource>(
    query: &[(String, String)],
    version: Microversion,
    detail_path: bool,
) -> Result<(ListParams<R::SortKey>, Selection), ApiError> {
    let params = parse_list_params::<R::SortKey>(query, R::FIELDS, R::UNSORTABLE, version)?;
    if detail_path && params.selection.is_some() {
        return Err(ApiError::bad_request(format!(
            "/v1/{}/detail always shows every field; drop 'fields' and 'detail'.",
            R::COLLECTION
        )));
    }
    let selection = match (&params.selection, detail_path) {
        (_, true) => Selection::All,
        (Some(selection), false) => selection.clone(),
        (None, false) => Selection::Only(
            R::DEFAULT_LIST_FIELDS
                .iter()
                .map(|&name| name.to_owned())
                .collect(),
        ),
    };
    Ok((params, selection))
}

/// What a listing handler needs to answer one page.
pub(crate) struct Page<'a> {
    pub(crate) version: Microversion,
    pub(crate) selection: &'a Selection,
    pub(crate) base: &'a str,
    /// The listing's path below `/v1/` (`ports`, `nodes/<uuid>/ports`), for the `next` link.
    pub(crate) path: &'a str,
    pub(crate) query: &'a [(String, String)],
    pub(crate) limit: u32,
}

/// `{"<collection>": [...], "next": ...}` for records already shown as JSON.
pub(crate) fn list_body_of<R: Resource>(
    records: &[R],
    items: Vec<Value>,
    page: &Page<'_>,
) -> Value {
    let last = records.last().map(|record| record.uuid().to_string());
    collection_body(
        R::COLLECTION,
        items,
        page.base,
        page.path,
        page.query,
        page.limit,
        last,
    )
}

/// `{"<collection>": [...], "next": ...}` for one page of records.
pub(crate) fn list_body<R: Resource>(records: &[R], page: &Page<'_>) -> Value {
    let items = records
        .iter()
        .map(|record| record_json(record, page.version, page.selection, page.base))
        .collect();
    list_body_of(records, items, page)
}

/// Checks a create body against the closed schema (every key a field this version may set
/// at create) and that the `required` keys are present.
pub(crate) fn check_create_body<R: Resource>(
    body: &Map<String, Value>,
    version: Microversion,
    required: &[&str],
) -> Result<(), ApiError> {
    for name in body.keys() {
        check_writable(R::FIELDS, R::NAME, name, version, true)?;
    }
    match required.iter().find(|name| !body.contains_key(**name)) {
        Some(name) => Err(ApiError::bad_request(format!(
            "Mandatory field missing: '{name}'."
        ))),
        None => Ok(()),
    }
}

/// Writes every key of a checked create body into `record`.
pub(crate) fn apply_create_body<R: Resource>(
    record: &mut R,
    body: Map<String, Value>,
) -> Result<(), ApiError> {
    for (name, value) in body {
        record.set_field(&name, value)?;
    }
    Ok(())
}

/// Checks every PATCH path against the field table (unknown or read-only → 400, too new →
/// 406) before anything is read.
pub(crate) fn check_patch<R: Resource>(
    ops: &[PatchOp],
    version: Microversion,
) -> Result<(), ApiError> {
    for op in ops {
        check_writable(R::FIELDS, R::NAME, &op.field, version, false)?;
    }
    Ok(())
}

/// `record` with `ops` applied in order: a whole-field op writes the field (remove = `null`),
/// a deeper op edits the field's current value first.
pub(crate) fn apply_patch<R: Resource>(
    record: &R,
    ops: &[PatchOp],
    version: Microversion,
) -> Result<R, ApiError> {
    let mut updated = record.clone();
    for op in ops {
        let value = if op.rest.is_empty() {
            match op.op {
                OpKind::Add | OpKind::Replace => op.value.clone().unwrap_or(Value::Null),
                OpKind::Remove => Value::Null,
            }
        } else {
            apply_nested(updated.field_value(&op.field, version), op)?
        };
        updated.set_field(&op.field, value)?;
    }
    Ok(updated)
}

/// 201 with the new record and its `Location`.
pub(crate) fn created<R: Resource>(record: &R, body: Value, base: &str) -> Response {
    let location = format!("{base}/v1/{}/{}", R::COLLECTION, record.uuid());
    let mut response = (StatusCode::CREATED, Json(body)).into_response();
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(LOCATION, location);
    }
    response
}

/// Whether `name` is one of `filters` (each paired with the minor version it appeared in);
/// 406 when it is newer than the request's version. Unknown names are the caller's to judge.
pub(crate) fn known_filter(
    collection: &str,
    filters: &[(&str, u16)],
    name: &str,
    version: Microversion,
) -> Result<bool, ApiError> {
    let Some((_, since)) = filters.iter().find(|(filter, _)| *filter == name) else {
        return Ok(false);
    };
    if version.minor() < *since {
        return Err(ApiError::not_acceptable(format!(
            "Filtering {collection} by '{name}' needs API version 1.{since} or later; this \
             request asked for {version}."
        )));
    }
    Ok(true)
}

/// 404 for an endpoint newer than the request's version, as Ironic hides them.
pub(crate) fn require_endpoint(
    version: Microversion,
    since: u16,
    path: &str,
) -> Result<(), ApiError> {
    if version.minor() < since {
        return Err(ApiError::not_found(format!(
            "The resource could not be found: {path} (it needs API version 1.{since} or later; \
             this request asked for {version})."
        )));
    }
    Ok(())
}
