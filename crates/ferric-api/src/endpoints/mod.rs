//! Every HTTP endpoint, declared once: method, path, operation id, the microversion it
//! appeared in (a named constant from [`since`]), the policy rule that guards it, its handler,
//! and its OpenAPI summary, parameters and schemas. The router ([`router`]), the OpenAPI
//! document (`crate::openapi`, checked in as `docs/openapi.json`), the authorization check
//! (`crate::authz`) and the plain version check ("this endpoint is newer than your
//! microversion") are all derived from these declarations, so they cannot drift apart.
//!
//! Theory of operation: [`all`] lists the endpoints (the tables live in [`nodes`],
//! [`templates`] and [`resources`]). Each [`Endpoint`] is built by [`op`] — which takes the handler, so an
//! endpoint without one does not compile — and refined with builder methods. [`router`] groups
//! the endpoints by path into axum routes and wraps each one newer than 1.1 in [`gate`],
//! which answers 404 (or, for [`Gate::Resource`], Ironic's 404/405) to older requests before
//! the handler runs. [`find`] matches a concrete request path to its declaration the way the
//! router does (a literal segment beats a `{parameter}`), for the authorization middleware.
//!
//! ## Adding an endpoint
//!
//! 1. Write the handler in its resource module under `src/v1/` (a plain axum handler; no
//!    version check of its own if the whole endpoint is new in one microversion), and beside
//!    it the `BodySpec` (`crate::v1::body`) it parses its body with, if it takes one.
//! 2. If it is new in a microversion, name that version in [`since`].
//! 3. Add one `op(Verb, "/v1/…", "resource_verb", v1::module::handler)` entry to the table
//!    in `nodes.rs`, `templates.rs` or `resources.rs`, with `.since(..)`, `.guard(..)` (its
//!    policy rule; a new rule also goes in `policy::RULES`), `.summary(..)`, `.refs(..)`,
//!    `.body_spec(..)`, `.ok(..)` and `.errors(..)`; the request schema is generated from the
//!    spec (response schemas are written in `openapi/schemas.rs`).
//! 4. `cargo xtask docs` regenerates `docs/openapi.json`; commit it.
//! 5. `cargo nextest run -p ferric-api --lib --test openapi --test authz` checks the rest: every
//!    declaration documented, routed and guarded, nothing routed outside this table, and each
//!    body's parser in agreement with its schema (`body_tests.rs`).

pub(crate) mod since;

mod nodes;
mod resources;
mod templates;

use std::collections::BTreeMap;
use std::sync::LazyLock;

use axum::Router;
use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use ferric_model::Microversion;
use serde_json::{Value, json};

use crate::v1::body::{BodySpec, Empty};
use crate::version::ApiVersion;
use crate::{ApiError, ApiState};

/// The HTTP methods endpoints are declared with (a `Get` endpoint also answers `HEAD`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Verb {
    /// The lower-case name OpenAPI uses as the operation's key.
    pub(crate) fn openapi(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Post => "post",
            Self::Put => "put",
            Self::Patch => "patch",
            Self::Delete => "delete",
        }
    }

    fn filter(self) -> MethodFilter {
        match self {
            Self::Get => MethodFilter::GET,
            Self::Post => MethodFilter::POST,
            Self::Put => MethodFilter::PUT,
            Self::Patch => MethodFilter::PATCH,
            Self::Delete => MethodFilter::DELETE,
        }
    }

    /// The verb a request method is served by (`HEAD` by `GET`), if any.
    fn of(method: &Method) -> Option<Self> {
        Some(match *method {
            Method::GET | Method::HEAD => Self::Get,
            Method::POST => Self::Post,
            Method::PUT => Self::Put,
            Method::PATCH => Self::Patch,
            Method::DELETE => Self::Delete,
            _ => return None,
        })
    }
}

/// Which resource a rule is checked on: its owner and lessee decide project-scoped rules.
/// The identifier is the path's first `{parameter}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum On {
    /// No one resource: creates, global reads.
    Nothing,
    Node,
    Port,
    Portgroup,
    Allocation,
    VolumeConnector,
    VolumeTarget,
    Runbook,
    /// The node named by the body's `node_uuid` (port, portgroup and volume creates).
    BodyNode,
}

