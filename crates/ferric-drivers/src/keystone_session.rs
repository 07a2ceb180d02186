//! Ferric's own Keystone session: it logs in as its service user (password, project scope),
//! keeps the token until shortly before it expires, and reads other services' endpoints from
//! that token's catalog. The API's token validation (`ferric-api`'s `keystone.rs`) and the
//! conductor's Glance client ([`crate::glance`]) share it, so there is one login path.
//!
//! Nothing is contacted until the first call: Ferric starts while Keystone is down, and the
//! next call after an outage tries again.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// Ferric's service credentials (the `keystone_*` settings).
#[derive(Debug, Clone)]
pub struct ServiceCredentials {
    /// The identity v3 endpoint, e.g. `http://keystone:5000/v3`.
    pub auth_url: String,
    pub username: String,
    pub password: String,
    pub project_name: String,
    pub user_domain_name: String,
    pub project_domain_name: String,
}

/// A service token and the catalog it came with.
#[derive(Debug, Clone)]
pub struct ServiceToken {
    pub token: String,
    pub catalog: Arc<Value>,
    renew_at: Instant,
}

/// Why Ferric has no usable service token: Keystone unreachable, slow or refusing.
#[derive(Debug, Clone, thiserror::Error)]
#[error("Keystone at {url} {problem}")]
pub struct SessionError {
    pub url: String,
    pub problem: String,
}

/// Why the HTTP client for Keystone cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot read the Keystone CA file {path} (keystone_cafile)")]
    CaFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the Keystone CA file {path} (keystone_cafile) holds no PEM certificate")]
    CaPem {
        path: PathBuf,
        #[source]
        source: reqwest::Error,
    },
    #[error("cannot set up the HTTP client for Keystone")]
    Client(#[source] reqwest::Error),
}

/// The HTTP client for Keystone and the services of its catalog: every request bounded by
/// `timeout`, the CA certificates of `ca_file` trusted besides the system's.
pub fn client(ca_file: Option<&Path>, timeout: Duration) -> Result<reqwest::Client, ClientError> {
    let mut builder = reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(3)))
        .timeout(timeout)
        .user_agent(concat!("ferric/", env!("CARGO_PKG_VERSION")));
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|source| ClientError::CaFile {
            path: path.to_owned(),
            source,
        })?;
        for certificate in
            reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| ClientError::CaPem {
                path: path.to_owned(),
                source,
            })?
        {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build().map_err(ClientError::Client)
}

/// The session: credentials, an HTTP client and the token held. Cheap to clone.
#[derive(Clone)]
pub struct ServiceSession {
    inner: Arc<Inner>,
}

struct Inner {
    credentials: ServiceCredentials,
    http: reqwest::Client,
    /// The per-request bound, named in errors.
    timeout: Duration,
    held: tokio::sync::Mutex<Option<ServiceToken>>,
}

impl std::fmt::Debug for ServiceSession {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ServiceSession")
            .field("auth_url", &self.inner.credentials.auth_url)
            .field("username", &self.inner.credentials.username)
            .finish_non_exhaustive()
    }
}

impl ServiceSession {
    /// A session logging in with `credentials` through `http`, whose requests are bounded by
    /// `timeout`.
    pub fn new(credentials: ServiceCredentials, http: reqwest::Client, timeout: Duration) -> Self {
        Self {
            inner: Arc::new(Inner {
                credentials,
                http,
                timeout,
                held: tokio::sync::Mutex::new(None),
            }),
        }
    }

    pub fn credentials(&self) -> &ServiceCredentials {
        &self.inner.credentials
    }

    /// The HTTP client the session logs in with (for calls made with its token).
    pub fn http(&self) -> &reqwest::Client {
        &self.inner.http
    }

    /// Ferric's token: the one held, or a new one when it is about to expire, when a service
    /// refused it (`renew`), or at first use.
    pub async fn token(&self, renew: bool) -> Result<ServiceToken, SessionError> {
        let mut held = self.inner.held.lock().await;
        if let Some(token) = held.as_ref()
            && !renew
            && token.renew_at > Instant::now()
        {
            return Ok(token.clone());
        }
        let fresh = self.login().await?;
        *held = Some(fresh.clone());
        Ok(fresh)
    }

