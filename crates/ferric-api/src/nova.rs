//! Power updates to Nova (Ironic's `[nova] send_power_notifications`): when a node that holds
//! an instance is powered on or off other than by Nova — an operator's power action, a power
//! sync that finds the machine changed — Nova is told with `POST /os-server-external-events`,
//! event `power-update` (compute microversion 2.76), `server_uuid` the node's `instance_uuid`
//! and `tag` the state reached, `POWER_ON` or `POWER_OFF`. Nova then records the server's new
//! power state (`openstack server show` follows the machine) instead of forcing it back at its
//! next sync. Nova ignores the event while an action of its own is under way on the server, so
//! the events that follow its own requests are harmless as long as they arrive before the
//! action's result (the conductor waits for delivery before saving it, `power_events.rs`), and
//! Ironic sends them too.
//!
//! Nova is found as the `compute` endpoint (`nova_interface`, `nova_region_name`) of the
//! catalog of Ferric's Keystone service token ([`KeystoneAuth::service_endpoint`]); the
//! service user needs Nova's `service` role. Delivery is best effort, as in Ironic: a failure (Keystone or Nova down, an unknown server) is logged as a warning
//! and not retried; a token Nova refuses is renewed once.

use std::sync::Arc;

use ferric_conductor::PowerEvents;
use ferric_conductor::power_events::Delivery;
use ferric_model::resources::PowerState;
use reqwest::StatusCode;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::keystone::KeystoneAuth;

/// The compute API microversion that knows `power-update` (Ironic's `NOVA_API_MICROVERSION`).
pub const MICROVERSION: &str = "2.76";

/// Sends `power-update` events to the Nova of Keystone's catalog. Cheap to clone.
#[derive(Debug, Clone)]
pub struct NovaNotifier {
    inner: Arc<Settings>,
}

#[derive(Debug)]
struct Settings {
    keystone: KeystoneAuth,
    interface: String,
    region: Option<String>,
}

impl NovaNotifier {
    /// Nova's `interface` endpoint (`public`, `internal`, `admin`) in `region` (unset: any)
    /// of the catalog `keystone`'s service token carries.
    pub fn new(keystone: KeystoneAuth, interface: String, region: Option<String>) -> Self {
        Self {
            inner: Arc::new(Settings {
                keystone,
                interface,
                region,
            }),
        }
    }

    /// Sends one `power-update` and waits for Nova's answer: `Err` says why it was not
    /// accepted. Only `power on` and `power off` are sent (Ironic's `power_update`).
    pub async fn power_update(&self, server: Uuid, state: PowerState) -> Result<(), String> {
        let tag = match state {
            PowerState::On => "POWER_ON",
            PowerState::Off => "POWER_OFF",
            PowerState::Error => return Err(format!("no power-update for state \"{state}\"")),
        };
        let event = json!({"name": "power-update", "server_uuid": server, "tag": tag});
        let body = json!({"events": [event]});
        let mut renew = false;
        loop {
            let (token, url) = self
                .inner
                .keystone
                .service_endpoint(
                    "compute",
                    &self.inner.interface,
                    self.inner.region.as_deref(),
                    renew,
                )
                .await
                .map_err(|error| error.to_string())?;
            let url = url.ok_or_else(|| {
                format!(
                    "Keystone's catalog has no {} compute endpoint{}",
                    self.inner.interface,
                    self.inner
                        .region
                        .as_deref()
                        .map(|region| format!(" in region {region}"))
                        .unwrap_or_default()
                )
            })?;
            let url = format!("{}/os-server-external-events", versioned(&url));
            let response = self
                .inner
                .keystone
                .http()
                .post(&url)
                .header("X-Auth-Token", token)
                .header("OpenStack-API-Version", format!("compute {MICROVERSION}"))
                .header("X-OpenStack-Nova-API-Version", MICROVERSION)
                .json(&body)
                .send()
                .await
                .map_err(|error| format!("POST {url}: {error}"))?;
            let status = response.status();
            if status == StatusCode::UNAUTHORIZED && !renew {
                renew = true;
                continue;
            }
            let text = response.text().await.unwrap_or_default();
            if status.as_u16() >= 400 {
                return Err(format!("Nova answered {status} to {event}: {text}"));
            }
            let answer: Value = serde_json::from_str(&text).map_err(|error| {
                format!("Nova's answer to {event} is not JSON ({error}): {text}")
            })?;
            let code = answer["events"][0]["code"]
                .as_u64()
                .ok_or_else(|| format!("Nova's answer to {event} names no event code: {text}"))?;
            if code >= 400 {
                return Err(format!("Nova refused {event}: {}", answer["events"][0]));
            }
            return Ok(());
        }
    }
}

/// The compute endpoint with its API version: catalogs list it as `…/v2.1` (possibly with a
/// project ID after it) or unversioned.
fn versioned(url: &str) -> String {
    let url = url.trim_end_matches('/');
    if url.contains("/v2.1") || url.contains("/v2/") || url.ends_with("/v2") {
        url.to_owned()
    } else {
        format!("{url}/v2.1")
    }
}

