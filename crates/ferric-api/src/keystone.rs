//! `auth_strategy = keystone`: callers present an OpenStack Keystone token in `X-Auth-Token`,
//! which Ferric validates against Keystone's v3 API, as Ironic does through keystonemiddleware.
//!
//! Theory of operation: Ferric logs in to Keystone as its own service user (password, project
//! scope) and keeps that service token until shortly before it expires. A caller's token is
//! checked with `GET /v3/auth/tokens` (`X-Auth-Token`: the service token, `X-Subject-Token`:
//! the caller's). The answer becomes a [`Caller`] for the policy engine — the same facts
//! keystonemiddleware hands Ironic as `X-Roles`, `X-Project-Id` and `OpenStack-System-Scope`:
//!
//! - a system-scoped token (`system: {all: true}`) is a system caller (`project: None`) with
//!   its roles: admin, member and reader act on every node as the policy allows;
//! - a project-scoped token is a caller of that project (by ID): it sees and acts on the nodes
//!   its project owns or leases. Its `admin` role counts as `member` and `manager` there
//!   (Ironic's project-admin is an owner, not a system administrator);
//! - the `service` role is Ferric's `service` persona whatever the scope (other OpenStack
//!   services, which Ironic lets act on every node);
//! - a domain-scoped or unscoped token gets no roles: every rule refuses it.
//!
//! Answers are remembered in a bounded LRU cache keyed by a SHA-256 of the token (never the
//! token itself), each until `keystone_token_cache_time` passes or the token expires, whichever
//! comes first; tokens Keystone rejected are remembered too, so a client retrying a bad token
//! does not reach Keystone each time. A revoked token therefore stays usable for up to the
//! cache time, as with keystonemiddleware's cache.
//!
//! Failures: a missing, unknown, revoked or expired token is 401 with `WWW-Authenticate:
//! Keystone uri="…"` (clients re-authenticate); Keystone unreachable, slow (every request is
//! bounded by `keystone_timeout`) or refusing Ferric's own credentials is 503 naming Keystone.
//! Nothing is kept of an outage: the next request tries again, so the API recovers by itself.

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use lru::LruCache;
use serde_json::Value;
use sha2::{Digest, Sha256};

use ferric_drivers::keystone_session::{ServiceCredentials, ServiceSession};

use crate::ApiError;
use crate::policy::{Caller, Role};

/// Ferric's service credentials and how it talks to Keystone (the `keystone_*` settings).
#[derive(Debug, Clone)]
pub struct KeystoneSettings {
    /// The identity v3 endpoint, e.g. `http://keystone:5000/v3`.
    pub auth_url: String,
    pub username: String,
    pub password: String,
    pub project_name: String,
    pub user_domain_name: String,
    pub project_domain_name: String,
    /// The region whose identity endpoint to use (the catalog of the service token); `None`:
    /// any region.
    pub region_name: Option<String>,
    /// The catalog interface of the identity endpoint tokens are validated at: `public`,
    /// `internal` or `admin`. Without such an endpoint in the catalog, `auth_url` is used.
    pub interface: String,
    /// PEM CA certificates to trust for Keystone's HTTPS, besides the system's.
    pub ca_file: Option<PathBuf>,
    /// The bound on each request to Keystone (connecting included).
    pub timeout: Duration,
    /// How many validated tokens are remembered.
    pub cache_size: usize,
    /// How long a validation is remembered (at most until the token expires).
    pub cache_time: Duration,
}

/// Why a request could not be authenticated.
#[derive(Debug, thiserror::Error)]
pub enum KeystoneError {
    /// The caller's token is missing, unknown, revoked or expired: 401.
    #[error("The request you have made requires authentication.")]
    Unauthenticated,
    /// Keystone did not answer, or not usefully: 503.
    #[error("Keystone at {url} {problem}")]
    Unavailable { url: String, problem: String },
}

/// The settings that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum KeystoneSettingsError {
    #[error(transparent)]
    Client(#[from] ferric_drivers::keystone_session::ClientError),
    #[error("{0} is required with auth_strategy = keystone")]
    Missing(&'static str),
}

/// A validation remembered.
#[derive(Debug, Clone)]
struct Cached {
    /// `None`: Keystone said the token is not valid.
    caller: Option<Caller>,
    /// When to ask again: the cache time or the token's expiry, the earlier.
    until: Instant,
}

/// Ferric's own token, and the endpoint to validate at.
#[derive(Debug, Clone)]
struct ServiceToken {
    token: String,
    identity_url: String,
    /// The token's service catalog (other services' endpoints, `service_endpoint`).
    catalog: Arc<Value>,
}

/// The `keystone` strategy: settings, HTTP client, service token and cache. Cheap to clone.
#[derive(Clone)]
pub struct KeystoneAuth {
    inner: Arc<Inner>,
}

struct Inner {
    settings: KeystoneSettings,
    http: reqwest::Client,
    /// Ferric's login, shared in form with the conductor's Glance client.
    session: ServiceSession,
    cache: Mutex<LruCache<[u8; 32], Cached>>,
}

impl std::fmt::Debug for KeystoneAuth {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("KeystoneAuth")
            .field("auth_url", &self.inner.settings.auth_url)
            .field("username", &self.inner.settings.username)
            .finish_non_exhaustive()
    }
}

