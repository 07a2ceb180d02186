//! `/v1/deploy_templates` (1.55): named deploy step lists (`reference/ironic.md` §2.7).
//! A template's name is a trait; when a node is deployed with that trait among its
//! `instance_info.traits`, the conductor adds the template's steps to the deployment
//! (`ferric_conductor::steps`). Create, list, detail, show by UUID or name, JSON-PATCH of
//! `name`, `steps` and `extra`, delete. Below 1.55 GET answers 404 and other methods 405, as
//! Ironic does.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use ferric_db::DeployTemplateSortKey;
use ferric_model::Microversion;
use ferric_model::resources::DeployTemplate;
use serde_json::{Value, json};
use uuid::Uuid;

use super::fields::FieldType as T;
use super::fields::{
    Access::{CreateOnly, ReadOnly, Writable},
    FieldSpec, Selection, field, object, show_selection, string,
};
use super::patch::parse_patch;
use super::resource::{
    Page, Resource, apply_create_body, apply_patch, check_create_body, check_patch, created,
    list_body, list_params, record_json,
};
use super::step_lists::{check_steps, deploy_steps, parse_ident, step_json};
use super::traits::check_trait;
use super::{base_url, db_error, json_object_body, links, opt_timestamp, timestamp};
use crate::endpoints::since;
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

pub(crate) const DEPLOY_TEMPLATES_SINCE: u16 = since::DEPLOY_TEMPLATES.minor();

pub(crate) const DEPLOY_TEMPLATE_FIELDS: &[FieldSpec] = &[
    field("uuid", DEPLOY_TEMPLATES_SINCE, CreateOnly, T::Uuid),
    field("name", DEPLOY_TEMPLATES_SINCE, Writable, T::Text),
    field("steps", DEPLOY_TEMPLATES_SINCE, Writable, T::DeploySteps),
    field("extra", DEPLOY_TEMPLATES_SINCE, Writable, T::Object),
    field("created_at", DEPLOY_TEMPLATES_SINCE, ReadOnly, T::Time),
    field("updated_at", DEPLOY_TEMPLATES_SINCE, ReadOnly, T::OptTime),
    field("links", DEPLOY_TEMPLATES_SINCE, ReadOnly, T::Links),
];

impl Resource for DeployTemplate {
    type SortKey = DeployTemplateSortKey;
    const NAME: &'static str = "deploy template";
    const COLLECTION: &'static str = "deploy_templates";
    const FIELDS: &'static [FieldSpec] = DEPLOY_TEMPLATE_FIELDS;
    const DEFAULT_LIST_FIELDS: &'static [&'static str] = &["uuid", "name"];
    const UNSORTABLE: &'static [&'static str] = &["extra", "steps"];

    fn uuid(&self) -> Uuid {
        self.uuid
    }

    fn field_json(&self, name: &str, _version: Microversion, base: &str) -> Value {
        shown(self, name, base, true)
    }

    fn field_value(&self, name: &str, _version: Microversion) -> Value {
        shown(self, name, "", false)
    }

    fn set_field(&mut self, name: &str, value: Value) -> Result<(), ApiError> {
        match name {
            "uuid" => self.uuid = super::step_lists::uuid_or_new(value)?,
            "name" => {
                let text = string(name, value, 255)?;
                check_trait(name, &text)?;
                self.name = text;
            }
            "steps" => self.steps = deploy_steps(name, value)?,
            "extra" => self.extra = object(name, value)?,
            other => {
                return Err(ApiError::bad_request(format!(
                    "'{other}' cannot be set on a deploy template."
                )));
            }
        }
        Ok(())
    }
}

/// One field of `template` as shown (`masked`: secrets in step arguments hidden).
fn shown(template: &DeployTemplate, name: &str, base: &str, masked: bool) -> Value {
    match name {
        "uuid" => json!(template.uuid),
        "name" => json!(template.name),
        "steps" => Value::Array(
            template
                .steps
                .iter()
                .map(|step| {
                    step_json(
                        &step.interface,
                        &step.step,
                        &step.args,
                        ("priority", step.priority),
                        masked,
                    )
                })
                .collect(),
        ),
        "extra" => Value::Object(template.extra.clone()),
        "created_at" => timestamp(template.created_at),
        "updated_at" => opt_timestamp(template.updated_at),
        "links" => links(base, &format!("deploy_templates/{}", template.uuid)),
        _ => Value::Null,
    }
}

