//! Request body size limits (Ironic's `[api]max_json_body_size` and its larger siblings for
//! the provisioning and inspection endpoints): a body over the limit is answered 413 before
//! any handler parses it.
//!
//! A declared `Content-Length` over the limit is refused without keeping it; any other body
//! is read up to the limit (so a chunked upload cannot grow without bound either) and handed
//! on in memory — every handler reads whole bodies anyway. What is left of a refused body is
//! read and thrown away (boundedly) before the 413 goes out with `Connection: close`, so the
//! client reads the answer instead of a connection reset.
//!
//! Lookups (`GET /v1/lookup`, public and answered from the database) are also rate-limited per
//! peer address with a token bucket: a flood from one address gets 429 with `Retry-After`
//! instead of a database query each.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::{CONNECTION, CONTENT_LENGTH, RETRY_AFTER};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::{BodyExt, Limited};

use crate::ApiError;

/// Ironic's defaults: 1 MiB in general, 64 MiB for `…/states/provision` (config drives, deploy
/// steps) and 16 MiB for `/v1/continue_inspection` (inventories with logs).
pub const DEFAULT_MAX_BODY_SIZE: usize = 1024 * 1024;
pub const DEFAULT_MAX_BODY_SIZE_PROVISION: usize = 64 * 1024 * 1024;
pub const DEFAULT_MAX_BODY_SIZE_INSPECTION: usize = 16 * 1024 * 1024;

/// The largest request bodies accepted, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimits {
    pub general: usize,
    pub provision: usize,
    pub inspection: usize,
}

impl Default for BodyLimits {
    fn default() -> Self {
        Self {
            general: DEFAULT_MAX_BODY_SIZE,
            provision: DEFAULT_MAX_BODY_SIZE_PROVISION,
            inspection: DEFAULT_MAX_BODY_SIZE_INSPECTION,
        }
    }
}

impl BodyLimits {
    /// The limit for a request to `path`.
    pub fn for_path(&self, path: &str) -> usize {
        let path = path.trim_matches('/');
        if path.ends_with("states/provision") {
            self.provision
        } else if path.ends_with("continue_inspection") {
            self.inspection
        } else {
            self.general
        }
    }
}

fn too_large(path: &str, size: Option<usize>, limit: usize) -> Response {
    tracing::warn!(
        path,
        size,
        limit,
        "request body over the size limit refused"
    );
    let mut response = ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        // Ironic's words, which clients match.
        "Request body is too large. Please contact the service administrator.",
    )
    .into_response();
    // The rest of the body is not read: the connection ends after this answer.
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}

/// How much of an oversized body is read and thrown away so the client, still sending, gets
/// to read the 413 (a server that closes a connection with unread data makes the kernel
/// reset it, and the client sees "connection reset" instead of the answer). Past this, or
/// after [`DRAIN_TIME`], the connection is closed anyway.
const DRAIN_BYTES: usize = 64 * 1024 * 1024;
const DRAIN_TIME: Duration = Duration::from_secs(10);

/// Reads and discards what is left of `body`, within [`DRAIN_BYTES`] and [`DRAIN_TIME`].
async fn drain(body: Body) {
    let drained = Limited::new(body, DRAIN_BYTES).collect();
    let _ = tokio::time::timeout(DRAIN_TIME, drained).await;
}

/// Middleware: 413 for a body over the limit of its path.
pub(crate) async fn limit_body(
    State(limits): State<BodyLimits>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_owned();
    let limit = limits.for_path(&path);
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<usize>().ok());
    if let Some(size) = declared
        && size > limit
    {
        drain(request.into_body()).await;
        return too_large(&path, Some(size), limit);
    }
    let (parts, mut body) = request.into_parts();
    let mut read = Vec::new();
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(frame) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                if read.len() + data.len() > limit {
                    drain(body).await;
                    return too_large(&path, None, limit);
                }
                read.extend_from_slice(&data);
            }
            Err(error) => {
                tracing::info!(%error, path, "could not read a request body");
                return ApiError::bad_request("Could not read the request body.").into_response();
            }
        }
    }
    let bytes = axum::body::Bytes::from(read);
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The most addresses whose buckets are remembered; full buckets are forgotten first.
const MAX_TRACKED_PEERS: usize = 10_000;

