//! `/v1/runbooks` (1.92): named manual clean/service step lists (`reference/ironic.md` §2.7).
//! A node may run a runbook (`PUT …/states/provision` with `runbook`, `states.rs`) when one of
//! its traits is the runbook's name — from 1.112, when it has one of the runbook's `traits`
//! (set through `/v1/runbooks/{runbook}/traits`, `runbook_traits.rs`); the steps run in
//! ascending `order`. From 1.112 a runbook also has a `description`, and a new runbook's name
//! need only be a logical name (before, it must be a trait).
//!
//! Ownership, as Ironic: a runbook has an `owner` project or is `public` (never both). A
//! project-scoped caller creates runbooks owned by its own project and cannot make them
//! public; listings for such a caller hold its project's runbooks and the public ones
//! (`authz.rs` checks `baremetal:runbook:*` against the runbook's owner). Below 1.92 GET
//! answers 404 and other methods 405.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::{Extension, Json};
use ferric_db::{RunbookFilter, RunbookSortKey};
use ferric_model::Microversion;
use ferric_model::microversion::gate;
use ferric_model::resources::Runbook;
use serde_json::{Value, json};
use uuid::Uuid;

use super::fields::FieldType as T;
use super::fields::{
    Access::{CreateOnly, ReadOnly, Writable},
    FieldSpec, Selection, boolean, field, object, opt_string, opt_text_value, show_selection,
    string,
};
use super::paging::ProjectScope;
use super::patch::{OpKind, parse_patch};
use super::resource::{
    Page, Resource, apply_create_body, apply_patch, check_create_body, check_patch, created,
    list_body, list_params, record_json,
};
use super::step_lists::{check_steps, parse_ident, runbook_steps, step_json};
use super::traits::check_trait;
use super::{base_url, db_error, json_object_body, links, opt_timestamp, timestamp};
use crate::endpoints::since;
use crate::policy::{Caller, Role};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

pub(crate) const RUNBOOKS_SINCE: u16 = since::RUNBOOKS.minor();
/// Runbook `traits`, `description` and any logical name (1.112).
pub(crate) const RUNBOOK_TRAITS_SINCE: u16 = gate::RUNBOOK_TRAITS.minor();

pub(crate) const RUNBOOK_FIELDS: &[FieldSpec] = &[
    field("uuid", RUNBOOKS_SINCE, CreateOnly, T::Uuid),
    field("name", RUNBOOKS_SINCE, Writable, T::Text),
    field("description", RUNBOOK_TRAITS_SINCE, Writable, T::OptText),
    field("traits", RUNBOOK_TRAITS_SINCE, ReadOnly, T::StringList),
    field("steps", RUNBOOKS_SINCE, Writable, T::RunbookSteps),
    field("disable_ramdisk", RUNBOOKS_SINCE, Writable, T::Bool),
    field("extra", RUNBOOKS_SINCE, Writable, T::Object),
    field("public", RUNBOOKS_SINCE, Writable, T::Bool),
    field("owner", RUNBOOKS_SINCE, Writable, T::OptText),
    field("created_at", RUNBOOKS_SINCE, ReadOnly, T::Time),
    field("updated_at", RUNBOOKS_SINCE, ReadOnly, T::OptTime),
    field("links", RUNBOOKS_SINCE, ReadOnly, T::Links),
];

impl Resource for Runbook {
    type SortKey = RunbookSortKey;
    const NAME: &'static str = "runbook";
    const COLLECTION: &'static str = "runbooks";
    const FIELDS: &'static [FieldSpec] = RUNBOOK_FIELDS;
    const DEFAULT_LIST_FIELDS: &'static [&'static str] = &["uuid", "name"];
    const UNSORTABLE: &'static [&'static str] = &["extra", "steps", "traits"];

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
                check_runbook_name(name, &text)?;
                self.name = text;
            }
            "description" => self.description = opt_string(name, value, 255)?,
            "steps" => self.steps = runbook_steps(name, value)?,
            "disable_ramdisk" => self.disable_ramdisk = !value.is_null() && boolean(name, value)?,
            "public" => self.public = !value.is_null() && boolean(name, value)?,
            "owner" => self.owner = opt_string(name, value, 255)?,
            "extra" => self.extra = object(name, value)?,
            other => {
                return Err(ApiError::bad_request(format!(
                    "'{other}' cannot be set on a runbook."
                )));
            }
        }
        Ok(())
    }
}

