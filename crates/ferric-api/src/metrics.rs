//! `GET /metrics` (Prometheus; public like `/health`, not part of Ironic's API) and the
//! middleware that times every request by its route template.
//!
//! The counters and histograms live in the process's [`ferric_metrics::Metrics`]; a scrape
//! adds the levels read now — nodes per provision and power state (one grouped query, never a
//! walk over the nodes) and the conductor's worker pool.
//!
//! The middleware is the outermost layer: it times every request under its method, status and
//! matched route template (`MatchedPath`; a router layer sees it), never the raw path, so the
//! series stay bounded whatever the nodes are named; requests no route matched share
//! `route="unmatched"`. It also counts the agents' lookups and heartbeats by the status they were
//! answered with, so their handlers stay untouched. Per request this costs a clock read and one
//! histogram update; nothing per node.

use std::borrow::Cow;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ferric_metrics::{AgentResult, Metrics, Snapshot};

use crate::{ApiError, ApiState};

/// The route label of requests no route matched (404s, and 405s on unknown methods).
const UNMATCHED: &str = "unmatched";

/// `GET /metrics`: the OpenMetrics text Prometheus scrapes.
pub(crate) async fn metrics_get(State(state): State<ApiState>) -> Result<Response, ApiError> {
    let counts = state.store.node_state_counts().await.map_err(|error| {
        tracing::warn!(error = %error, "metrics: cannot count nodes");
        ApiError::service_unavailable(format!(
            "The database ({}) is unreachable, so node counts cannot be read; check \
             database_url and that the database server is running.",
            state.store.backend_name()
        ))
    })?;
    let mut snapshot = Snapshot {
        workers: state.conductor.worker_pool(),
        ..Snapshot::default()
    };
    for (provision_state, power_state, nodes) in counts {
        let nodes = u64::try_from(nodes).unwrap_or(0);
        add(&mut snapshot.provision_states, provision_state, nodes);
        add(&mut snapshot.power_states, power_state, nodes);
    }
    let text = state.metrics.encode(&snapshot);
    Ok(([(CONTENT_TYPE, ferric_metrics::CONTENT_TYPE)], text).into_response())
}

/// Adds `count` to `key`'s entry (the store groups by both states; each gauge by one).
fn add<K: PartialEq>(totals: &mut Vec<(K, u64)>, key: K, count: u64) {
    match totals.iter_mut().find(|(known, _)| *known == key) {
        Some((_, total)) => *total += count,
        None => totals.push((key, count)),
    }
}

/// Middleware: records each request's latency under its method, matched route template (not
/// the raw path: one series per route, whatever the node names) and status, and counts the
/// agents' lookups and heartbeats by how they were answered.
pub(crate) async fn record_request(
    State(metrics): State<Metrics>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let route: Cow<'static, str> = match request.extensions().get::<MatchedPath>() {
        Some(path) => Cow::Owned(path.as_str().to_owned()),
        None => Cow::Borrowed(UNMATCHED),
    };
    let response = next.run(request).await;
    let status = response.status().as_u16();
    match route.as_ref() {
        "/v1/lookup" => metrics.agent_lookup(AgentResult::from_status(status)),
        "/v1/heartbeat/{node_ident}" => metrics.agent_heartbeat(AgentResult::from_status(status)),
        _ => {}
    }
    metrics.api_request(method.as_str(), route, status, started.elapsed());
    response
}