impl KeystoneAuth {
    /// Checks the settings and builds the HTTP client; contacts Keystone only on the first
    /// request, so Ferric starts while Keystone is down.
    pub fn new(settings: KeystoneSettings) -> Result<Self, KeystoneSettingsError> {
        for (value, name) in [
            (&settings.auth_url, "keystone_auth_url"),
            (&settings.username, "keystone_username"),
            (
                &settings.password,
                "keystone_password (or keystone_password_file)",
            ),
            (&settings.project_name, "keystone_project_name"),
        ] {
            if value.trim().is_empty() {
                return Err(KeystoneSettingsError::Missing(name));
            }
        }
        let http = ferric_drivers::keystone_session::client(
            settings.ca_file.as_deref(),
            settings.timeout,
        )?;
        let capacity = NonZeroUsize::new(settings.cache_size.max(1)).unwrap_or(NonZeroUsize::MIN);
        let session = ServiceSession::new(
            ServiceCredentials {
                auth_url: settings.auth_url.clone(),
                username: settings.username.clone(),
                password: settings.password.clone(),
                project_name: settings.project_name.clone(),
                user_domain_name: settings.user_domain_name.clone(),
                project_domain_name: settings.project_domain_name.clone(),
            },
            http.clone(),
            settings.timeout,
        );
        Ok(Self {
            inner: Arc::new(Inner {
                settings,
                http,
                session,
                cache: Mutex::new(LruCache::new(capacity)),
            }),
        })
    }

    /// The `WWW-Authenticate` value of a 401: where clients get a token (the auth URL without
    /// its `/v3`, as keystonemiddleware's `www_authenticate_uri` usually is).
    pub fn www_authenticate(&self) -> String {
        let url = self.inner.settings.auth_url.trim_end_matches('/');
        let url = url.strip_suffix("/v3").unwrap_or(url);
        format!("Keystone uri=\"{url}\"")
    }

    /// The caller `token` authenticates, from the cache or from Keystone.
    pub async fn authenticate(&self, token: &str) -> Result<Caller, KeystoneError> {
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(cached) = self.cached(&key) {
            return cached.ok_or(KeystoneError::Unauthenticated);
        }
        let (caller, expires_at) = match self.validate(token).await? {
            Some((caller, expires_at)) => (Some(caller), expires_at),
            None => (None, None),
        };
        let mut until = Instant::now() + self.inner.settings.cache_time;
        if let Some(expires_at) = expires_at {
            let left = (expires_at - Utc::now()).to_std().unwrap_or_default();
            until = until.min(Instant::now() + left);
        }
        self.lock_cache().put(
            key,
            Cached {
                caller: caller.clone(),
                until,
            },
        );
        caller.ok_or(KeystoneError::Unauthenticated)
    }

    /// `Some(answer)` when the cache holds an answer still good.
    fn cached(&self, key: &[u8; 32]) -> Option<Option<Caller>> {
        let mut cache = self.lock_cache();
        let entry = cache.get(key)?;
        if entry.until > Instant::now() {
            return Some(entry.caller.clone());
        }
        cache.pop(key);
        None
    }

    fn lock_cache(&self) -> std::sync::MutexGuard<'_, LruCache<[u8; 32], Cached>> {
        // The cache holds no invariant a panicking holder could break.
        self.inner
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Asks Keystone about `token`: the caller and its expiry, or `None` for a bad token.
    async fn validate(
        &self,
        token: &str,
    ) -> Result<Option<(Caller, Option<DateTime<Utc>>)>, KeystoneError> {
        // A service token Keystone no longer accepts (revoked, keys rotated) is replaced once.
        for attempt in 0..2 {
            let service = self.service_token(attempt > 0).await?;
            let url = format!("{}/auth/tokens?nocatalog", service.identity_url);
            let response = self
                .inner
                .http
                .get(&url)
                .header("X-Auth-Token", &service.token)
                .header("X-Subject-Token", token)
                .send()
                .await
                .map_err(|error| self.unreachable(&service.identity_url, &error))?;
            match response.status() {
                StatusCode::OK => {
                    let body: Value = response
                        .json()
                        .await
                        .map_err(|error| self.unreachable(&service.identity_url, &error))?;
                    return Ok(Some(caller_of(&body["token"])));
                }
                // Keystone's answer for an unknown, revoked or expired subject token.
                StatusCode::NOT_FOUND => {
                    tracing::info!("Keystone: token not valid");
                    return Ok(None);
                }
                StatusCode::UNAUTHORIZED if attempt == 0 => continue,
                status => {
                    return Err(self.unavailable(
                        &service.identity_url,
                        format!(
                            "answered {status} to Ferric's token validation (its service user \
                             {} needs the service or a reader role; check the keystone_* \
                             settings)",
                            self.inner.settings.username
                        ),
                    ));
                }
            }
        }
        Err(self.unavailable(
            &self.inner.settings.auth_url,
            "does not accept Ferric's fresh service token".to_owned(),
        ))
    }

