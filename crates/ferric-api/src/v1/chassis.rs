//! `/v1/chassis` and `/v1/chassis/{chassis_uuid}/nodes`: create, list, detail, show, PATCH,
//! delete (`reference/ironic.md` §2.7). A chassis is named by UUID only; it cannot be
//! deleted while nodes belong to it.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use ferric_db::ChassisSortKey;
use ferric_model::Microversion;
use ferric_model::resources::Chassis;
use serde_json::{Value, json};
use uuid::Uuid;

use super::fields::FieldType as T;
use super::fields::{
    Access::{CreateOnly, ReadOnly, Writable},
    FieldSpec, Selection, field, object, opt_string, opt_text_value, opt_uuid, show_selection,
};
use super::paging::ProjectScope;
use super::patch::parse_patch;
use super::resource::{
    Page, Resource, apply_create_body, apply_patch, check_create_body, check_patch, created,
    list_body, list_params, record_json,
};
use super::{base_url, db_error, json_object_body, links, nodes, opt_timestamp, timestamp};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// Every chassis field; all date from 1.1.
pub(crate) const CHASSIS_FIELDS: &[FieldSpec] = &[
    field("uuid", 1, CreateOnly, T::Uuid),
    field("description", 1, Writable, T::OptText),
    field("extra", 1, Writable, T::Object),
    field("created_at", 1, ReadOnly, T::Time),
    field("updated_at", 1, ReadOnly, T::OptTime),
    field("links", 1, ReadOnly, T::Links),
    field("nodes", 1, ReadOnly, T::Links),
];

impl Resource for Chassis {
    type SortKey = ChassisSortKey;
    const NAME: &'static str = "chassis";
    const COLLECTION: &'static str = "chassis";
    const FIELDS: &'static [FieldSpec] = CHASSIS_FIELDS;
    const DEFAULT_LIST_FIELDS: &'static [&'static str] = &["uuid", "description"];
    const UNSORTABLE: &'static [&'static str] = &["extra"];

    fn uuid(&self) -> Uuid {
        self.uuid
    }

    fn field_json(&self, name: &str, _version: Microversion, base: &str) -> Value {
        match name {
            "uuid" => json!(self.uuid),
            "description" => opt_text_value(self.description.as_deref()),
            "extra" => Value::Object(self.extra.clone()),
            "created_at" => timestamp(self.created_at),
            "updated_at" => opt_timestamp(self.updated_at),
            "links" => links(base, &format!("chassis/{}", self.uuid)),
            // Ironic shows these links inside a second list (a tuple in its chassis
            // controller, serialized as a list): clients written against it expect that shape.
            "nodes" => Value::Array(vec![links(base, &format!("chassis/{}/nodes", self.uuid))]),
            _ => Value::Null,
        }
    }

    fn field_value(&self, name: &str, version: Microversion) -> Value {
        self.field_json(name, version, "")
    }

    fn set_field(&mut self, name: &str, value: Value) -> Result<(), ApiError> {
        match name {
            "uuid" => {
                self.uuid = opt_uuid(name, value)?
                    .ok_or_else(|| ApiError::bad_request("uuid cannot be null."))?;
            }
            "description" => self.description = opt_string(name, value, 255)?,
            "extra" => self.extra = object(name, value)?,
            other => {
                return Err(ApiError::bad_request(format!(
                    "'{other}' cannot be set by the API."
                )));
            }
        }
        Ok(())
    }
}

/// Chassis are named by UUID only (Ironic's `args.uuid`).
fn chassis_uuid(text: &str) -> Result<Uuid, ApiError> {
    Uuid::parse_str(text)
        .map_err(|_| ApiError::bad_request(format!("Expected a UUID but received {text}.")))
}

async fn list(
    state: &ApiState,
    version: Microversion,
    headers: &HeaderMap,
    query: &[(String, String)],
    detail_path: bool,
) -> Result<Json<Value>, ApiError> {
    let (params, selection) = list_params::<Chassis>(query, version, detail_path)?;
    if let Some((name, _)) = params.filters.first() {
        return Err(ApiError::bad_request(format!(
            "Unknown query parameter '{name}' for listing chassis."
        )));
    }
    let chassis = state
        .store
        .chassis_list(&params.page)
        .await
        .map_err(db_error)?;
    let base = base_url(headers);
    let path = if detail_path {
        "chassis/detail"
    } else {
        "chassis"
    };
    let page = Page {
        version,
        selection: &selection,
        base: &base,
        path,
        query,
        limit: params.limit,
    };
    Ok(Json(list_body(&chassis, &page)))
}

/// `GET /v1/chassis`: default fields (`uuid`, `description`) or `?fields=`.
pub async fn chassis_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, false).await
}

/// `GET /v1/chassis/detail`: every field.
pub async fn chassis_list_detail(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, true).await
}

/// `GET /v1/chassis/{chassis_uuid}` (`?fields=` from 1.8).
pub async fn chassis_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let uuid = chassis_uuid(&ident)?;
    let selection = show_selection(CHASSIS_FIELDS, "chassis", &query, version)?;
    let chassis = state.store.chassis_get(uuid).await.map_err(db_error)?;
    Ok(Json(record_json(
        &chassis,
        version,
        &selection,
        &base_url(&headers),
    )))
}

/// `GET /v1/chassis/{chassis_uuid}/nodes`: the chassis's nodes, as `/v1/nodes` shows them.
pub async fn chassis_node_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    scope: ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let chassis = state
        .store
        .chassis_get(chassis_uuid(&ident)?)
        .await
        .map_err(db_error)?;
    let chassis = Some(chassis.uuid);
    nodes::list(&state, version, &headers, &query, false, chassis, &scope).await
}

/// `GET /v1/chassis/{chassis_uuid}/nodes/detail`.
pub async fn chassis_node_list_detail(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    scope: ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Response, ApiError> {
    let chassis = state
        .store
        .chassis_get(chassis_uuid(&ident)?)
        .await
        .map_err(db_error)?;
    let chassis = Some(chassis.uuid);
    nodes::list(&state, version, &headers, &query, true, chassis, &scope).await
}

/// `POST /v1/chassis`: 201 with the new chassis and its `Location`.
pub async fn chassis_create(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_object_body(&body)?;
    check_create_body::<Chassis>(&body, version, &[])?;
    let mut chassis = Chassis::new(Uuid::new_v4());
    apply_create_body(&mut chassis, body)?;
    let saved = state
        .store
        .chassis_create(&chassis)
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    let body = record_json(&saved, version, &Selection::All, &base);
    Ok(created(&saved, body, &base))
}

/// `PATCH /v1/chassis/{chassis_uuid}`: `description` and `extra`, revision-guarded.
pub async fn chassis_update(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let uuid = chassis_uuid(&ident)?;
    let ops = parse_patch(&body)?;
    check_patch::<Chassis>(&ops, version)?;
    let chassis = state.store.chassis_get(uuid).await.map_err(db_error)?;
    let updated = apply_patch(&chassis, &ops, version)?;
    let saved = state
        .store
        .chassis_update(&updated, chassis.version)
        .await
        .map_err(db_error)?;
    Ok(Json(record_json(
        &saved,
        version,
        &Selection::All,
        &base_url(&headers),
    )))
}

/// `DELETE /v1/chassis/{chassis_uuid}`: 204; 400 while nodes still belong to it (Ironic's
/// ChassisNotEmpty).
pub async fn chassis_delete(
    State(state): State<ApiState>,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let uuid = chassis_uuid(&ident)?;
    state.store.chassis_delete(uuid).await.map_err(db_error)?;
    Ok(StatusCode::NO_CONTENT)
}