/// One field of `runbook` as shown (`masked`: secrets in step arguments hidden).
fn shown(runbook: &Runbook, name: &str, base: &str, masked: bool) -> Value {
    match name {
        "uuid" => json!(runbook.uuid),
        "name" => json!(runbook.name),
        "description" => opt_text_value(runbook.description.as_deref()),
        "traits" => json!(runbook.traits),
        "steps" => Value::Array(
            runbook
                .steps
                .iter()
                .map(|step| {
                    step_json(
                        &step.interface,
                        &step.step,
                        &step.args,
                        ("order", step.order),
                        masked,
                    )
                })
                .collect(),
        ),
        "disable_ramdisk" => json!(runbook.disable_ramdisk),
        "extra" => Value::Object(runbook.extra.clone()),
        "public" => json!(runbook.public),
        "owner" => opt_text_value(runbook.owner.as_deref()),
        "created_at" => timestamp(runbook.created_at),
        "updated_at" => opt_timestamp(runbook.updated_at),
        "links" => links(base, &format!("runbooks/{}", runbook.uuid)),
        _ => Value::Null,
    }
}

/// A runbook name: letters, digits and `-._~`, 1–255 characters, so that it can name the
/// runbook in a URL (Ironic's rule from 1.112; older versions also require a trait, which
/// always passes this).
fn check_runbook_name(name: &str, value: &str) -> Result<(), ApiError> {
    let valid = !value.is_empty()
        && value.chars().count() <= 255
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '~'));
    if valid {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "Invalid {name} '{value}': a runbook name is 1-255 letters, digits, '-', '.', '_' \
             or '~'."
        )))
    }
}

const PUBLIC_OWNER: &str = "There cannot be an owner for a public runbook; unset owner or public.";

/// The rules on the whole runbook: at least one step, no `interface.step` twice, and no
/// owner on a public runbook.
fn check_runbook(runbook: &Runbook) -> Result<(), ApiError> {
    check_steps(
        "runbook",
        runbook
            .steps
            .iter()
            .map(|step| (step.interface.as_str(), step.step.as_str())),
    )
    .map_err(|why| ApiError::bad_request(format!("Runbook invalid: {why}.")))?;
    if runbook.public && runbook.owner.is_some() {
        return Err(ApiError::bad_request(PUBLIC_OWNER));
    }
    Ok(())
}

/// The project a caller acts for when it is project-scoped (not system-wide: no project, or
/// `admin`, which is system-wide whatever its project).
fn project_scope(caller: Option<&Caller>) -> Option<&str> {
    let caller = caller?;
    if caller.roles.contains(&Role::Admin) {
        return None;
    }
    caller.project.as_deref()
}

async fn list(
    state: &ApiState,
    version: Microversion,
    headers: &HeaderMap,
    query: &[(String, String)],
    detail_path: bool,
    project: Option<String>,
) -> Result<Json<Value>, ApiError> {
    let (params, selection) = list_params::<Runbook>(query, version, detail_path)?;
    if let Some((name, _)) = params.filters.first() {
        return Err(ApiError::bad_request(format!(
            "Unknown query parameter '{name}' for listing runbooks."
        )));
    }
    let runbooks = state
        .store
        .runbook_list(&RunbookFilter { project }, &params.page)
        .await
        .map_err(db_error)?;
    let base = base_url(headers);
    let page = Page {
        version,
        selection: &selection,
        base: &base,
        path: if detail_path {
            "runbooks/detail"
        } else {
            "runbooks"
        },
        query,
        limit: params.limit,
    };
    Ok(Json(list_body(&runbooks, &page)))
}

/// `GET /v1/runbooks`: `uuid` and `name`, or `?fields=` / `?detail=true`. A project-scoped
/// caller sees its project's runbooks and the public ones.
pub async fn runbook_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    ProjectScope(project): ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, false, project).await
}

