//! Authorization: the middleware that checks every authenticated request against the
//! [`Policy`] before a handler runs.
//!
//! Theory of operation: [`classify`] maps a request (method and path, and for two requests a
//! field of the body) to the rule that guards it and the resource it acts on, as the
//! endpoint's declaration (`crate::endpoints`) says. The resource is
//! loaded to learn its projects: a node's `owner` and `lessee`; a port or portgroup follows its
//! node; an allocation has its own `owner`. A caller who may not even read that node is
//! answered 404, exactly as if it did not exist (Ironic's project scoping); one who may read
//! it but lacks the rule is answered 403 naming the rule. Listings pass with a
//! [`ProjectScope`] the handler applies, so a project-scoped user's pages hold only its
//! project's resources. With `noauth` (no [`Caller`]) and on public routes nothing is checked.
//!
//! A resource that does not exist is left to the handler, which answers its usual 404.
//!
//! A provision request naming a `runbook` is also checked against `baremetal:runbook:use` on the
//! runbook's owner.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ferric_db::Store;
use ferric_model::resources::{Ident, Node};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::ApiError;
use crate::auth::is_public_route;
use crate::endpoints::{self, Guard, On};
use crate::policy::{Caller, Policy, Target};

/// Handlers of listings take it; it lives beside the other listing parameters.
pub use crate::v1::paging::ProjectScope;

/// What the middleware needs: the rules and the store to load resources from.
#[derive(Clone)]
pub(crate) struct Authz {
    pub(crate) policy: Arc<Policy>,
    pub(crate) store: Store,
}

/// The resource a request acts on, as named in its path (or body).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Subject {
    /// No one resource: creates, global reads.
    Nothing,
    Node(String),
    Port(String),
    Portgroup(String),
    Allocation(String),
    /// A volume connector or target (they follow their node), by UUID.
    VolumeConnector(String),
    VolumeTarget(String),
    Runbook(String),
    /// The node named by the body's `node_uuid` (port and portgroup create).
    BodyNode,
}

/// The check one request needs.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Check {
    /// `rule` on `subject`.
    Rule(&'static str, Subject),
    /// A listing: `…:list` lets it through scoped to the caller's project, `…:list_all`
    /// unscoped.
    List(&'static str),
    /// `PUT /v1/nodes/{node}/states/provision`: the rule depends on the verb in the body.
    Provision(String),
    /// `PATCH /v1/nodes/{node}`: `baremetal:node:update`, plus `…:update:owner` when the
    /// patch touches `owner`.
    NodeUpdate(String),
    /// `PATCH /v1/runbooks/{runbook}`: `…:update`, `…:update:owner`, `…:update:public` by
    /// the paths the patch touches, as Ironic picks them.
    RunbookUpdate(String),
    /// No endpoint serves the request: the router answers it (404 or 405) whoever asks, as
    /// Ironic routes before it checks a policy. Nothing is read or done.
    Unrouted,
}

/// The rules of the console stream: watching, and typing.
const CONSOLE_VIEW: &str = "baremetal:node:console:view";
const CONSOLE_INPUT: &str = "baremetal:node:console:input";

/// The provision verbs of an instance's life, which lessees may use
/// (`baremetal:node:set_provision_state:instance`).
const INSTANCE_VERBS: &[&str] = &[
    "active", "deploy", "deleted", "undeploy", "rebuild", "rescue", "unrescue",
];

/// The check for `method path`, from the declaration of the endpoint that serves it
/// ([`endpoints::find`]). A request no endpoint serves goes on to the router, which answers
/// 404 or 405; a public endpoint reached with credentials (a path `is_public_route` does not
/// accept, such as an upper-case node name in a heartbeat) is checked against `default`.
fn classify(method: &Method, path: &str) -> Check {
    let Some((endpoint, ident)) = endpoints::find(method, path) else {
        return Check::Unrouted;
    };
    let ident = ident.unwrap_or_default().to_owned();
    match endpoint.guard {
        Guard::Unset | Guard::Public => Check::Rule("default", Subject::Nothing),
        Guard::List(kind) => Check::List(kind),
        Guard::Provision => Check::Provision(ident),
        Guard::NodeUpdate => Check::NodeUpdate(ident),
        Guard::RunbookUpdate => Check::RunbookUpdate(ident),
        Guard::Rule(rule, on) => Check::Rule(
            rule,
            match on {
                On::Nothing => Subject::Nothing,
                On::BodyNode => Subject::BodyNode,
                On::Node => Subject::Node(ident),
                On::Port => Subject::Port(ident),
                On::Portgroup => Subject::Portgroup(ident),
                On::Allocation => Subject::Allocation(ident),
                On::VolumeConnector => Subject::VolumeConnector(ident),
                On::VolumeTarget => Subject::VolumeTarget(ident),
                On::Runbook => Subject::Runbook(ident),
            },
        ),
    }
}

/// 403 with the rule that refused, saying what to do.
fn forbidden(caller: &Caller, rule: &str) -> ApiError {
    tracing::info!(caller = %caller.describe(), rule, "request refused by policy");
    ApiError::new(
        StatusCode::FORBIDDEN,
        format!(
            "{} is not allowed to {rule}; an administrator can grant it in the users file \
             (auth_users_file) or the policy file (auth_policy_file).",
            caller.describe()
        ),
    )
}

fn hidden_node(ident: &str) -> Response {
    ApiError::not_found(format!("Node {ident} could not be found.")).into_response()
}

fn node_target(node: &Node) -> Target<'_> {
    Target {
        owner: node.owner.as_deref(),
        lessee: node.lessee.as_deref(),
    }
}