/// The policy check that guards an endpoint (`crate::authz` carries it out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guard {
    /// Not declared: checked against `default` (admins only). A test fails for any endpoint
    /// left so.
    Unset,
    /// Served without credentials (version discovery, health, metrics, the ramdisk's calls);
    /// `auth::is_public_route` is derived from these ([`is_public_path`]).
    Public,
    /// This rule on this resource.
    Rule(&'static str, On),
    /// A listing of `baremetal:<kind>:list` (scoped to the caller's project) or
    /// `…:list_all` (everything).
    List(&'static str),
    /// `PUT /v1/nodes/{node}/states/provision`: the rule depends on the verb in the body.
    Provision,
    /// `PATCH /v1/nodes/{node}`: `…:update`, plus `…:update:owner` when the patch touches it.
    NodeUpdate,
    /// `PATCH /v1/runbooks/{runbook}`: `…:update`, `…:update:owner`, `…:update:public` by the
    /// paths the patch touches.
    RunbookUpdate,
}

/// How a request older than the endpoint is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gate {
    /// 404 naming the path, as if the endpoint did not exist (Ironic's usual answer).
    NotFound,
    /// 406: Ironic's answer for RAID (1.12) and for reading a node's traits (1.37).
    NotAcceptable,
    /// 405: Ironic's answer for setting a node's traits below 1.37.
    MethodNotAllowed,
    /// Ironic's answer for deploy templates and runbooks: 404 to reads, 405 to writes, naming
    /// the resource (plural).
    Resource(&'static str),
}

/// Builds the handler's route for one method, once per router.
type RouteFn = Box<dyn Fn() -> MethodRouter<ApiState> + Send + Sync>;

/// One endpoint: one method on one path.
pub(crate) struct Endpoint {
    pub(crate) verb: Verb,
    /// The path template, `{name}` for each parameter (names match `#/components/parameters`).
    pub(crate) path: &'static str,
    /// The OpenAPI `operationId`, `<resource>_<verb>`.
    pub(crate) id: &'static str,
    /// The first microversion that serves it; older requests are refused by `gate`.
    pub(crate) since: Microversion,
    pub(crate) gate: Gate,
    pub(crate) guard: Guard,
    pub(crate) doc: Doc,
    route: RouteFn,
}

/// Where an endpoint's request body is declared.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BodyDoc {
    /// A [`BodySpec`]: the handler parses the body with it and its schema is generated from it.
    Spec(&'static BodySpec),
    /// A schema of `openapi/schemas.rs`: a field table's create body, the JSON patch, or a
    /// body still written by hand (`endpoints/tests.rs` lists those; the list only shrinks).
    Schema(&'static str),
}

impl BodyDoc {
    /// The schema's name in `#/components/schemas`.
    pub(crate) fn schema(self) -> &'static str {
        match self {
            Self::Spec(spec) => spec.schema,
            Self::Schema(name) => name,
        }
    }
}

/// What the OpenAPI document says about an endpoint beyond its identity.
pub(crate) struct Doc {
    pub(crate) summary: &'static str,
    /// Parameters besides the version header: `$ref`s and inline query parameters.
    pub(crate) params: Vec<Value>,
    /// The request body: its declaration, or the name of a schema written elsewhere.
    pub(crate) body: Option<BodyDoc>,
    /// The body may be left out.
    pub(crate) body_optional: bool,
    /// The success status and its schema (`None`: no body).
    pub(crate) success: (u16, Option<&'static str>),
    /// The success body is plain text (`/metrics`), not JSON.
    pub(crate) plain_text: bool,
    /// Error statuses this endpoint can answer besides the ones every endpoint can.
    pub(crate) errors: &'static [u16],
    /// Also answers 202 with no body (asynchronous vendor methods).
    pub(crate) accepted_too: bool,
}

/// An endpoint served by `handler`, new in 1.1, unguarded and undocumented until the builder
/// methods say otherwise.
pub(crate) fn op<H, T>(verb: Verb, path: &'static str, id: &'static str, handler: H) -> Endpoint
where
    H: Handler<T, ApiState>,
    T: 'static,
{
    Endpoint {
        verb,
        path,
        id,
        since: Microversion::MIN,
        gate: Gate::NotFound,
        guard: Guard::Unset,
        doc: Doc {
            summary: "",
            params: Vec::new(),
            body: None,
            body_optional: false,
            success: (200, None),
            plain_text: false,
            errors: &[],
            accepted_too: false,
        },
        route: Box::new(move || on(verb.filter(), handler.clone())),
    }
}

impl Endpoint {
    pub(crate) fn since(mut self, since: Microversion) -> Self {
        self.since = since;
        self
    }

    /// Refuse older requests with another status than 404 (see [`Gate`]).
    pub(crate) fn refused_with(mut self, gate: Gate) -> Self {
        self.gate = gate;
        self
    }

    /// Refuse older requests as Ironic refuses them for a whole resource (see [`Gate`]).
    pub(crate) fn resource_gate(mut self, plural: &'static str) -> Self {
        self.gate = Gate::Resource(plural);
        self
    }

    pub(crate) fn guard(mut self, guard: Guard) -> Self {
        self.guard = guard;
        self
    }

    pub(crate) fn summary(mut self, summary: &'static str) -> Self {
        self.doc.summary = summary;
        self
    }

    /// Parameters defined in `#/components/parameters`.
    pub(crate) fn refs(mut self, names: &[&str]) -> Self {
        self.doc.params.extend(
            names
                .iter()
                .map(|name| json!({ "$ref": format!("#/components/parameters/{name}") })),
        );
        self
    }

    /// An inline parameter.
    pub(crate) fn param(mut self, param: Value) -> Self {
        self.doc.params.push(param);
        self
    }

    /// A body whose schema is written in `openapi/schemas.rs` (see [`BodyDoc::Schema`]).
    pub(crate) fn body(mut self, schema: &'static str) -> Self {
        self.doc.body = Some(BodyDoc::Schema(schema));
        self
    }

    /// A body the handler parses with `spec`; its schema is generated from it, and it may be
    /// left out when the spec says so.
    pub(crate) fn body_spec(mut self, spec: &'static BodySpec) -> Self {
        self.doc.body = Some(BodyDoc::Spec(spec));
        self.doc.body_optional = spec.empty != Empty::Refused;
        self
    }

    pub(crate) fn ok(mut self, status: u16, schema: Option<&'static str>) -> Self {
        self.doc.success = (status, schema);
        self
    }

    /// 200 with a plain-text body.
    pub(crate) fn ok_plain_text(mut self) -> Self {
        self.doc.success = (200, None);
        self.doc.plain_text = true;
        self
    }

    pub(crate) fn errors(mut self, errors: &'static [u16]) -> Self {
        self.doc.errors = errors;
        self
    }

    /// A vendor passthru call: an optional body of arguments, 200 with the return value or
    /// 202 for an asynchronous method.
    pub(crate) fn vendor_call(mut self) -> Self {
        if matches!(self.verb, Verb::Post | Verb::Put | Verb::Patch) {
            self.doc.body = Some(BodyDoc::Schema("VendorArguments"));
            self.doc.body_optional = true;
        }
        self.doc.accepted_too = true;
        self.doc.success = (200, Some("VendorReturn"));
        self.doc.errors = &[400, 409, 503];
        self
    }

    /// A listing: paging parameters, `fields` (not on detail paths), and its filters (each
    /// with the minor version it appeared in).
    pub(crate) fn listing(mut self, filters: &[(&str, u16)], detail_path: bool) -> Self {
        self = self.refs(&["limit", "marker", "sort_key", "sort_dir"]);
        if !detail_path {
            self = self.refs(&["fields", "detail"]);
        }
        for (name, since) in filters {
            self.doc.params.push(filter_param(name, *since));
        }
        self
    }

    /// The handler's route, wrapped in the version gate when the endpoint is newer than 1.1.
    fn method_router(&self) -> MethodRouter<ApiState> {
        let route = (self.route)();
        if self.since == Microversion::MIN {
            return route;
        }
        route.route_layer(axum::middleware::from_fn_with_state(
            (self.since, self.gate),
            gate,
        ))
    }
}

/// A list filter as an OpenAPI query parameter, typed by what the handler parses.
pub(crate) fn filter_param(name: &str, since: u16) -> Value {
    let schema = match name {
        "associated" | "maintenance" | "retired" | "sharded" | "include_children" => {
            json!({ "type": "boolean" })
        }
        "instance_uuid" | "chassis_uuid" | "parent_node" | "node_uuid" => {
            json!({ "type": "string", "format": "uuid" })
        }
        "provision_state" => json!({
            "type": "string",
            "enum": ferric_model::ProvisionState::ALL.map(|state| state.as_str()),
        }),
        "fault" => json!({
            "type": "string",
            "enum": ["power failure", "clean failure", "rescue abort failure", "service failure"],
        }),
        "shard" | "conductor_groups" => json!({
            "type": "string",
            "description": "A comma-separated list: records of nodes in any of them.",
        }),
        _ => json!({ "type": "string" }),
    };
    let mut param = json!({ "name": name, "in": "query", "required": false, "schema": schema });
    if since > 1 {
        param["x-ironic-since"] = json!(format!("1.{since}"));
    }
    param
}

/// A vendor passthru call on `path` with each HTTP method a vendor method may take (the
/// method itself says which it accepts); `ids` in the order GET, POST, PUT, PATCH, DELETE.
pub(crate) fn vendor_calls<H, T>(
    path: &'static str,
    params: &[&str],
    ids: [&'static str; 5],
    guard: Guard,
    handler: H,
) -> Vec<Endpoint>
where
    H: Handler<T, ApiState>,
    T: 'static,
{
    [Verb::Get, Verb::Post, Verb::Put, Verb::Patch, Verb::Delete]
        .into_iter()
        .zip(ids)
        .map(|(verb, id)| {
            op(verb, path, id, handler.clone())
                .guard(guard)
                .summary("Call a vendor passthru method")
                .refs(params)
                .vendor_call()
        })
        .collect()
}

/// Every endpoint Ferric serves.
pub(crate) fn all() -> &'static [Endpoint] {
    static ALL: LazyLock<Vec<Endpoint>> = LazyLock::new(|| {
        let mut all = resources::discovery();
        all.extend(nodes::endpoints());
        all.extend(resources::endpoints());
        all.extend(templates::endpoints());
        all
    });
    &ALL
}

/// The router of every declared endpoint (middleware and fallback are added by the caller).
pub(crate) fn router() -> Router<ApiState> {
    let mut by_path: BTreeMap<&'static str, MethodRouter<ApiState>> = BTreeMap::new();
    for endpoint in all() {
        let route = endpoint.method_router();
        let merged = match by_path.remove(endpoint.path) {
            Some(existing) => existing.merge(route),
            None => route,
        };
        by_path.insert(endpoint.path, merged);
    }
    by_path
        .into_iter()
        .fold(Router::new(), |router, (path, route)| {
            let first = path_since(path);
            router.route(
                path,
                route.fallback(move |request: Request| other_method(first, request)),
            )
        })
}

/// The answer to a request no declared path matches: 404, except where Ironic's routing
/// answers otherwise — a write to an unknown `/v1/nodes/{node}/states/{x}` is 405 (its state
/// controller has no such method), and `POST /v1/heartbeat` without the node in its path is
/// 400 from the ramdisk API's version on (404 before it).
pub(crate) async fn unrouted(request: Request) -> ApiError {
    let path = request.uri().path().trim_end_matches('/');
    let method = request.method();
    let segments: Vec<&str> = path.split('/').collect();
    let version = request
        .extensions()
        .get::<ApiVersion>()
        .map_or(Microversion::MIN, |version| version.0);
    if let ["", "v1", "nodes", _, "states", _] = segments.as_slice()
        && !matches!(*method, Method::GET | Method::HEAD)
    {
        return ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} is not allowed on {path}."),
        );
    }
    if path == "/v1/heartbeat" && *method == Method::POST && version >= since::RAMDISK {
        return ApiError::bad_request(
            "A heartbeat names its node in the path: POST /v1/heartbeat/{node_ident}.",
        );
    }
    ApiError::not_found(format!("The resource could not be found: {path}"))
}