impl PowerEvents for NovaNotifier {
    fn power_changed(&self, node: Uuid, instance: Uuid, state: PowerState) -> Delivery {
        let notifier = self.clone();
        Box::pin(async move {
            match notifier.power_update(instance, state).await {
                Ok(()) => tracing::info!(%node, %instance, %state, "Nova told of the power change"),
                Err(problem) => tracing::warn!(
                    %node,
                    %instance,
                    %state,
                    problem,
                    "could not tell Nova of the power change"
                ),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use axum::Json;
    use axum::Router;
    use axum::extract::State;
    use axum::http::HeaderMap;
    use axum::response::IntoResponse;
    use axum::routing::post;

    use super::*;
    use crate::keystone::KeystoneSettings;

    /// What the fake Nova received: (headers, body) per request.
    type Received = Arc<Mutex<Vec<(HeaderMap, Value)>>>;

    /// A local Keystone (tokens with a catalog naming the compute endpoint at `/compute/v2.1`)
    /// and Nova (answering each event with `code`) on one port; the notifier pointed at it.
    async fn fake(code: u16, catalog_type: &'static str) -> (NovaNotifier, Received) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let received: Received = Arc::default();
        let catalog_url = format!("{base}/compute/v2.1");
        let app = Router::new()
            .route(
                "/v3/auth/tokens",
                post(move || async move {
                    let body = json!({"token": {
                        "expires_at": "2999-01-01T00:00:00Z",
                        "catalog": [{"type": catalog_type, "endpoints": [
                            {"interface": "internal", "region_id": "R1", "url": "http://wrong"},
                            {"interface": "public", "region_id": "R1", "url": catalog_url},
                        ]}],
                    }});
                    ([("X-Subject-Token", "service-token")], Json(body))
                }),
            )
            .route(
                "/compute/v2.1/os-server-external-events",
                post(
                    move |State(received): State<Received>,
                          headers: HeaderMap,
                          Json(body): Json<Value>| async move {
                        let mut event = body["events"][0].clone();
                        received.lock().unwrap().push((headers, body));
                        event["code"] = json!(code);
                        event["status"] = json!(if code < 400 { "completed" } else { "failed" });
                        Json(json!({"events": [event]})).into_response()
                    },
                ),
            )
            .with_state(received.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let keystone = KeystoneAuth::new(KeystoneSettings {
            auth_url: format!("{base}/v3"),
            username: "ferric".to_owned(),
            password: "secret".to_owned(),
            project_name: "service".to_owned(),
            user_domain_name: "Default".to_owned(),
            project_domain_name: "Default".to_owned(),
            region_name: None,
            interface: "public".to_owned(),
            ca_file: None,
            timeout: Duration::from_secs(5),
            cache_size: 2,
            cache_time: Duration::from_secs(60),
        })
        .unwrap();
        let notifier = NovaNotifier::new(keystone, "public".to_owned(), Some("R1".to_owned()));
        (notifier, received)
    }

    #[tokio::test]
    async fn a_power_update_is_ironics_event_at_the_catalogs_compute_endpoint() {
        let (notifier, received) = fake(200, "compute").await;
        let server = Uuid::new_v4();
        notifier
            .power_update(server, PowerState::Off)
            .await
            .unwrap();
        notifier.power_update(server, PowerState::On).await.unwrap();
        let received = received.lock().unwrap();
        assert_eq!(received.len(), 2);
        let (headers, body) = &received[0];
        assert_eq!(headers["x-auth-token"], "service-token");
        assert_eq!(headers["openstack-api-version"], "compute 2.76");
        assert_eq!(headers["x-openstack-nova-api-version"], "2.76");
        assert_eq!(
            body,
            &json!({"events": [
                {"name": "power-update", "server_uuid": server.to_string(), "tag": "POWER_OFF"}
            ]})
        );
        assert_eq!(received[1].1["events"][0]["tag"], "POWER_ON");
    }

    #[tokio::test]
    async fn an_event_nova_refuses_is_an_error_naming_it() {
        let (notifier, received) = fake(404, "compute").await;
        let error = notifier
            .power_update(Uuid::new_v4(), PowerState::On)
            .await
            .unwrap_err();
        assert!(
            error.contains("Nova refused") && error.contains("404"),
            "{error}"
        );
        assert_eq!(received.lock().unwrap().len(), 1);
        let error = notifier
            .power_update(Uuid::new_v4(), PowerState::Error)
            .await
            .unwrap_err();
        assert!(error.contains("no power-update"), "{error}");
        assert_eq!(
            received.lock().unwrap().len(),
            1,
            "nothing sent for an error state"
        );
    }

    #[tokio::test]
    async fn no_compute_endpoint_in_the_catalog_is_an_error() {
        let (notifier, received) = fake(200, "image").await;
        let error = notifier
            .power_update(Uuid::new_v4(), PowerState::On)
            .await
            .unwrap_err();
        assert!(
            error.contains("no public compute endpoint in region R1"),
            "{error}"
        );
        assert!(received.lock().unwrap().is_empty());
    }

    #[test]
    fn the_endpoint_gets_its_version() {
        assert_eq!(versioned("http://n:8774/"), "http://n:8774/v2.1");
        assert_eq!(versioned("http://n:8774/v2.1"), "http://n:8774/v2.1");
        assert_eq!(
            versioned("http://n:8774/v2.1/abc"),
            "http://n:8774/v2.1/abc"
        );
        assert_eq!(versioned("http://n/compute/v2.1"), "http://n/compute/v2.1");
    }
}
