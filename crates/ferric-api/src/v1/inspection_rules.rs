//! `/v1/inspection_rules` (1.96): rules the conductor runs on a node's data after inspection
//! (`reference/ironic.md` §5.3; the checks and the engine are
//! `ferric_inspector::inspection_rules`). Create, list, detail, show by UUID, JSON-PATCH,
//! delete. A sensitive rule's conditions and actions are shown as `null`, and a rule once
//! sensitive stays so. Below 1.96 GET answers 404 and other methods 405, as Ironic does.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use ferric_db::{InspectionRuleFilter, InspectionRuleSortKey};
use ferric_inspector::inspection_rules::check_rule;
use ferric_model::Microversion;
use ferric_model::resources::{INSPECTION_PHASE_MAIN, InspectionRule, JsonObject};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::fields::FieldType as T;
use super::fields::{
    Access::{CreateOnly, ReadOnly, Writable},
    FieldSpec, Selection, field, show_selection,
};
use super::patch::{OpKind, parse_patch};
use super::resource::{
    Page, Resource, apply_patch, check_patch, created, list_body, list_params, record_json,
};
use super::{base_url, db_error, json_object_body, links, opt_timestamp, timestamp};
use crate::endpoints::since;
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

pub(crate) const INSPECTION_RULES_SINCE: u16 = since::INSPECTION_RULES.minor();

pub(crate) const INSPECTION_RULE_FIELDS: &[FieldSpec] = &[
    field("uuid", INSPECTION_RULES_SINCE, CreateOnly, T::Uuid),
    field("description", INSPECTION_RULES_SINCE, Writable, T::OptText),
    field("priority", INSPECTION_RULES_SINCE, Writable, T::Int),
    field("sensitive", INSPECTION_RULES_SINCE, Writable, T::Bool),
    field("phase", INSPECTION_RULES_SINCE, Writable, T::Text),
    field("conditions", INSPECTION_RULES_SINCE, Writable, T::RuleItems),
    field("actions", INSPECTION_RULES_SINCE, Writable, T::RuleItems),
    field("created_at", INSPECTION_RULES_SINCE, ReadOnly, T::Time),
    field("updated_at", INSPECTION_RULES_SINCE, ReadOnly, T::OptTime),
    field("links", INSPECTION_RULES_SINCE, ReadOnly, T::Links),
];

impl Resource for InspectionRule {
    type SortKey = InspectionRuleSortKey;
    const NAME: &'static str = "inspection rule";
    const COLLECTION: &'static str = "inspection_rules";
    const FIELDS: &'static [FieldSpec] = INSPECTION_RULE_FIELDS;
    const DEFAULT_LIST_FIELDS: &'static [&'static str] =
        &["uuid", "priority", "phase", "description"];
    const UNSORTABLE: &'static [&'static str] = &["actions", "conditions"];

    fn uuid(&self) -> Uuid {
        self.uuid
    }

    fn field_json(&self, name: &str, _version: Microversion, base: &str) -> Value {
        match name {
            "conditions" | "actions" if self.sensitive => Value::Null,
            name => shown(self, name, base),
        }
    }

    fn field_value(&self, name: &str, _version: Microversion) -> Value {
        shown(self, name, "")
    }

    /// Types only: the whole rule is checked by [`check_rule`] afterwards.
    fn set_field(&mut self, name: &str, value: Value) -> Result<(), ApiError> {
        let shown = value.to_string();
        let wrong = |what: &str| {
            ApiError::bad_request(format!(
                "Validation failed for inspection rule: {shown} is not of type '{what}' \
                 ({name})."
            ))
        };
        match name {
            "uuid" => self.uuid = super::step_lists::uuid_or_new(value)?,
            "description" => match value {
                Value::Null => self.description = None,
                Value::String(ref text) => self.description = Some(text.clone()),
                _ => return Err(wrong("string")),
            },
            "priority" => match value {
                Value::Null => self.priority = 0,
                Value::Number(ref number) if number.as_i64().is_some() => {
                    self.priority = number.as_i64().unwrap_or_default();
                }
                _ => return Err(wrong("integer")),
            },
            "sensitive" => match value {
                Value::Null => self.sensitive = false,
                Value::Bool(sensitive) => self.sensitive = sensitive,
                _ => return Err(wrong("boolean")),
            },
            "phase" => match value {
                Value::Null => self.phase = INSPECTION_PHASE_MAIN.to_owned(),
                Value::String(ref phase) => self.phase = phase.clone(),
                _ => return Err(wrong("string")),
            },
            "conditions" => self.conditions = items(name, value, &wrong)?,
            "actions" => self.actions = items(name, value, &wrong)?,
            other => {
                return Err(ApiError::bad_request(format!(
                    "'{other}' cannot be set on an inspection rule."
                )));
            }
        }
        Ok(())
    }
}

/// A list of condition or action objects (`null`: none); their contents are checked by
/// [`check_rule`].
fn items(
    name: &str,
    value: Value,
    wrong: &dyn Fn(&str) -> ApiError,
) -> Result<Vec<JsonObject>, ApiError> {
    match value {
        Value::Null if name == "conditions" => Ok(Vec::new()),
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::Object(object) => Ok(object),
                _ => Err(wrong("object")),
            })
            .collect(),
        _ => Err(wrong("array")),
    }
}