/// The oldest microversion any method of `path` (a template) is served from.
fn path_since(path: &str) -> Microversion {
    all()
        .iter()
        .filter(|endpoint| endpoint.path == path)
        .map(|endpoint| endpoint.since)
        .min()
        .unwrap_or(Microversion::MIN)
}

/// A method the path does not serve: 404 when the request is older than everything the path
/// serves (the resource does not exist yet: Ironic's version check comes before its method
/// dispatch, `PUT …/vmedia` at 1.79), otherwise 405.
async fn other_method(first: Microversion, request: Request) -> ApiError {
    let version = request
        .extensions()
        .get::<ApiVersion>()
        .map_or(Microversion::MIN, |version| version.0);
    if version < first {
        return ApiError::not_found(format!(
            "The resource could not be found: {} (it needs API version {first} or later; this \
             request asked for {version}).",
            request.uri().path()
        ));
    }
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!(
            "{} is not allowed on {}.",
            request.method(),
            request.uri().path()
        ),
    )
}

/// The declaration that serves `method path` (a concrete path, no trailing slash) and the
/// value of the path's first parameter, matched as the router matches: where two templates
/// fit, the one with a literal segment earlier wins (`/v1/nodes/detail` over
/// `/v1/nodes/{node_ident}`).
pub(crate) fn find<'p>(
    method: &Method,
    path: &'p str,
) -> Option<(&'static Endpoint, Option<&'p str>)> {
    let verb = Verb::of(method)?;
    let trimmed = path.trim_end_matches('/');
    let path = if trimmed.is_empty() { "/" } else { trimmed };
    let segments: Vec<&str> = path.split('/').collect();
    let mut best: Option<(&'static Endpoint, Vec<bool>)> = None;
    for endpoint in all().iter().filter(|endpoint| endpoint.verb == verb) {
        let template: Vec<&str> = endpoint.path.split('/').collect();
        if template.len() != segments.len() {
            continue;
        }
        let mut literal = Vec::with_capacity(template.len());
        let fits = template.iter().zip(&segments).all(|(part, segment)| {
            let is_param = part.starts_with('{');
            literal.push(!is_param);
            (is_param && !segment.is_empty()) || part == segment
        });
        // `true` sorts after `false`: the larger pattern has literal segments earlier.
        if fits
            && best
                .as_ref()
                .is_none_or(|(_, previous)| literal > *previous)
        {
            best = Some((endpoint, literal));
        }
    }
    let (endpoint, _) = best?;
    let first_param = endpoint
        .path
        .split('/')
        .position(|part| part.starts_with('{'))
        .and_then(|index| segments.get(index).copied());
    Some((endpoint, first_param))
}

/// Whether `path` (concrete, without a trailing slash) is served by an endpoint declared
/// [`Guard::Public`], each `{parameter}` made of lower-case letters, digits and `-` only (a
/// node's UUID, as Ironic's public heartbeat route takes it): the public-route list of
/// `auth::is_public_route`, derived from the declarations.
pub(crate) fn is_public_path(path: &str) -> bool {
    static PUBLIC: LazyLock<Vec<Vec<&'static str>>> = LazyLock::new(|| {
        all()
            .iter()
            .filter(|endpoint| endpoint.guard == Guard::Public)
            .map(|endpoint| endpoint.path.split('/').collect())
            .collect()
    });
    let segments: Vec<&str> = path.split('/').collect();
    PUBLIC.iter().any(|template| {
        template.len() == segments.len()
            && template.iter().zip(&segments).all(|(part, segment)| {
                if part.starts_with('{') {
                    !segment.is_empty()
                        && segment
                            .chars()
                            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                } else {
                    part == segment
                }
            })
    })
}