/// `GET /v1/runbooks/detail`: every field.
pub async fn runbook_list_detail(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    ProjectScope(project): ProjectScope,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, true, project).await
}

pub(crate) async fn load(state: &ApiState, ident: &str) -> Result<Runbook, ApiError> {
    state
        .store
        .runbook_get(&parse_ident(ident)?)
        .await
        .map_err(db_error)
}

/// `GET /v1/runbooks/{runbook_ident}` (UUID or name; `?fields=`).
pub async fn runbook_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let selection = show_selection(RUNBOOK_FIELDS, "runbook", &query, version)?;
    let runbook = load(&state, &ident).await?;
    Ok(Json(record_json(
        &runbook,
        version,
        &selection,
        &base_url(&headers),
    )))
}

/// `POST /v1/runbooks`: 201 with the runbook and its `Location`; 409 when the name (or UUID)
/// is taken. A project-scoped caller's runbook is owned by its project.
pub async fn runbook_create(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    caller: Option<Extension<Caller>>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_object_body(&body)?;
    check_create_body::<Runbook>(&body, version, &["name", "steps"])?;
    let mut runbook = Runbook::new(Uuid::new_v4());
    apply_create_body(&mut runbook, body)?;
    if version.minor() < RUNBOOK_TRAITS_SINCE {
        check_trait("name", &runbook.name)?;
    }
    if let Some(project) = project_scope(caller.as_ref().map(|caller| &caller.0)) {
        if runbook
            .owner
            .as_deref()
            .is_some_and(|owner| owner != project)
        {
            return Err(ApiError::bad_request(
                "Cannot create a runbook as a project scoped admin with an owner other than \
                 your own project.",
            ));
        }
        if runbook.public {
            return Err(ApiError::bad_request(
                "Cannot create a public runbook as a project scoped admin.",
            ));
        }
        runbook.owner = Some(project.to_owned());
    }
    check_runbook(&runbook)?;
    let saved = state
        .store
        .runbook_create(&runbook)
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    let body = record_json(&saved, version, &Selection::All, &base);
    Ok(created(&saved, body, &base))
}

/// `PATCH /v1/runbooks/{runbook_ident}`, revision-guarded. Making a runbook public drops its
/// owner; an owner cannot be set on a public runbook (unless the same patch makes it
/// private).
pub async fn runbook_update(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let ops = parse_patch(&body)?;
    check_patch::<Runbook>(&ops, version)?;
    let runbook = load(&state, &ident).await?;
    let value_of = |name: &str| {
        ops.iter()
            .filter(|op| op.field == name && op.rest.is_empty())
            .map(|op| match op.op {
                OpKind::Remove => Value::Null,
                _ => op.value.clone().unwrap_or(Value::Null),
            })
            .next_back()
    };
    let public = value_of("public");
    let owner = value_of("owner");
    if owner.as_ref().is_some_and(|owner| !owner.is_null()) {
        let becomes_public = match &public {
            Some(value) => value.as_bool() == Some(true),
            None => runbook.public,
        };
        if becomes_public {
            return Err(ApiError::bad_request(PUBLIC_OWNER));
        }
    }
    let mut base_record = runbook.clone();
    if public.is_some() {
        base_record.owner = None;
    }
    let updated = apply_patch(&base_record, &ops, version)?;
    check_runbook(&updated)?;
    let saved = state
        .store
        .runbook_update(&updated, runbook.version)
        .await
        .map_err(db_error)?;
    Ok(Json(record_json(
        &saved,
        version,
        &Selection::All,
        &base_url(&headers),
    )))
}

/// `DELETE /v1/runbooks/{runbook_ident}`: 204.
pub async fn runbook_delete(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(ident): Path<String>,
) -> Result<StatusCode, ApiError> {
    let runbook = load(&state, &ident).await?;
    state
        .store
        .runbook_delete(runbook.uuid)
        .await
        .map_err(db_error)?;
    Ok(StatusCode::NO_CONTENT)
}
