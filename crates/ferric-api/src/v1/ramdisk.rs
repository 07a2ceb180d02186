//! The ramdisk-facing endpoints (`reference/ironic.md` §2.8, §3): `GET /v1/lookup` and
//! `POST /v1/heartbeat/{node}`, through which an agent booted on a machine finds its node,
//! receives its token and reports that it is up.
//!
//! They are public (the agent has no credentials, only its token) and so say as little as
//! possible: a lookup that matches no node, an ambiguous one, and a node in a state that does
//! not expect an agent all answer the same 404.

use std::collections::HashSet;
use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use ferric_conductor::agent::{AGENT_TOKEN_KEY, INVALID_TOKEN, agent_allowed};
use ferric_conductor::{AgentToken, ConductorError, Heartbeat};
use ferric_db::{Page, PortFilter};
use ferric_model::resources::{Ident, Node};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::body::{BodyField, BodySpec, Kind, Null};
use super::fields::{MASK, mask_secrets};
use super::node_fields::instance_info_json;
use super::resource::require_endpoint;
use super::states::conductor_error;
use super::{base_url, db_error, json_object_body, links};
use crate::endpoints::since;
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// From 1.62 a lookup hands out the agent token.
const TOKEN_SINCE: u16 = 62;
/// `agent_version` in heartbeats.
const AGENT_VERSION_SINCE: u16 = 36;
/// `agent_verify_ca`.
const VERIFY_CA_SINCE: u16 = 68;
/// `agent_status` and `agent_status_message`.
const AGENT_STATUS_SINCE: u16 = 72;

#[derive(Debug, Deserialize)]
pub struct LookupQuery {
    addresses: Option<String>,
    node_uuid: Option<String>,
}

/// A MAC address in the canonical lower-case, colon-separated form, or `None`.
pub(crate) fn normalize_mac(text: &str) -> Option<String> {
    let text = text.trim();
    let parts: Vec<&str> = text.split([':', '-']).collect();
    let valid = parts.len() == 6
        && parts
            .iter()
            .all(|part| part.len() == 2 && part.chars().all(|c| c.is_ascii_hexdigit()));
    valid.then(|| parts.join(":").to_ascii_lowercase())
}

/// The node as a ramdisk sees it at lookup and continue_inspection: the four fields the agent
/// reads, and no secret of any kind. The callers are unauthenticated (anyone on the
/// provisioning network can send a MAC), so this shows less than the authenticated node GET,
/// never more: `instance_info` as that GET shows it (the config drive, which carries the
/// tenant's user data, and the image URL masked), and every secret-named key of the other
/// fields masked, the agent token removed. The agent receives the config drive and image
/// location in its deploy command, over its own token-authenticated API.
fn agent_node_document(node: &Node) -> Map<String, Value> {
    let mut driver_internal_info = node.driver_internal_info.clone();
    driver_internal_info.remove(AGENT_TOKEN_KEY);
    let mut document = Map::new();
    document.insert("uuid".into(), json!(node.uuid));
    document.insert("properties".into(), mask_secrets(&node.properties));
    document.insert(
        "instance_info".into(),
        instance_info_json(&node.instance_info),
    );
    document.insert(
        "driver_internal_info".into(),
        mask_secrets(&driver_internal_info),
    );
    document
}

fn not_found() -> ApiError {
    ApiError::not_found("Node could not be found for the given lookup parameters.")
}

