//! Ferric's HTTP API: the Ironic-compatible Bare Metal API v1 (version discovery,
//! microversion negotiation, Ironic's error bodies) and the health endpoint.
//!
//! Theory of operation: every request passes through [`version::negotiate_version`], which decides the
//! effective microversion (or answers 406) and stamps the version headers on the response;
//! then [`error::ironic_error_bodies`] makes sure any 4xx/5xx — ours or axum's own (404, 405,
//! 415) — carries Ironic's double-encoded `error_message` body that clients parse.
//!
//! Architecture Invariant: handlers never change a node's provision state; they validate,
//! record intent and hand over to the conductor.

pub mod error;
mod health;
mod root;
pub mod v1;
pub mod version;

use axum::Router;
use axum::routing::get;
use ferric_conductor::Conductor;
use ferric_db::Store;
use v1::{nodes, ports};

pub use error::ApiError;

/// What every handler can reach.
#[derive(Clone)]
pub struct ApiState {
    pub store: Store,
    /// Where every state change goes (the API never writes provision or power state).
    pub conductor: Conductor,
}

/// The whole HTTP surface, ready to serve.
pub fn router(state: ApiState) -> Router {
    Router::new()
        .route("/", get(root::root_get))
        .route("/v1", get(root::v1_get))
        .route("/v1/", get(root::v1_get))
        .route("/health", get(health::health_get))
        .route("/v1/nodes", get(nodes::node_list).post(nodes::node_create))
        .route("/v1/nodes/detail", get(nodes::node_list_detail))
        .route(
            "/v1/nodes/{node_ident}",
            get(nodes::node_get)
                .patch(nodes::node_update)
                .delete(nodes::node_delete),
        )
        .route("/v1/nodes/{node_ident}/ports", get(ports::node_port_list))
        .route("/v1/ports", get(ports::port_list).post(ports::port_create))
        .route("/v1/ports/detail", get(ports::port_list_detail))
        .route(
            "/v1/ports/{port_ident}",
            get(ports::port_get)
                .patch(ports::port_update)
                .delete(ports::port_delete),
        )
        .merge(v1::states::routes())
        .merge(v1::drivers::routes())
        .merge(v1::portgroups::routes())
        .merge(v1::chassis::routes())
        .merge(v1::conductors::routes())
        .merge(v1::traits::routes())
        .merge(v1::vifs::routes())
        .merge(v1::history::routes())
        .fallback(error::not_found)
        .with_state(state)
        .layer(axum::middleware::from_fn(error::ironic_error_bodies))
        .layer(axum::middleware::from_fn(version::negotiate_version))
}