/// The body, read (it is already in memory: `limit_body` runs first) and put back.
async fn peek_body(request: Request) -> Result<(Request, Bytes), Response> {
    let (parts, body) = request.into_parts();
    let bytes = body
        .collect()
        .await
        .map_err(|_| ApiError::bad_request("Could not read the request body.").into_response())?
        .to_bytes();
    Ok((Request::from_parts(parts, Body::from(bytes.clone())), bytes))
}

fn body_field(bytes: &[u8], pointer: &str) -> Option<Value> {
    serde_json::from_slice::<Value>(bytes)
        .ok()?
        .pointer(pointer)
        .cloned()
}

/// Middleware: checks the authenticated caller against the policy.
pub(crate) async fn authorize(
    State(authz): State<Authz>,
    request: Request,
    next: Next,
) -> Response {
    let Some(caller) = request.extensions().get::<Caller>().cloned() else {
        // noauth: everything is allowed.
        return next.run(request).await;
    };
    if is_public_route(request.uri().path()) {
        return next.run(request).await;
    }
    let check = classify(request.method(), request.uri().path());
    match authorize_check(&authz, &caller, check, request).await {
        Ok(request) => next.run(request).await,
        Err(response) => response,
    }
}

/// The request to hand on, or the refusal.
async fn authorize_check(
    authz: &Authz,
    caller: &Caller,
    check: Check,
    mut request: Request,
) -> Result<Request, Response> {
    let policy = &authz.policy;
    let (rules, subject) = match check {
        Check::Unrouted => return Ok(request),
        Check::List(kind) => {
            let all = format!("baremetal:{kind}:list_all");
            let scoped = format!("baremetal:{kind}:list");
            let scope = if policy.allows(&all, caller, Target::default()) {
                ProjectScope(None)
            } else if policy.allows(&scoped, caller, Target::default()) && caller.project.is_some()
            {
                ProjectScope(caller.project.clone())
            } else {
                return Err(forbidden(caller, &scoped).into_response());
            };
            request.extensions_mut().insert(scope);
            return Ok(request);
        }
        Check::Provision(ident) => {
            let (back, bytes) = peek_body(request).await?;
            request = back;
            let verb = body_field(&bytes, "/target");
            let instance = verb
                .as_ref()
                .and_then(Value::as_str)
                .is_some_and(|verb| INSTANCE_VERBS.contains(&verb));
            let rule = if instance {
                "baremetal:node:set_provision_state:instance"
            } else {
                "baremetal:node:set_provision_state"
            };
            check_subject(authz, caller, &[rule], Subject::Node(ident.clone())).await?;
            if let Some(Value::String(runbook)) = body_field(&bytes, "/runbook") {
                check_runbook_use(authz, caller, &runbook).await?;
            }
            check_steps(authz, caller, &ident, &bytes).await?;
            return Ok(request);
        }
        Check::RunbookUpdate(ident) => {
            let (back, bytes) = peek_body(request).await?;
            request = back;
            let paths: Vec<String> = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|patch| patch.as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|operation| operation.get("path").and_then(Value::as_str))
                .map(str::to_owned)
                .collect();
            (runbook_update_rules(&paths), Subject::Runbook(ident))
        }
        Check::NodeUpdate(ident) => {
            let (back, bytes) = peek_body(request).await?;
            request = back;
            let touches_owner = serde_json::from_slice::<Value>(&bytes)
                .ok()
                .and_then(|patch| patch.as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|operation| operation.get("path").and_then(Value::as_str))
                .any(|path| path.trim_end_matches('/') == "/owner");
            let mut rules = vec!["baremetal:node:update"];
            if touches_owner {
                rules.push("baremetal:node:update:owner");
            }
            check_subject(authz, caller, &rules, Subject::Node(ident)).await?;
            if let Some(parent) = patched_value(&bytes, "/parent_node") {
                check_named_node(authz, caller, &parent, "baremetal:node:get", "parent_node")
                    .await?;
            }
            return Ok(request);
        }
        Check::Rule(rule @ "baremetal:node:create", Subject::Nothing) => {
            let (back, bytes) = peek_body(request).await?;
            request = back;
            check_subject(authz, caller, &[rule], Subject::Nothing).await?;
            if let Some(Value::String(parent)) = body_field(&bytes, "/parent_node") {
                check_named_node(authz, caller, &parent, "baremetal:node:get", "parent_node")
                    .await?;
            }
            return Ok(request);
        }
        // A port or portgroup moved to another node: the caller must be allowed the same
        // update on the node it moves to, which it must be able to see.
        Check::Rule(
            rule @ ("baremetal:port:update" | "baremetal:portgroup:update"),
            subject @ (Subject::Port(_) | Subject::Portgroup(_)),
        ) => {
            let (back, bytes) = peek_body(request).await?;
            request = back;
            check_subject(authz, caller, &[rule], subject).await?;
            if let Some(node) = patched_value(&bytes, "/node_uuid") {
                check_named_node(authz, caller, &node, rule, "Node").await?;
            }
            return Ok(request);
        }
        Check::Rule(rule, Subject::BodyNode) => {
            let (back, bytes) = peek_body(request).await?;
            request = back;
            let node_uuid = body_field(&bytes, "/node_uuid")
                .and_then(|value| value.as_str().map(str::to_owned));
            match node_uuid {
                Some(uuid) => (vec![rule], Subject::Node(uuid)),
                None => (vec![rule], Subject::Nothing),
            }
        }
        // The console stream: watching needs the guard's rule; whether the caller may also
        // type is decided here and handed to the handler.
        Check::Rule(CONSOLE_VIEW, Subject::Node(ident)) => {
            check_subject(authz, caller, &[CONSOLE_VIEW], Subject::Node(ident.clone())).await?;
            let input = check_subject(authz, caller, &[CONSOLE_INPUT], Subject::Node(ident))
                .await
                .is_ok();
            request
                .extensions_mut()
                .insert(crate::v1::console::ConsoleInput(input));
            return Ok(request);
        }
        Check::Rule(rule, subject) => (vec![rule], subject),
    };
    check_subject(authz, caller, &rules, subject).await?;
    Ok(request)
}