/// `GET /v1/lookup?addresses=<mac>,<mac>&node_uuid=<uuid>`.
pub async fn lookup(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    headers: HeaderMap,
    Query(query): Query<LookupQuery>,
) -> Result<Response, ApiError> {
    let mut addresses = Vec::new();
    for text in query
        .addresses
        .as_deref()
        .unwrap_or("")
        .split(',')
        .filter(|text| !text.trim().is_empty())
    {
        match normalize_mac(text) {
            Some(mac) => addresses.push(mac),
            None => tracing::warn!(address = text, "lookup: ignoring an invalid MAC address"),
        }
    }
    let node_uuid = match query.node_uuid.as_deref().filter(|text| !text.is_empty()) {
        Some(text) => Some(Uuid::parse_str(text).map_err(|_| {
            ApiError::bad_request(format!("Invalid UUID for node_uuid: '{text}'."))
        })?),
        None => None,
    };
    if addresses.is_empty() && node_uuid.is_none() {
        return Err(ApiError::bad_request(
            "One or more of the addresses (valid MAC addresses) and node_uuid parameters \
             must be provided for a lookup.",
        ));
    }
    let node = find_node(&state, node_uuid, &addresses).await?;
    let fast_track = state.conductor.config().fast_track;
    if !agent_allowed(&node, fast_track) {
        tracing::warn!(
            node = %node.uuid,
            state = %node.provision_state,
            "lookup refused: the node does not expect an agent in this state"
        );
        return Err(not_found());
    }
    let mut config = Map::new();
    config.insert(
        "heartbeat_timeout".into(),
        state
            .conductor
            .config()
            .agent_heartbeat_timeout
            .as_secs()
            .into(),
    );
    config.insert("agent_token_required".into(), true.into());
    config.insert("metrics".into(), json!({"backend": "noop"}));
    config.insert("metrics_statsd".into(), json!({}));
    config.insert("agent_md5_checksum_enable".into(), false.into());
    config.insert("disable_deep_image_inspection".into(), false.into());
    config.insert(
        "permitted_image_formats".into(),
        json!(["raw", "qcow2", "iso", "gpt"]),
    );
    config.insert("agent_containers".into(), json!({}));
    let conductor = state.conductor.config();
    config.insert(
        "enable_bios_bootloader_install".into(),
        conductor.agent_enable_bios_bootloader_install.into(),
    );
    config.insert(
        "tls_min_version".into(),
        conductor.tls_min_version.clone().into(),
    );
    config.insert(
        "tls_cipher_suites".into(),
        json!(conductor.tls_cipher_suites),
    );
    config.insert(
        "agent_skip_bmc_detect".into(),
        node.management_interface
            .as_deref()
            .is_some_and(|name| name.contains("redfish"))
            .into(),
    );
    if version.minor() >= TOKEN_SINCE {
        let token = state
            .conductor
            .agent_lookup_token(node.uuid)
            .await
            .map_err(conductor_error)?;
        let shown = match token {
            AgentToken::Minted(token) => token,
            AgentToken::AlreadyIssued => MASK.to_owned(),
        };
        config.insert("agent_token".into(), shown.into());
    }
    let mut document = agent_node_document(&node);
    document.insert(
        "links".into(),
        links(&base_url(&headers), &format!("nodes/{}", node.uuid)),
    );
    let body = json!({"node": document, "config": config});
    Ok((StatusCode::OK, axum::Json(body)).into_response())
}

/// The node a lookup names: by UUID when given, else the one node all known MACs belong to.
async fn find_node(
    state: &ApiState,
    node_uuid: Option<Uuid>,
    addresses: &[String],
) -> Result<Node, ApiError> {
    if let Some(uuid) = node_uuid {
        return state
            .store
            .node_get(&Ident::Uuid(uuid))
            .await
            .map_err(|_| not_found());
    }
    let mut owners = HashSet::new();
    for mac in addresses {
        let ports = state
            .store
            .port_list(
                &PortFilter {
                    address: Some(mac.clone()),
                    ..PortFilter::default()
                },
                &Page::all(),
            )
            .await
            .map_err(db_error)?;
        owners.extend(ports.into_iter().map(|port| port.node_uuid));
    }
    match owners.len() {
        1 => {
            let uuid = owners.into_iter().next().ok_or_else(not_found)?;
            state
                .store
                .node_get(&Ident::Uuid(uuid))
                .await
                .map_err(|_| not_found())
        }
        0 => Err(not_found()),
        _ => {
            tracing::warn!(
                addresses = ?addresses,
                "lookup: the MAC addresses belong to more than one node"
            );
            Err(not_found())
        }
    }
}

/// A heartbeat's text fields: refused in the ramdisk API's words (400, also for a field newer
/// than the request).
const fn heartbeat_field(name: &'static str, since: u16) -> BodyField {
    BodyField::new(name, Kind::Text)
        .null(Null::Absent)
        .since(since)
        .invalid("Invalid value for {name}: {value} is not a string.")
}