/// The rules on the whole template (after a create body or a PATCH): at least one step and
/// no `interface.step` twice.
fn check_template(template: &DeployTemplate) -> Result<(), ApiError> {
    check_steps(
        "deploy template",
        template
            .steps
            .iter()
            .map(|step| (step.interface.as_str(), step.step.as_str())),
    )
    .map_err(|why| ApiError::bad_request(format!("Deploy template invalid: {why}.")))
}

async fn list(
    state: &ApiState,
    version: Microversion,
    headers: &HeaderMap,
    query: &[(String, String)],
    detail_path: bool,
) -> Result<Json<Value>, ApiError> {
    let (params, selection) = list_params::<DeployTemplate>(query, version, detail_path)?;
    if let Some((name, _)) = params.filters.first() {
        return Err(ApiError::bad_request(format!(
            "Unknown query parameter '{name}' for listing deploy templates."
        )));
    }
    let templates = state
        .store
        .deploy_template_list(&params.page)
        .await
        .map_err(db_error)?;
    let base = base_url(headers);
    let page = Page {
        version,
        selection: &selection,
        base: &base,
        path: if detail_path {
            "deploy_templates/detail"
        } else {
            "deploy_templates"
        },
        query,
        limit: params.limit,
    };
    Ok(Json(list_body(&templates, &page)))
}

/// `GET /v1/deploy_templates`: `uuid` and `name`, or `?fields=` / `?detail=true`.
pub async fn deploy_template_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, false).await
}

/// `GET /v1/deploy_templates/detail`: every field.
pub async fn deploy_template_list_detail(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, true).await
}

async fn load(state: &ApiState, ident: &str) -> Result<DeployTemplate, ApiError> {
    state
        .store
        .deploy_template_get(&parse_ident(ident)?)
        .await
        .map_err(db_error)
}

/// `GET /v1/deploy_templates/{template_ident}` (UUID or name; `?fields=`).
pub async fn deploy_template_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let selection = show_selection(DEPLOY_TEMPLATE_FIELDS, "deploy template", &query, version)?;
    let template = load(&state, &ident).await?;
    Ok(Json(record_json(
        &template,
        version,
        &selection,
        &base_url(&headers),
    )))
}

/// `POST /v1/deploy_templates`: 201 with the template and its `Location`; 409 when the name
/// (or UUID) is taken.
pub async fn deploy_template_create(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_object_body(&body)?;
    check_create_body::<DeployTemplate>(&body, version, &["name", "steps"])?;
    let mut template = DeployTemplate::new(Uuid::new_v4());
    apply_create_body(&mut template, body)?;
    check_template(&template)?;
    let saved = state
        .store
        .deploy_template_create(&template)
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    let body = record_json(&saved, version, &Selection::All, &base);
    Ok(created(&saved, body, &base))
}

/// `PATCH /v1/deploy_templates/{template_ident}`: `name`, `steps` (whole or one step's
/// field) and `extra`, revision-guarded.
pub async fn deploy_template_update(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let ops = parse_patch(&body)?;
    check_patch::<DeployTemplate>(&ops, version)?;
    let template = load(&state, &ident).await?;
    let updated = apply_patch(&template, &ops, version)?;
    check_template(&updated)?;
    let saved = state
        .store
        .deploy_template_update(&updated, template.version)
        .await
        .map_err(db_error)?;
    Ok(Json(record_json(
        &saved,
        version,
        &Selection::All,
        &base_url(&headers),
    )))
}

/// `DELETE /v1/deploy_templates/{template_ident}`: 204.
pub async fn deploy_template_delete(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let template = load(&state, &ident).await?;
    state
        .store
        .deploy_template_delete(template.uuid)
        .await
        .map_err(db_error)?;
    Ok(StatusCode::NO_CONTENT)
}
