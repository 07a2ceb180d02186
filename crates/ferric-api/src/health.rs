//! `GET /health`: is this process serving and can it reach its database? For load balancers
//! and `ferric` operators; not part of Ironic's API.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::{ApiError, ApiState};

pub(crate) async fn health_get(State(state): State<ApiState>) -> Result<Json<Value>, ApiError> {
    match state.store.ping().await {
        Ok(()) => Ok(Json(json!({
            "status": "ok",
            "database": state.store.backend_name(),
            "conductor": state.conductor.hostname(),
            "free_workers": state.conductor.free_workers(),
            "reconcilers": state.conductor.reconciler_status(),
        }))),
        Err(error) => {
            tracing::warn!(error = %error, "health check: database unreachable");
            Err(ApiError::service_unavailable(format!(
                "The database ({}) is unreachable; check database_url and that the database \
                 server is running.",
                state.store.backend_name()
            )))
        }
    }
}