/// The body of `POST /v1/heartbeat/{node_ident}`.
pub(crate) static HEARTBEAT_BODY: BodySpec = BodySpec::new(
    "HeartbeatRequest",
    &[
        heartbeat_field("callback_url", 1).required().max_len(2048),
        heartbeat_field("agent_token", TOKEN_SINCE),
        heartbeat_field("agent_version", AGENT_VERSION_SINCE).max_len(255),
        heartbeat_field("agent_verify_ca", VERIFY_CA_SINCE).max_len(65536),
        BodyField::new("agent_status", Kind::Choice(&["start", "end", "error"]))
            .null(Null::Absent)
            .since(AGENT_STATUS_SINCE)
            .invalid("Invalid value for {name}: {value} is not a string.")
            .refused("Invalid agent_status '{text}': expected start, end or error."),
        heartbeat_field("agent_status_message", AGENT_STATUS_SINCE).max_len(4096),
    ],
)
.missing("Missing argument: \"{name}\".")
.unknown("Unknown attribute for heartbeat: \"{name}\".")
.too_new(
    StatusCode::BAD_REQUEST,
    "Field \"{name}\" needs API version 1.{since} or later; this request asked for {version}.",
);

/// `POST /v1/heartbeat/{node_ident}` → 202.
pub async fn heartbeat(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    peer: Peer,
    Path(ident): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let mut body = HEARTBEAT_BODY.parse(&body, version)?;
    let callback_url = body.text("callback_url").unwrap_or_default();
    let agent_token = body.text("agent_token");
    let agent_version = body.text("agent_version");
    let agent_verify_ca = body.text("agent_verify_ca");
    let agent_status = body.text("agent_status");
    let agent_status_message = body.text("agent_status_message");
    if version.minor() >= AGENT_VERSION_SINCE && agent_version.is_none() && agent_status.is_none() {
        return Err(ApiError::bad_request(
            "Missing argument: \"agent_version\" (or \"agent_status\"); the agent must say \
             which version it runs.",
        ));
    }
    if !callback_url.is_empty() && !is_http_url(&callback_url) {
        return Err(ApiError::bad_request(format!(
            "Invalid callback_url '{callback_url}': it must be an http:// or https:// URL."
        )));
    }
    let Some(agent_token) = agent_token.filter(|token| !token.is_empty()) else {
        // Never log a token, only that there was none.
        tracing::warn!(node = %ident, %peer, "heartbeat refused: no agent token");
        return Err(ApiError::new(StatusCode::UNAUTHORIZED, INVALID_TOKEN));
    };
    let node = state
        .store
        .node_get(&Ident::parse(&ident))
        .await
        .map_err(db_error)?;
    state
        .conductor
        .heartbeat_read(
            &node,
            Heartbeat {
                callback_url,
                agent_token,
                agent_version,
                agent_verify_ca,
                agent_status,
                agent_status_message,
            },
        )
        .await
        .map_err(|error| {
            if matches!(&error, ConductorError::Forbidden(_)) {
                tracing::warn!(
                    node = %node.uuid,
                    %peer,
                    "heartbeat refused: the agent token does not match the one issued"
                );
            }
            conductor_error(error)
        })?;
    Ok(StatusCode::ACCEPTED.into_response())
}

/// The address a request came from, when the server records it (`ferric server` does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer(pub Option<SocketAddr>);

impl<S: Send + Sync> FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(Peer(
            parts
                .extensions
                .get::<ConnectInfo<SocketAddr>>()
                .map(|info| info.0),
        ))
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(address) => write!(formatter, "{address}"),
            None => formatter.write_str("unknown"),
        }
    }
}

/// Built-in inspection (`agent` inspect interface) appeared in 1.84; 1.1 (no version header)
/// stays open for ramdisks written for ironic-inspector (§5.4).
const CONTINUE_INSPECTION_SINCE: u16 = since::CONTINUE_INSPECTION.minor();

#[derive(Debug, Deserialize)]
pub struct ContinueInspectionQuery {
    node_uuid: Option<String>,
}