fn shown(rule: &InspectionRule, name: &str, base: &str) -> Value {
    match name {
        "uuid" => json!(rule.uuid),
        "description" => json!(rule.description),
        "priority" => json!(rule.priority),
        "sensitive" => json!(rule.sensitive),
        "phase" => json!(rule.phase),
        "conditions" => json!(rule.conditions),
        "actions" => json!(rule.actions),
        "created_at" => timestamp(rule.created_at),
        "updated_at" => opt_timestamp(rule.updated_at),
        "links" => links(base, &format!("inspection_rules/{}", rule.uuid)),
        _ => Value::Null,
    }
}

/// The rule as the checks see it: every field a body may hold.
fn rule_document(rule: &InspectionRule) -> Map<String, Value> {
    let mut document = Map::new();
    for name in ferric_inspector::inspection_rules::RULE_FIELDS {
        document.insert(name.to_owned(), shown(rule, name, ""));
    }
    document
}

fn checked(document: &Map<String, Value>) -> Result<(), ApiError> {
    check_rule(document, false).map_err(ApiError::bad_request)
}

/// A rule's UUID from the path: anything else is 400, as Ironic's `args.uuid`.
fn parse_uuid(text: &str) -> Result<Uuid, ApiError> {
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
    let (params, selection) = list_params::<InspectionRule>(query, version, detail_path)?;
    let mut filter = InspectionRuleFilter::default();
    for (name, value) in &params.filters {
        match name.as_str() {
            "phase" => filter.phase = Some(value.clone()),
            other => {
                return Err(ApiError::bad_request(format!(
                    "Unknown query parameter '{other}' for listing inspection rules."
                )));
            }
        }
    }
    let rules = state
        .store
        .inspection_rule_list(&filter, &params.page)
        .await
        .map_err(db_error)?;
    let base = base_url(headers);
    let page = Page {
        version,
        selection: &selection,
        base: &base,
        path: if detail_path {
            "inspection_rules/detail"
        } else {
            "inspection_rules"
        },
        query,
        limit: params.limit,
    };
    Ok(Json(list_body(&rules, &page)))
}

/// `GET /v1/inspection_rules`: `uuid`, `priority`, `phase`, `description`, or `?fields=` /
/// `?detail=true`; `?phase=` selects.
pub async fn inspection_rule_list(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, false).await
}

/// `GET /v1/inspection_rules/detail`: every field.
pub async fn inspection_rule_list_detail(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    list(&state, version, &headers, &query, true).await
}

/// `GET /v1/inspection_rules/{rule_uuid}` (`?fields=`).
pub async fn inspection_rule_get(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(uuid): Path<String>,
    Query(query): Query<Vec<(String, String)>>,
) -> Result<Json<Value>, ApiError> {
    let uuid = parse_uuid(&uuid)?;
    let selection = show_selection(INSPECTION_RULE_FIELDS, "inspection rule", &query, version)?;
    let rule = state
        .store
        .inspection_rule_get(uuid)
        .await
        .map_err(db_error)?;
    Ok(Json(record_json(
        &rule,
        version,
        &selection,
        &base_url(&headers),
    )))
}

/// `POST /v1/inspection_rules`: 201 with the rule and its `Location`; 400 with every reason
/// a rule is refused for; 409 when the UUID is taken.
pub async fn inspection_rule_create(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let body = json_object_body(&body)?;
    checked(&body)?;
    let mut rule = InspectionRule::new(Uuid::new_v4());
    for (name, value) in body {
        rule.set_field(&name, value)?;
    }
    let saved = state
        .store
        .inspection_rule_create(&rule)
        .await
        .map_err(db_error)?;
    let base = base_url(&headers);
    let body = record_json(&saved, version, &Selection::All, &base);
    Ok(created(&saved, body, &base))
}

/// `PATCH /v1/inspection_rules/{rule_uuid}`: any field but `uuid`, the whole rule checked
/// again; `sensitive` cannot be turned off.
pub async fn inspection_rule_update(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Path(uuid): Path<String>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let uuid = parse_uuid(&uuid)?;
    let ops = parse_patch(&body)?;
    check_patch::<InspectionRule>(&ops, version)?;
    let rule = state
        .store
        .inspection_rule_get(uuid)
        .await
        .map_err(db_error)?;
    let unsets_sensitive = ops.iter().any(|op| {
        op.field == "sensitive"
            && (op.op == OpKind::Remove || op.value.as_ref().is_some_and(|v| v == &json!(false)))
    });
    if rule.sensitive && unsets_sensitive {
        return Err(ApiError::bad_request(
            "Inspection rules cannot have the sensitive flag unset.",
        ));
    }
    let updated = apply_patch(&rule, &ops, version)?;
    checked(&rule_document(&updated))?;
    let saved = state
        .store
        .inspection_rule_update(&updated, rule.version)
        .await
        .map_err(db_error)?;
    Ok(Json(record_json(
        &saved,
        version,
        &Selection::All,
        &base_url(&headers),
    )))
}

/// `DELETE /v1/inspection_rules/{rule_uuid}`: 204.
pub async fn inspection_rule_delete(
    State(state): State<ApiState>,
    ApiVersion(_version): ApiVersion,
    Path(uuid): Path<String>,
) -> Result<StatusCode, ApiError> {
    let uuid = parse_uuid(&uuid)?;
    state
        .store
        .inspection_rule_delete(uuid)
        .await
        .map_err(db_error)?;
    Ok(StatusCode::NO_CONTENT)
}