/// Whether any method of a declared path serves `path` (a concrete path).
pub(crate) fn serves_path(path: &str) -> bool {
    [
        Method::GET,
        Method::POST,
        Method::PUT,
        Method::PATCH,
        Method::DELETE,
    ]
    .iter()
    .any(|method| find(method, path).is_some())
}

/// Middleware on each route newer than 1.1: refuses requests older than it.
async fn gate(
    State((since, gate)): State<(Microversion, Gate)>,
    request: Request,
    next: Next,
) -> Response {
    let version = request
        .extensions()
        .get::<ApiVersion>()
        .map_or(Microversion::MIN, |version| version.0);
    if version >= since {
        return next.run(request).await;
    }
    let error = match gate {
        Gate::NotFound => ApiError::not_found(format!(
            "The resource could not be found: {} (it needs API version {since} or later; \
             this request asked for {version}).",
            request.uri().path()
        )),
        Gate::NotAcceptable => ApiError::not_acceptable(format!(
            "{} {} needs API version {since} or later; this request asked for {version}.",
            request.method(),
            request.uri().path()
        )),
        Gate::MethodNotAllowed => ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "{} {} needs API version {since} or later; this request asked for {version}.",
                request.method(),
                request.uri().path()
            ),
        ),
        Gate::Resource(plural) => {
            let message = format!(
                "The API version does not allow {plural}: they need API version {since} or \
                 later; this request asked for {version}."
            );
            if matches!(*request.method(), Method::GET | Method::HEAD) {
                ApiError::not_found(message)
            } else {
                ApiError::new(StatusCode::METHOD_NOT_ALLOWED, message)
            }
        }
    };
    error.into_response()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod body_tests;