    /// `POST /v3/auth/tokens` with the service user's password, scoped to its project.
    async fn login(&self) -> Result<ServiceToken, SessionError> {
        let credentials = &self.inner.credentials;
        let auth_url = credentials.auth_url.trim_end_matches('/');
        let body = json!({
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {"user": {
                        "name": credentials.username,
                        "domain": {"name": credentials.user_domain_name},
                        "password": credentials.password,
                    }},
                },
                "scope": {"project": {
                    "name": credentials.project_name,
                    "domain": {"name": credentials.project_domain_name},
                }},
            }
        });
        let response = self
            .inner
            .http
            .post(format!("{auth_url}/auth/tokens"))
            .json(&body)
            .send()
            .await
            .map_err(|error| self.unreachable(auth_url, &error))?;
        let status = response.status();
        if status != reqwest::StatusCode::CREATED && status != reqwest::StatusCode::OK {
            return Err(self.unavailable(
                auth_url,
                format!(
                    "refused Ferric's service credentials ({status}); check keystone_username, \
                     keystone_password and keystone_project_name"
                ),
            ));
        }
        let token = response
            .headers()
            .get("X-Subject-Token")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
            .ok_or_else(|| self.unavailable(auth_url, "issued no X-Subject-Token".to_owned()))?;
        let mut body: Value = response
            .json()
            .await
            .map_err(|error| self.unreachable(auth_url, &error))?;
        let lifetime = expires_at(&body["token"])
            .and_then(|at| (at - Utc::now()).to_std().ok())
            .unwrap_or(Duration::from_secs(600));
        // Renew a minute before expiry (or halfway, for short-lived tokens).
        let margin = Duration::from_secs(60).min(lifetime / 2);
        Ok(ServiceToken {
            token,
            catalog: Arc::new(body["token"]["catalog"].take()),
            renew_at: Instant::now() + lifetime - margin,
        })
    }

    /// A session error for a failed request to `url`.
    pub fn unreachable(&self, url: &str, error: &reqwest::Error) -> SessionError {
        let problem = if error.is_timeout() {
            format!(
                "did not answer within {} s",
                self.inner.timeout.as_secs_f32()
            )
        } else if error.is_connect() {
            "is unreachable (connection failed)".to_owned()
        } else {
            format!("failed: {error}")
        };
        self.unavailable(url, problem)
    }

    fn unavailable(&self, url: &str, problem: String) -> SessionError {
        tracing::warn!(url, problem, "Keystone unavailable");
        SessionError {
            url: url.to_owned(),
            problem,
        }
    }
}

/// The token's `expires_at`.
fn expires_at(token: &Value) -> Option<DateTime<Utc>> {
    token["expires_at"]
        .as_str()
        .and_then(|text| DateTime::parse_from_rfc3339(text).ok())
        .map(|at| at.with_timezone(&Utc))
}

/// The URL of `service_type`'s endpoint in a token's catalog: the first of `interfaces` that
/// the catalog has (in `region`, if named), without a trailing `/`.
pub fn endpoint(
    catalog: &Value,
    service_type: &str,
    interfaces: &[&str],
    region: Option<&str>,
) -> Option<String> {
    let endpoints: Vec<&Value> = catalog
        .as_array()?
        .iter()
        .filter(|service| service["type"] == service_type)
        .flat_map(|service| service["endpoints"].as_array().into_iter().flatten())
        .filter(|endpoint| {
            region.is_none_or(|region| {
                endpoint["region_id"] == region || endpoint["region"] == region
            })
        })
        .collect();
    interfaces.iter().find_map(|interface| {
        endpoints
            .iter()
            .find(|endpoint| endpoint["interface"] == *interface)
            .and_then(|endpoint| endpoint["url"].as_str())
            .map(|url| url.trim_end_matches('/').to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalog_names_endpoints_by_interface_and_region() {
        let catalog = json!([
            {"type": "image", "endpoints": [
                {"interface": "public", "region_id": "R1", "url": "http://g1:9292/"},
                {"interface": "internal", "region_id": "R2", "url": "http://g2:9292"},
            ]},
            {"type": "identity", "endpoints": [{"interface": "internal", "url": "http://k"}]},
        ]);
        let find = |interfaces: &[&str], region| endpoint(&catalog, "image", interfaces, region);
        assert_eq!(
            find(&["internal", "public"], None).as_deref(),
            Some("http://g2:9292")
        );
        assert_eq!(
            find(&["internal", "public"], Some("R1")).as_deref(),
            Some("http://g1:9292"),
            "the next interface when the first is not in the region"
        );
        assert_eq!(find(&["admin"], None), None);
        assert_eq!(endpoint(&catalog, "compute", &["public"], None), None);
    }
}