    /// Ferric's own token (the session's) and the identity endpoint of its catalog.
    async fn service_token(&self, renew: bool) -> Result<ServiceToken, KeystoneError> {
        let settings = &self.inner.settings;
        let held =
            self.inner
                .session
                .token(renew)
                .await
                .map_err(|error| KeystoneError::Unavailable {
                    url: error.url,
                    problem: error.problem,
                })?;
        let identity_url = identity_endpoint(
            &held.catalog,
            &settings.interface,
            settings.region_name.as_deref(),
        )
        .unwrap_or_else(|| settings.auth_url.trim_end_matches('/').to_owned());
        Ok(ServiceToken {
            token: held.token,
            identity_url: identity_url.trim_end_matches('/').to_owned(),
            catalog: held.catalog,
        })
    }

    /// The HTTP client Keystone is called with (its CA file and timeout), for the services
    /// of its catalog too.
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.inner.http
    }

    /// Ferric's service token and the URL of the catalog's `service_type` endpoint of
    /// `interface` (in `region`, if named), for calling another service (Nova's external
    /// events); `renew`: log in again first (the service refused the token). The URL is
    /// `None` when the catalog has no such endpoint.
    pub async fn service_endpoint(
        &self,
        service_type: &str,
        interface: &str,
        region: Option<&str>,
        renew: bool,
    ) -> Result<(String, Option<String>), KeystoneError> {
        let service = self.service_token(renew).await?;
        let url = ferric_drivers::keystone_session::endpoint(
            &service.catalog,
            service_type,
            &[interface],
            region,
        );
        Ok((service.token, url))
    }

    fn unreachable(&self, url: &str, error: &reqwest::Error) -> KeystoneError {
        let error = self.inner.session.unreachable(url, error);
        KeystoneError::Unavailable {
            url: error.url,
            problem: error.problem,
        }
    }

    fn unavailable(&self, url: &str, problem: String) -> KeystoneError {
        tracing::warn!(url, problem, "Keystone unavailable: cannot validate tokens");
        KeystoneError::Unavailable {
            url: url.to_owned(),
            problem,
        }
    }
}