/// The per-step rules (`baremetal:step:execute:<interface>.<step>`, set in a policy file) of
/// every step a provision request names in `clean_steps`, `deploy_steps` or `service_steps`:
/// 403 naming the first rule the caller fails.
async fn check_steps(
    authz: &Authz,
    caller: &Caller,
    node: &str,
    bytes: &[u8],
) -> Result<(), Response> {
    let steps: Vec<(String, String)> = ["/clean_steps", "/deploy_steps", "/service_steps"]
        .iter()
        .filter_map(|field| body_field(bytes, field))
        .filter_map(|steps| steps.as_array().cloned())
        .flatten()
        .filter_map(|step| {
            Some((
                step.get("interface")?.as_str()?.to_owned(),
                step.get("step")?.as_str()?.to_owned(),
            ))
        })
        .collect();
    if steps.is_empty() {
        return Ok(());
    }
    let Ok(node) = authz.store.node_get(&Ident::parse(node)).await else {
        return Ok(());
    };
    let target = node_target(&node);
    for (interface, step) in steps {
        if !authz.policy.allows_step(&interface, &step, caller, target) {
            let rule = format!("{}{interface}.{step}", crate::policy::STEP_RULE_PREFIX);
            return Err(forbidden(caller, &rule).into_response());
        }
    }
    Ok(())
}