/// `POST /v1/continue_inspection` → 202: the inspection ramdisk's data. Answers `{"uuid"}`
/// at 1.1 and `{node, config}` with a fresh agent token from 1.84 (§5.4).
pub async fn continue_inspection(
    State(state): State<ApiState>,
    ApiVersion(version): ApiVersion,
    Query(query): Query<ContinueInspectionQuery>,
    body: Bytes,
) -> Result<Response, ApiError> {
    let legacy = version.minor() == 1;
    if !legacy {
        require_endpoint(
            version,
            CONTINUE_INSPECTION_SINCE,
            "/v1/continue_inspection",
        )?;
    }
    let payload = Value::Object(json_object_body(&body)?);
    if !payload.get("inventory").is_some_and(Value::is_object) {
        return Err(ApiError::bad_request(
            "The inspection data has no \"inventory\" object.",
        ));
    }
    let node_uuid = match query.node_uuid.as_deref().filter(|text| !text.is_empty()) {
        Some(_) if legacy => {
            return Err(ApiError::bad_request(
                "node_uuid needs API version 1.84 or later.",
            ));
        }
        Some(text) => Some(Uuid::parse_str(text).map_err(|_| {
            ApiError::bad_request(format!("Invalid UUID for node_uuid: '{text}'."))
        })?),
        None => None,
    };
    let node = find_inspected_node(&state, node_uuid, &payload).await?;
    let token = state
        .conductor
        .continue_inspection(node.uuid, payload, !legacy)
        .await
        .map_err(conductor_error)?;
    let body = if legacy {
        json!({"uuid": node.uuid})
    } else {
        json!({
            "node": agent_node_document(&node),
            "config": {
                "agent_token": token.unwrap_or_else(|| MASK.to_owned()),
                "agent_token_required": true,
            },
        })
    };
    Ok((StatusCode::ACCEPTED, axum::Json(body)).into_response())
}

/// The node in `inspect wait` the data belongs to (`inspect_utils.lookup_node`): by UUID, by
/// the MACs of its ports, or by BMC address among the nodes being inspected. Anything
/// ambiguous or not being inspected is the same 404, with a log line.
async fn find_inspected_node(
    state: &ApiState,
    node_uuid: Option<Uuid>,
    payload: &Value,
) -> Result<Node, ApiError> {
    use ferric_model::ProvisionState;
    let refused = |why: &str| {
        tracing::warn!(why, "continue_inspection: no node for the data");
        ApiError::not_found("Node could not be found for the given inspection data.")
    };
    let macs: Vec<String> = ferric_inspector::process::payload_macs(payload)
        .into_iter()
        .collect();
    let bmcs = ferric_inspector::process::payload_bmc_addresses(payload);
    let node = if node_uuid.is_some() || !macs.is_empty() {
        match find_node(state, node_uuid, &macs).await {
            Ok(node) => Some(node),
            Err(_) if node_uuid.is_none() => None,
            Err(_) => return Err(refused("no node has that UUID")),
        }
    } else {
        None
    };
    let node = match node {
        Some(node) => node,
        None => {
            let waiting = state
                .store
                .node_list(
                    &ferric_db::NodeFilter {
                        provision_state: Some(ProvisionState::InspectWait),
                        ..ferric_db::NodeFilter::default()
                    },
                    &Page::all(),
                )
                .await
                .map_err(db_error)?;
            let mut matching = waiting.into_iter().filter(|node| {
                node.driver_internal_info
                    .get(ferric_drivers::inspect::LOOKUP_BMC_ADDRESSES_KEY)
                    .and_then(Value::as_array)
                    .is_some_and(|known| {
                        known
                            .iter()
                            .filter_map(Value::as_str)
                            .any(|address| bmcs.contains(address))
                    })
            });
            match (matching.next(), matching.next()) {
                (Some(node), None) => node,
                (None, _) => return Err(refused("no MAC or BMC address matches")),
                (Some(_), Some(_)) => return Err(refused("several nodes match the BMC address")),
            }
        }
    };
    if node.provision_state != ProvisionState::InspectWait {
        return Err(refused("the node is not in inspect wait"));
    }
    Ok(node)
}

fn is_http_url(text: &str) -> bool {
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"));
    rest.is_some_and(|rest| {
        let host = rest.split(['/', '?']).next().unwrap_or("");
        !host.is_empty() && !host.contains(char::is_whitespace)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_are_normalized_or_refused() {
        assert_eq!(
            normalize_mac("52:54:00:AB:cd:01").as_deref(),
            Some("52:54:00:ab:cd:01")
        );
        assert_eq!(
            normalize_mac("52-54-00-ab-cd-01").as_deref(),
            Some("52:54:00:ab:cd:01")
        );
        assert_eq!(normalize_mac("52:54:00:ab:cd"), None);
        assert_eq!(normalize_mac("zz:54:00:ab:cd:01"), None);
    }

    #[test]
    fn callback_urls_must_be_http() {
        assert!(is_http_url("http://10.0.0.5:9999"));
        assert!(is_http_url("https://[fd00::5]:9999/"));
        assert!(!is_http_url("ftp://10.0.0.5"));
        assert!(!is_http_url("http://"));
        assert!(!is_http_url("10.0.0.5:9999"));
    }
}