/// A token bucket per peer address for `/v1/lookup`: `burst` lookups at once, refilled at
/// `per_second`. Shared by every clone of the router it is configured into.
#[derive(Debug)]
pub struct LookupRateLimit {
    burst: f64,
    per_second: f64,
    /// Address (`None`: unknown) → (tokens left, when counted).
    buckets: Mutex<HashMap<Option<IpAddr>, (f64, Instant)>>,
}

impl Default for LookupRateLimit {
    /// 20 lookups at once, then one a second, per address: an agent looks up once per boot
    /// and retries with a backoff of seconds.
    fn default() -> Self {
        Self::new(20, 1.0)
    }
}

impl LookupRateLimit {
    pub fn new(burst: u32, per_second: f64) -> Self {
        Self {
            burst: f64::from(burst.max(1)),
            per_second: per_second.max(f64::MIN_POSITIVE),
            buckets: Mutex::default(),
        }
    }

    /// Takes one token for `peer` at `now`, or says in how many seconds one will be there.
    pub fn take(&self, peer: Option<IpAddr>, now: Instant) -> Result<(), u64> {
        // The map holds no invariant a panicking holder could break.
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if buckets.len() >= MAX_TRACKED_PEERS {
            let (burst, rate) = (self.burst, self.per_second);
            buckets.retain(|_, (tokens, then)| {
                *tokens + now.saturating_duration_since(*then).as_secs_f64() * rate < burst
            });
        }
        let (tokens, then) = buckets.entry(peer).or_insert((self.burst, now));
        let refilled = now.saturating_duration_since(*then).as_secs_f64() * self.per_second;
        *tokens = (*tokens + refilled).min(self.burst);
        *then = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            Ok(())
        } else {
            let wait = ((1.0 - *tokens) / self.per_second).ceil();
            // Bounded: a rate too small to express answers a day.
            Err(if wait.is_finite() && wait < 86_400.0 {
                (wait as u64).max(1)
            } else {
                86_400
            })
        }
    }
}

/// Middleware: 429 with `Retry-After` for lookups over the peer's rate.
pub(crate) async fn limit_lookups(
    State(limit): State<Arc<LookupRateLimit>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().trim_end_matches('/');
    if !matches!(path, "/v1/lookup" | "/v1/lookup.json") {
        return next.run(request).await;
    }
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|info| info.0.ip());
    match limit.take(peer, Instant::now()) {
        Ok(()) => next.run(request).await,
        Err(seconds) => {
            let shown = peer.map_or_else(|| "unknown".to_owned(), |ip| ip.to_string());
            tracing::warn!(peer = %shown, retry_after = seconds, "lookup rate limit reached");
            let mut response = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                format!("Too many lookups from {shown}; retry in {seconds} seconds."),
            )
            .into_response();
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(seconds));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn lookups_are_limited_per_address_and_refill() {
        let limit = LookupRateLimit::new(2, 0.5);
        let start = Instant::now();
        let one = Some(IpAddr::from([10, 0, 0, 1]));
        let two = Some(IpAddr::from([10, 0, 0, 2]));
        assert_eq!(limit.take(one, start), Ok(()));
        assert_eq!(limit.take(one, start), Ok(()));
        assert_eq!(limit.take(one, start), Err(2));
        // Another address has its own bucket.
        assert_eq!(limit.take(two, start), Ok(()));
        // Two seconds refill one token at 0.5/s.
        assert_eq!(limit.take(one, start + Duration::from_secs(2)), Ok(()));
        assert_eq!(limit.take(one, start + Duration::from_secs(2)), Err(2));
        // Never more than the burst, however long the wait.
        let later = start + Duration::from_secs(3600);
        assert_eq!(limit.take(one, later), Ok(()));
        assert_eq!(limit.take(one, later), Ok(()));
        assert!(limit.take(one, later).is_err());
    }

    #[test]
    fn provisioning_and_inspection_have_larger_limits() {
        let limits = BodyLimits::default();
        assert_eq!(limits.for_path("/v1/nodes"), DEFAULT_MAX_BODY_SIZE);
        assert_eq!(
            limits.for_path("/v1/nodes/n1/states/provision"),
            DEFAULT_MAX_BODY_SIZE_PROVISION
        );
        assert_eq!(
            limits.for_path("/v1/continue_inspection/"),
            DEFAULT_MAX_BODY_SIZE_INSPECTION
        );
    }
}