/// The value a JSON patch gives `path` (`add` or `replace`), if it is a string.
fn patched_value(bytes: &[u8], path: &str) -> Option<String> {
    let patch = serde_json::from_slice::<Value>(bytes).ok()?;
    patch.as_array()?.iter().rev().find_map(|operation| {
        let op = operation.get("op").and_then(Value::as_str)?;
        let at = operation.get("path").and_then(Value::as_str)?;
        (matches!(op, "add" | "replace") && at.trim_end_matches('/') == path)
            .then(|| operation.get("value")?.as_str().map(str::to_owned))
            .flatten()
    })
}

/// Another node a request names in its body (a `parent_node`, the node a port moves to): a
/// caller who may not see it is answered exactly as if it did not exist (the handler's 400,
/// `what` naming the field as the handler does), so the answer tells nothing about other
/// projects' nodes; one who may see it but not `rule` on it gets 403.
async fn check_named_node(
    authz: &Authz,
    caller: &Caller,
    ident: &str,
    rule: &'static str,
    what: &str,
) -> Result<(), Response> {
    let Ok(node) = authz.store.node_get(&Ident::parse(ident)).await else {
        // Missing: the handler answers its own 400.
        return Ok(());
    };
    let target = node_target(&node);
    if !authz.policy.allows("baremetal:node:get", caller, target) {
        tracing::info!(caller = %caller.describe(), node = ident, "a request named a node the caller may not see");
        return Err(
            ApiError::bad_request(format!("{what} {ident} could not be found.")).into_response(),
        );
    }
    check_rules(&authz.policy, &[rule], caller, target).map_err(IntoResponse::into_response)
}

