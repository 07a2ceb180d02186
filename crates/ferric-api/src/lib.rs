//! Ferric's HTTP API: the Ironic-compatible Bare Metal API v1 (version discovery,
//! microversion negotiation, Ironic's error bodies) and the health endpoint.
//!
//! Theory of operation: every request passes through [`version::negotiate_version`], which decides the
//! effective microversion (or answers 406) and stamps the version headers on the response;
//! then [`error::ironic_error_bodies`] makes sure any 4xx/5xx — ours or axum's own (404, 405,
//! 415) — carries Ironic's double-encoded `error_message` body that clients parse; then
//! [`auth::require_auth`] checks credentials (`http_basic`, or Keystone tokens with
//! [`keystone`]; public routes pass),
//! [`limits::limit_body`] refuses oversized bodies (413) and [`authz::authorize`] checks the
//! caller's roles and project against the [`policy::Policy`] (403, or 404 for a node outside
//! the caller's project), before any handler runs.
//!
//! Architecture Invariant: handlers never change a node's provision state; they validate,
//! record intent and hand over to the conductor.

mod aliases;
pub mod auth;
pub mod authz;
mod endpoints;
pub mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod health;
pub mod keystone;
pub mod limits;
pub mod listener;
mod metrics;
pub mod nova;
pub mod openapi;
pub mod policy;
mod root;
pub mod v1;
pub mod version;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use ferric_conductor::Handoff;
use ferric_db::Store;
use tower::Layer;
use tower_http::normalize_path::NormalizePath;

pub use auth::AuthStrategy;
pub use error::ApiError;
pub use limits::BodyLimits;
pub use v1::rendered::DEFAULT_RENDER_CACHE_SIZE;

/// What every handler can reach.
#[derive(Clone)]
pub struct ApiState {
    pub store: Store,
    /// Where every state change goes (the API never writes provision or power state): the
    /// node's owning conductor, in this process or handed over to another.
    pub conductor: Handoff,
    /// Serialized node documents of detail listings, by node revision.
    pub(crate) rendered: Arc<v1::rendered::RenderedNodes>,
    /// The process's metrics (the conductor's registry), shown on `GET /metrics`.
    pub metrics: ferric_metrics::Metrics,
}

impl ApiState {
    /// `conductor`: a [`Handoff`], or a `Conductor` when everything runs in this process.
    pub fn new(store: Store, conductor: impl Into<Handoff>) -> Self {
        let conductor: Handoff = conductor.into();
        Self {
            store,
            metrics: conductor.drivers().metrics().clone(),
            conductor,
            rendered: Arc::default(),
        }
    }

    /// Holds at most `bytes` of rendered detail documents (`api_render_cache_size`; 0: none).
    #[must_use]
    pub fn with_render_cache_size(mut self, bytes: usize) -> Self {
        self.rendered = Arc::new(v1::rendered::RenderedNodes::with_budget(bytes));
        self
    }

    /// Drops the rendered documents if no detail listing used them for `idle` (they are
    /// rendered again on demand); the bytes dropped. The server calls it every few seconds.
    pub fn drop_idle_caches(&self, idle: std::time::Duration) -> usize {
        self.rendered.drop_if_idle(idle)
    }
}

/// How the HTTP surface is guarded: who may call it, what each caller may do, and how large a
/// request may be.
#[derive(Debug, Clone, Default)]
pub struct ApiConfig {
    pub auth: AuthStrategy,
    /// The rules `http_basic` and Keystone callers are checked against (unused with
    /// `noauth`).
    pub policy: Arc<policy::Policy>,
    pub body_limits: BodyLimits,
    /// The per-address rate of `/v1/lookup` (shared by every router made with this config).
    pub lookup_rate: Arc<limits::LookupRateLimit>,
    /// What this listener serves (`enable_ramdisk_endpoints`, `ramdisk_listen`).
    pub endpoints: listener::Endpoints,
}

/// The whole HTTP surface with the default [`ApiConfig`] (`noauth`, Ironic's body limits).
pub fn router(state: ApiState) -> Router {
    router_with(state, ApiConfig::default())
}

/// The whole HTTP surface, ready to serve: every endpoint declared in [`endpoints`], behind
/// the middleware.
pub fn router_with(state: ApiState, config: ApiConfig) -> Router {
    let metrics = state.metrics.clone();
    let routes = endpoints::router()
        .fallback(endpoints::unrouted)
        .with_state(state.clone())
        .layer(axum::middleware::from_fn_with_state(
            authz::Authz {
                policy: config.policy,
                store: state.store,
            },
            authz::authorize,
        ))
        // `limit_body` bounds every body (declared or streamed), so axum's own default
        // limit would only get in the way of the larger provisioning limit.
        .layer(DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn_with_state(
            config.body_limits,
            limits::limit_body,
        ))
        .layer(axum::middleware::from_fn_with_state(
            config.auth,
            auth::require_auth,
        ))
        .layer(axum::middleware::from_fn_with_state(
            config.lookup_rate,
            limits::limit_lookups,
        ))
        .layer(axum::middleware::from_fn_with_state(
            config.endpoints,
            listener::serve_only,
        ))
        .layer(axum::middleware::from_fn(error::ironic_error_bodies))
        .layer(axum::middleware::from_fn(version::negotiate_version))
        // Outermost, so a request's time includes every other layer; as a router layer it
        // sees the matched route template.
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            metrics::record_request,
        ));
    // Clients add a trailing slash now and then (`GET /v1/nodes/?fields=…` from the
    // baremetal CLI); Ironic serves both spellings, so every path is tried without it. Before
    // anything routes, version-less and `.json` spellings become the declared path
    // (`aliases.rs`): the same handler, authentication and policy serve them.
    let canonical = axum::middleware::map_request(aliases::canonical)
        .layer(NormalizePath::trim_trailing_slash(routes));
    Router::new().fallback_service(canonical)
}
