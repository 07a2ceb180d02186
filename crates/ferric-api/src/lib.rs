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
mod state;
pub mod v1;
pub mod version;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use tower::Layer;
use tower_http::normalize_path::NormalizePath;

pub use auth::AuthStrategy;
pub use error::ApiError;
pub use limits::BodyLimits;
pub use state::ApiState;
pub use v1::rendered::DEFAULT_RENDER_CACHE_SIZE;

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