/// 403 for the first of `rules` the caller fails on `target`.
fn check_rules(
    policy: &Policy,
    rules: &[&'static str],
    caller: &Caller,
    target: Target<'_>,
) -> Result<(), ApiError> {
    match rules
        .iter()
        .find(|rule| !policy.allows(rule, caller, target))
    {
        Some(rule) => Err(forbidden(caller, rule)),
        None => Ok(()),
    }
}

/// The rules of a runbook PATCH touching `paths`: `…:update:owner` / `…:update:public` for
/// those fields, `…:update` for any other path (or when nothing else applies).
fn runbook_update_rules(paths: &[String]) -> Vec<&'static str> {
    let mut rules = Vec::new();
    let mut generic = false;
    for path in paths {
        let rule = if path.starts_with("/owner") {
            "baremetal:runbook:update:owner"
        } else if path.starts_with("/public") {
            "baremetal:runbook:update:public"
        } else {
            generic = true;
            continue;
        };
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
    if generic || rules.is_empty() {
        rules.push("baremetal:runbook:update");
    }
    rules
}

/// `baremetal:runbook:use` on the runbook a provision request names (by its owner). A
/// runbook that does not exist is left to the handler's 404.
async fn check_runbook_use(authz: &Authz, caller: &Caller, ident: &str) -> Result<(), Response> {
    let Ok(runbook) = authz.store.runbook_get(&Ident::parse(ident)).await else {
        return Ok(());
    };
    let target = Target {
        owner: runbook.owner.as_deref(),
        lessee: None,
    };
    check_rules(&authz.policy, &["baremetal:runbook:use"], caller, target)
        .map_err(IntoResponse::into_response)
}

/// Loads the subject and checks visibility (404) and every rule (403).
async fn check_subject(
    authz: &Authz,
    caller: &Caller,
    rules: &[&'static str],
    subject: Subject,
) -> Result<(), Response> {
    let policy = &authz.policy;
    let store = &authz.store;
    // The node the subject belongs to, and the read rule that decides whether the caller
    // may know it exists.
    let (node_ident, visibility_rule) = match &subject {
        Subject::Nothing | Subject::BodyNode => {
            return check_rules(policy, rules, caller, Target::default())
                .map_err(IntoResponse::into_response);
        }
        Subject::Allocation(ident) => {
            let Ok(allocation) = store.allocation_get(&Ident::parse(ident)).await else {
                return Ok(());
            };
            let target = Target {
                owner: allocation.owner.as_deref(),
                lessee: None,
            };
            if !policy.allows("baremetal:allocation:get", caller, target) {
                return Err(
                    ApiError::not_found(format!("Allocation {ident} could not be found."))
                        .into_response(),
                );
            }
            return check_rules(policy, rules, caller, target).map_err(IntoResponse::into_response);
        }
        Subject::Runbook(ident) => {
            let Ok(runbook) = store.runbook_get(&Ident::parse(ident)).await else {
                return Ok(());
            };
            let target = Target {
                owner: runbook.owner.as_deref(),
                lessee: None,
            };
            // Ironic: a caller who may not read the runbook may still read a public one.
            let rules: Vec<&'static str> = rules
                .iter()
                .copied()
                .filter(|rule| !(*rule == "baremetal:runbook:get" && runbook.public))
                .collect();
            return check_rules(policy, &rules, caller, target)
                .map_err(IntoResponse::into_response);
        }
        Subject::Node(ident) => (ident.clone(), "baremetal:node:get"),
        Subject::Port(ident) => match store.port_get(&Ident::parse(ident)).await {
            Ok(port) => (port.node_uuid.to_string(), "baremetal:port:get"),
            Err(_) => return Ok(()),
        },
        Subject::Portgroup(ident) => match store.portgroup_get(&Ident::parse(ident)).await {
            Ok(portgroup) => (portgroup.node_uuid.to_string(), "baremetal:portgroup:get"),
            Err(_) => return Ok(()),
        },
        Subject::VolumeConnector(ident) => {
            let Ok(uuid) = uuid::Uuid::parse_str(ident) else {
                return Ok(());
            };
            match store.volume_connector_get(uuid).await {
                Ok(connector) => (connector.node_uuid.to_string(), "baremetal:volume:get"),
                Err(_) => return Ok(()),
            }
        }
        Subject::VolumeTarget(ident) => {
            let Ok(uuid) = uuid::Uuid::parse_str(ident) else {
                return Ok(());
            };
            match store.volume_target_get(uuid).await {
                Ok(target) => (target.node_uuid.to_string(), "baremetal:volume:get"),
                Err(_) => return Ok(()),
            }
        }
    };
    let node = match store.node_get(&Ident::parse(&node_ident)).await {
        Ok(node) => node,
        // Missing: the handler says so (or, for a body's node, explains the bad reference).
        // The rule still applies to what does not depend on a project.
        Err(_) => {
            return check_rules(policy, rules, caller, Target::default())
                .map_err(IntoResponse::into_response);
        }
    };
    let target = node_target(&node);
    if !policy.allows(visibility_rule, caller, target) {
        let shown = match &subject {
            Subject::Port(ident) => {
                return Err(
                    ApiError::not_found(format!("Port {ident} could not be found."))
                        .into_response(),
                );
            }
            Subject::Portgroup(ident) => {
                return Err(
                    ApiError::not_found(format!("Portgroup {ident} could not be found."))
                        .into_response(),
                );
            }
            Subject::VolumeConnector(ident) => {
                return Err(ApiError::not_found(format!(
                    "Volume connector {ident} could not be found."
                ))
                .into_response());
            }
            Subject::VolumeTarget(ident) => {
                return Err(ApiError::not_found(format!(
                    "Volume target {ident} could not be found."
                ))
                .into_response());
            }
            _ => node_ident,
        };
        return Err(hidden_node(&shown));
    }
    check_rules(policy, rules, caller, target).map_err(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_map_to_rules() {
        let node = || Subject::Node("n1".to_owned());
        let cases = [
            (Method::GET, "/v1/nodes", Check::List("node")),
            (Method::GET, "/v1/nodes/detail", Check::List("node")),
            (
                Method::POST,
                "/v1/nodes",
                Check::Rule("baremetal:node:create", Subject::Nothing),
            ),
            (
                Method::GET,
                "/v1/nodes/n1",
                Check::Rule("baremetal:node:get", node()),
            ),
            (
                Method::PATCH,
                "/v1/nodes/n1",
                Check::NodeUpdate("n1".into()),
            ),
            (
                Method::PUT,
                "/v1/nodes/n1/states/provision",
                Check::Provision("n1".into()),
            ),
            (
                Method::PUT,
                "/v1/nodes/n1/states/power",
                Check::Rule("baremetal:node:set_power_state", node()),
            ),
            (
                Method::GET,
                "/v1/nodes/n1/ports/detail",
                Check::Rule("baremetal:node:get", node()),
            ),
            (
                Method::DELETE,
                "/v1/nodes/n1/vifs/v1",
                Check::Rule("baremetal:node:vif:detach", node()),
            ),
            (
                Method::POST,
                "/v1/ports",
                Check::Rule("baremetal:port:create", Subject::BodyNode),
            ),
            (Method::GET, "/v1/ports/detail", Check::List("port")),
            (
                Method::GET,
                "/v1/portgroups/pg/ports",
                Check::Rule("baremetal:portgroup:get", Subject::Portgroup("pg".into())),
            ),
            (Method::GET, "/v1/chassis/c/nodes", Check::List("node")),
            (Method::GET, "/v1/volume/targets", Check::List("volume")),
            (
                Method::POST,
                "/v1/volume/connectors",
                Check::Rule("baremetal:volume:create", Subject::BodyNode),
            ),
            (
                Method::PATCH,
                "/v1/volume/connectors/c1",
                Check::Rule(
                    "baremetal:volume:update",
                    Subject::VolumeConnector("c1".into()),
                ),
            ),
            (
                Method::GET,
                "/v1/nodes/n1/volume/targets",
                Check::Rule("baremetal:volume:get", node()),
            ),
            (
                Method::PUT,
                "/v1/nodes/n1/states/boot_mode",
                Check::Rule("baremetal:node:set_boot_mode", node()),
            ),
            (
                Method::PUT,
                "/v1/nodes/n1/management/inject_nmi",
                Check::Rule("baremetal:node:inject_nmi", node()),
            ),
            (
                Method::GET,
                "/v1/nodes/n1/vendor_passthru/methods",
                Check::Rule("baremetal:node:vendor_passthru", node()),
            ),
            (
                Method::POST,
                "/v1/nodes/n1/vendor_passthru",
                Check::Rule("baremetal:node:vendor_passthru", node()),
            ),
            (
                Method::GET,
                "/v1/drivers/fake-hardware/vendor_passthru/methods",
                Check::Rule("baremetal:driver:vendor_passthru", Subject::Nothing),
            ),
            (
                Method::DELETE,
                "/v1/drivers/fake-hardware/vendor_passthru/some_method",
                Check::Rule("baremetal:driver:vendor_passthru", Subject::Nothing),
            ),
            (
                Method::GET,
                "/v1/deploy_templates",
                Check::Rule("baremetal:deploy_template:get", Subject::Nothing),
            ),
            (
                Method::DELETE,
                "/v1/deploy_templates/CUSTOM_X",
                Check::Rule("baremetal:deploy_template:delete", Subject::Nothing),
            ),
            (Method::GET, "/v1/runbooks/detail", Check::List("runbook")),
            (
                Method::POST,
                "/v1/runbooks",
                Check::Rule("baremetal:runbook:create", Subject::Nothing),
            ),
            (
                Method::PATCH,
                "/v1/runbooks/rb",
                Check::RunbookUpdate("rb".into()),
            ),
            (
                Method::GET,
                "/v1/runbooks/rb",
                Check::Rule("baremetal:runbook:get", Subject::Runbook("rb".into())),
            ),
            (
                Method::GET,
                "/v1/inspection_rules",
                Check::Rule("baremetal:inspection_rule:get", Subject::Nothing),
            ),
        ];
        for (method, path, expected) in cases {
            assert_eq!(classify(&method, path), expected, "{method} {path}");
        }
    }

    #[test]
    fn runbook_patches_pick_rules_by_path() {
        let rules = |paths: &[&str]| {
            runbook_update_rules(&paths.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>())
        };
        assert_eq!(rules(&["/extra/a"]), ["baremetal:runbook:update"]);
        assert_eq!(rules(&["/public"]), ["baremetal:runbook:update:public"]);
        assert_eq!(
            rules(&["/owner", "/steps/0/order"]),
            ["baremetal:runbook:update:owner", "baremetal:runbook:update"]
        );
        assert_eq!(rules(&[]), ["baremetal:runbook:update"]);
    }
}