impl KeystoneError {
    /// The API error: 401 (the caller's problem) or 503 (Keystone's).
    pub fn api_error(&self) -> ApiError {
        match self {
            Self::Unauthenticated => ApiError::new(StatusCode::UNAUTHORIZED, self.to_string()),
            Self::Unavailable { .. } => ApiError::service_unavailable(format!(
                "{self}; tokens cannot be validated until Keystone answers. Try again later."
            )),
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

/// The identity endpoint of `interface` (in `region`, if named) in a token's catalog.
fn identity_endpoint(catalog: &Value, interface: &str, region: Option<&str>) -> Option<String> {
    ferric_drivers::keystone_session::endpoint(catalog, "identity", &[interface], region).map(
        |url| {
            // Catalogs list the identity endpoint with or without its version.
            if url.ends_with("/v3") {
                url
            } else {
                format!("{url}/v3")
            }
        },
    )
}

/// The caller a validated token (the `token` object of Keystone's answer) stands for, and its
/// expiry.
fn caller_of(token: &Value) -> (Caller, Option<DateTime<Utc>>) {
    let user = token["user"]["name"]
        .as_str()
        .or_else(|| token["user"]["id"].as_str())
        .unwrap_or("unknown")
        .to_owned();
    let names: Vec<&str> = token["roles"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|role| role["name"].as_str())
        .collect();
    let system = token["system"]["all"].as_bool() == Some(true);
    let project = token["project"]["id"].as_str().map(str::to_owned);
    let mut roles = std::collections::BTreeSet::new();
    for name in &names {
        let Some(role) = Role::parse(&name.to_ascii_lowercase()) else {
            continue;
        };
        match role {
            // A project's admin administers its project's nodes, not the system: a member,
            // and the manager of its project (Keystone's own role chain).
            Role::Admin if !system => roles.extend([Role::Member, Role::Manager]),
            role => {
                roles.insert(role);
            }
        }
    }
    let (roles, project) = match (system, project) {
        (true, _) => (roles, None),
        (false, Some(project)) => (roles, Some(project)),
        // Domain-scoped or unscoped: no Ironic rule applies to it. The marker project keeps
        // it from counting as system-scoped.
        (false, None) => (
            std::collections::BTreeSet::new(),
            Some("(no project scope)".to_owned()),
        ),
    };
    (
        Caller {
            user,
            roles,
            project,
        },
        expires_at(token),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::json;

    use super::*;

    fn settings() -> KeystoneSettings {
        KeystoneSettings {
            auth_url: "http://keystone.example:5000/v3/".to_owned(),
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
            cache_time: Duration::from_secs(300),
        }
    }

    #[test]
    fn scopes_and_roles_map_to_callers() {
        let (system, _) = caller_of(&json!({
            "user": {"name": "ops"}, "system": {"all": true},
            "roles": [{"name": "admin"}, {"name": "member"}, {"name": "reader"}],
        }));
        assert_eq!(system.project, None);
        assert!(system.roles.contains(&Role::Admin));

        let (project, expiry) = caller_of(&json!({
            "user": {"name": "alice"}, "project": {"id": "p1", "name": "project-a"},
            "roles": [{"name": "admin"}, {"name": "reader"}, {"name": "manager"}],
            "expires_at": "2030-01-01T00:00:00.000000Z",
        }));
        assert_eq!(project.project.as_deref(), Some("p1"));
        assert_eq!(
            project.roles,
            BTreeSet::from([Role::Member, Role::Reader, Role::Manager])
        );
        assert!(expiry.is_some());

        let (service, _) = caller_of(&json!({
            "user": {"name": "nova"}, "project": {"id": "svc"}, "roles": [{"name": "service"}],
        }));
        assert_eq!(service.roles, BTreeSet::from([Role::Service]));

        let (domain, _) = caller_of(&json!({
            "user": {"name": "d"}, "domain": {"id": "default"}, "roles": [{"name": "admin"}],
        }));
        assert!(domain.roles.is_empty());
        assert!(domain.project.is_some());
    }

    #[test]
    fn the_catalog_names_the_identity_endpoint() {
        let catalog = json!([
            {"type": "baremetal", "endpoints": [{"interface": "public", "url": "http://b"}]},
            {"type": "identity", "endpoints": [
                {"interface": "public", "region_id": "R1", "url": "http://k1:5000"},
                {"interface": "internal", "region_id": "R2", "url": "http://k2/v3/"},
            ]},
        ]);
        assert_eq!(
            identity_endpoint(&catalog, "public", None).as_deref(),
            Some("http://k1:5000/v3")
        );
        assert_eq!(
            identity_endpoint(&catalog, "internal", Some("R2")).as_deref(),
            Some("http://k2/v3")
        );
        assert_eq!(identity_endpoint(&catalog, "internal", Some("R1")), None);
    }

    #[test]
    fn the_challenge_names_keystone() {
        let auth = KeystoneAuth::new(settings()).unwrap();
        assert_eq!(
            auth.www_authenticate(),
            "Keystone uri=\"http://keystone.example:5000\""
        );
        let mut missing = settings();
        missing.password.clear();
        assert!(
            KeystoneAuth::new(missing)
                .unwrap_err()
                .to_string()
                .contains("keystone_password")
        );
    }

    #[test]
    fn the_cache_forgets_expired_answers_and_is_bounded() {
        let auth = KeystoneAuth::new(settings()).unwrap();
        let caller = Caller {
            user: "u".to_owned(),
            roles: BTreeSet::from([Role::Reader]),
            project: None,
        };
        let put = |key: u8, until: Instant| {
            auth.lock_cache().put(
                [key; 32],
                Cached {
                    caller: Some(caller.clone()),
                    until,
                },
            );
        };
        let later = Instant::now() + Duration::from_secs(60);
        put(1, later);
        put(2, Instant::now());
        assert_eq!(auth.cached(&[1; 32]), Some(Some(caller.clone())));
        assert_eq!(
            auth.cached(&[2; 32]),
            None,
            "an expired answer is asked again"
        );
        put(3, later);
        put(4, later);
        assert_eq!(auth.lock_cache().len(), 2);
        assert_eq!(auth.cached(&[1; 32]), None, "the least recently used went");
    }

    #[tokio::test]
    async fn keystone_down_is_503_within_the_timeout() {
        // A port nothing listens on: the connection is refused at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let mut settings = settings();
        settings.auth_url = format!("http://127.0.0.1:{port}/v3");
        let auth = KeystoneAuth::new(settings).unwrap();
        let error = auth.authenticate("token").await.unwrap_err();
        let api = error.api_error();
        assert_eq!(api.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(
            api.message.contains("Keystone at http://127.0.0.1"),
            "{api:?}"
        );
    }
}
