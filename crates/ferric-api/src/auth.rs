//! Who may call the API: `noauth` (everyone), `http_basic` — HTTP basic authentication
//! against an Apache-style user file of bcrypt hashes, as Ironic's `auth_strategy =
//! http_basic` with `http_basic_auth_user_file` — or `keystone` (tokens validated by
//! `crate::keystone`).
//!
//! Theory of operation: the middleware lets the public routes through (version discovery,
//! `/health` and the ramdisk's lookup, heartbeat and continue-inspection endpoints, which
//! authenticate with the agent token instead), and demands a valid `Authorization: Basic`
//! header everywhere else. The user file is read on every check, so users can be added or
//! changed without a restart, as in Ironic. bcrypt is slow by design, so checks run on the
//! blocking pool and successful (hash, password) pairs are remembered in a small cache.
//!
//! Errors are Ironic's texts (401 with `WWW-Authenticate: Basic realm="Baremetal API"`, 400
//! for a malformed header) in the API's usual error body.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::ApiError;
use crate::policy::{Caller, Role};

/// How callers authenticate.
#[derive(Debug, Clone, Default)]
pub enum AuthStrategy {
    /// Everyone may call every endpoint (Ironic's `noauth`; the default).
    #[default]
    NoAuth,
    /// HTTP basic authentication against a user file.
    HttpBasic(BasicAuth),
    /// OpenStack Keystone tokens in `X-Auth-Token` (`crate::keystone`).
    Keystone(crate::keystone::KeystoneAuth),
}

/// The user an `http_basic` request authenticated as; a request extension for handlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedUser(pub String);

/// A user file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UserFileError {
    #[error("cannot read the HTTP basic auth user file {path}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the HTTP basic auth user file {path} has a password for {user} that is not a bcrypt \
         hash ($2y$, $2a$ or $2b$); create entries with `htpasswd -B`"
    )]
    NotBcrypt { path: PathBuf, user: String },
}

/// The most (hash, password) pairs the verification cache remembers.
const CACHE_CAPACITY: usize = 256;

/// (bcrypt hash, password) pairs that verified.
type VerifiedPairs = HashSet<(String, Vec<u8>)>;

/// `http_basic` settings: the user file, the roles file, and the cache of passwords already
/// verified.
#[derive(Debug, Clone)]
pub struct BasicAuth {
    user_file: PathBuf,
    /// `auth_users_file`: roles and project per user. Without one every user is an admin.
    roles_file: Option<PathBuf>,
    verified: Arc<Mutex<VerifiedPairs>>,
}

/// A roles file (`auth_users_file`) that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RolesFileError {
    #[error("cannot read the users file {path} (auth_users_file)")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the users file {path} (auth_users_file) is not a TOML table of [user] sections with \
         roles = [...] and an optional project: {message}"
    )]
    Syntax { path: PathBuf, message: String },
    #[error(
        "the users file {path} gives {user} the unknown role \"{role}\"; use admin, member, \
         reader or service"
    )]
    UnknownRole {
        path: PathBuf,
        user: String,
        role: String,
    },
}

/// One user's section of the roles file.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RolesEntry {
    #[serde(default)]
    roles: Vec<String>,
    project: Option<String>,
}

/// User → (roles, project), as the roles file says.
type UserRoles = BTreeMap<String, (BTreeSet<Role>, Option<String>)>;

/// Reads the roles file.
fn read_roles_file(path: &Path) -> Result<UserRoles, RolesFileError> {
    let text = std::fs::read_to_string(path).map_err(|source| RolesFileError::Unreadable {
        path: path.to_owned(),
        source,
    })?;
    let entries: BTreeMap<String, RolesEntry> =
        toml::from_str(&text).map_err(|error| RolesFileError::Syntax {
            path: path.to_owned(),
            message: error.message().to_owned(),
        })?;
    let mut users = BTreeMap::new();
    for (user, entry) in entries {
        let mut roles = BTreeSet::new();
        for role in entry.roles {
            let Some(parsed) = Role::parse(&role) else {
                return Err(RolesFileError::UnknownRole {
                    path: path.to_owned(),
                    user,
                    role,
                });
            };
            roles.insert(parsed);
        }
        let project = entry.project.filter(|project| !project.is_empty());
        users.insert(user, (roles, project));
    }
    Ok(users)
}

impl BasicAuth {
    /// Checks that `user_file` is readable and holds only bcrypt entries (as Ironic does when
    /// it starts), so a broken file stops the server instead of locking every caller out.
    pub fn from_file(user_file: &Path) -> Result<Self, UserFileError> {
        let text = read_user_file(user_file)?;
        for line in text.lines().map(str::trim) {
            if line.contains(':') {
                parse_entry(user_file, line)?;
            }
        }
        Ok(Self {
            user_file: user_file.to_owned(),
            roles_file: None,
            verified: Arc::default(),
        })
    }

    /// Gives users roles and projects from the TOML file at `path` (`auth_users_file`), checked
    /// now and re-read on every request like the user file. Users it does not name have no
    /// roles: they authenticate, and every rule refuses them.
    pub fn with_roles_file(mut self, path: &Path) -> Result<Self, RolesFileError> {
        read_roles_file(path)?;
        self.roles_file = Some(path.to_owned());
        Ok(self)
    }

    /// The caller `user` is, by the roles file (every user an admin without one). Blocking.
    fn caller(&self, user: &str) -> Result<Caller, RolesFileError> {
        let Some(path) = &self.roles_file else {
            return Ok(Caller {
                user: user.to_owned(),
                roles: BTreeSet::from([Role::Admin]),
                project: None,
            });
        };
        let (roles, project) = read_roles_file(path)?.remove(user).unwrap_or_default();
        Ok(Caller {
            user: user.to_owned(),
            roles,
            project,
        })
    }

    /// Whether `user` with `password` is in the file. Blocking: reads the file and may run
    /// bcrypt.
    fn check(&self, user: &str, password: &[u8]) -> Result<bool, UserFileError> {
        let text = read_user_file(&self.user_file)?;
        let prefix = format!("{user}:");
        let Some(line) = text
            .lines()
            .map(str::trim)
            .find(|line| line.starts_with(&prefix))
        else {
            tracing::info!(user, "HTTP basic auth: unknown user");
            return Ok(false);
        };
        let (_, hash) = parse_entry(&self.user_file, line)?;
        let key = (hash.to_owned(), password.to_vec());
        if self.cache().contains(&key) {
            return Ok(true);
        }
        let matches = bcrypt::verify(password, hash).unwrap_or(false);
        if matches {
            let mut cache = self.cache();
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
            cache.insert(key);
        } else {
            tracing::info!(user, "HTTP basic auth: wrong password");
        }
        Ok(matches)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, VerifiedPairs> {
        // The cache holds no invariant a panicking holder could break: use it anyway.
        self.verified
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn read_user_file(path: &Path) -> Result<String, UserFileError> {
    std::fs::read_to_string(path).map_err(|source| UserFileError::Unreadable {
        path: path.to_owned(),
        source,
    })
}

/// `user:hash`, with a bcrypt hash.
fn parse_entry<'l>(path: &Path, line: &'l str) -> Result<(&'l str, &'l str), UserFileError> {
    let (user, hash) = line.split_once(':').unwrap_or((line, ""));
    if !["$2y$", "$2a$", "$2b$"]
        .iter()
        .any(|prefix| hash.starts_with(prefix))
    {
        return Err(UserFileError::NotBcrypt {
            path: path.to_owned(),
            user: user.to_owned(),
        });
    }
    Ok((user, hash))
}

/// Routes that need no authentication (Ironic's `acl_public_routes`, plus `/health` and
/// `/metrics`): the endpoints the endpoint table declares `Guard::Public`.
pub fn is_public_route(path: &str) -> bool {
    // Ironic strips trailing slashes (but keeps "/") and allows a `.json` suffix.
    let trimmed = path.trim_end_matches('/');
    let path = if trimmed.is_empty() { "/" } else { trimmed };
    let path = path
        .strip_suffix(".json")
        .or_else(|| path.strip_suffix(".xml"))
        .unwrap_or(path);
    crate::endpoints::is_public_path(path)
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"Baremetal API\""),
    );
    response
}

/// The user and password of a `Basic` authorization header, or the error to answer instead.
fn credentials(request: &Request) -> Result<(String, Vec<u8>), ApiError> {
    if request.headers().get(AUTHORIZATION).is_none()
        && let Some(token) = console_stream_token(request)
    {
        return decode_basic(&token);
    }
    let Some(header) = request.headers().get(AUTHORIZATION) else {
        tracing::info!("HTTP basic auth: no authorization header");
        return Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "Authorization required",
        ));
    };
    let bad_request = |message: &str| ApiError::bad_request(message);
    let header = header
        .to_str()
        .map_err(|_| bad_request("Could not parse Authorization header"))?;
    let mut words = header.split_whitespace();
    let (Some(kind), Some(token)) = (words.next(), words.next()) else {
        return Err(bad_request("Could not parse Authorization header"));
    };
    if !kind.eq_ignore_ascii_case("basic") {
        return Err(bad_request(&format!(
            "Unsupported authorization type \"{kind}\""
        )));
    }
    decode_basic(token)
}

/// The `?token=` of a console stream request: browsers cannot set headers on a WebSocket,
/// so the UI may pass the value of its `Basic` authorization header there instead
/// (`docs/console.md`). Only that path takes it.
fn console_stream_token(request: &Request) -> Option<String> {
    if !request.uri().path().ends_with("/console/stream") {
        return None;
    }
    request.uri().query()?.split('&').find_map(|pair| {
        let value = pair.strip_prefix("token=")?;
        // Base64's '+', '/', '=' arrive percent-encoded from encodeURIComponent.
        Some(
            value
                .replace("%2B", "+")
                .replace("%2b", "+")
                .replace("%2F", "/")
                .replace("%2f", "/")
                .replace("%3D", "=")
                .replace("%3d", "="),
        )
    })
}

/// The user and password in the base64 `token` of a `Basic` authorization.
fn decode_basic(token: &str) -> Result<(String, Vec<u8>), ApiError> {
    let bad_request = |message: &str| ApiError::bad_request(message);
    let undecodable = || bad_request("Could not decode authorization token");
    let pair = STANDARD.decode(token).map_err(|_| undecodable())?;
    let colon = pair
        .iter()
        .position(|&byte| byte == b':')
        .ok_or_else(undecodable)?;
    let user = std::str::from_utf8(&pair[..colon]).map_err(|_| undecodable())?;
    Ok((user.to_owned(), pair[colon + 1..].to_vec()))
}

/// Middleware: lets public routes and `noauth` through; checks basic credentials otherwise.
pub(crate) async fn require_auth(
    State(strategy): State<AuthStrategy>,
    mut request: Request,
    next: Next,
) -> Response {
    if is_public_route(request.uri().path()) {
        return next.run(request).await;
    }
    let auth = match strategy {
        AuthStrategy::NoAuth => return next.run(request).await,
        AuthStrategy::Keystone(keystone) => return keystone_auth(&keystone, request, next).await,
        AuthStrategy::HttpBasic(auth) => auth,
    };
    let (user, password) = match credentials(&request) {
        Ok(credentials) => credentials,
        Err(error) if error.status == StatusCode::UNAUTHORIZED => {
            return unauthorized(&error.message);
        }
        Err(error) => return error.into_response(),
    };
    let checked = {
        let user = user.clone();
        tokio::task::spawn_blocking(move || -> Result<Option<Caller>, ApiError> {
            let internal = |error: &(dyn std::error::Error + 'static)| ApiError::internal(error);
            if !auth.check(&user, &password).map_err(|e| internal(&e))? {
                return Ok(None);
            }
            auth.caller(&user).map(Some).map_err(|e| internal(&e))
        })
        .await
    };
    match checked {
        Ok(Ok(Some(caller))) => {
            request.extensions_mut().insert(AuthenticatedUser(user));
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Ok(Ok(None)) => unauthorized("Incorrect username or password"),
        Ok(Err(error)) => error.into_response(),
        Err(error) => ApiError::internal(&error).into_response(),
    }
}

/// `auth_strategy = keystone`: the caller of the `X-Auth-Token`, or 401/503.
async fn keystone_auth(
    keystone: &crate::keystone::KeystoneAuth,
    mut request: Request,
    next: Next,
) -> Response {
    let token = request
        .headers()
        .get("X-Auth-Token")
        .and_then(|value| value.to_str().ok())
        .map(str::trim)
        .filter(|token| !token.is_empty())
        .map(str::to_owned);
    let result = match token {
        Some(token) => keystone.authenticate(&token).await,
        None => Err(crate::keystone::KeystoneError::Unauthenticated),
    };
    match result {
        Ok(caller) => {
            request
                .extensions_mut()
                .insert(AuthenticatedUser(caller.user.clone()));
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(error) => {
            let unauthenticated = matches!(error, crate::keystone::KeystoneError::Unauthenticated);
            let mut response = error.api_error().into_response();
            if unauthenticated
                && let Ok(value) = HeaderValue::from_str(&keystone.www_authenticate())
            {
                response.headers_mut().insert(WWW_AUTHENTICATE, value);
            }
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_routes_are_ironics_plus_health() {
        for public in [
            "/",
            "/v1",
            "/v1/",
            "/health",
            "/metrics",
            "/v1/lookup",
            "/v1/lookup.json",
            "/v1/heartbeat/0c3b7a2e-1f6d-4c7e-9a0b-5d4c3b2a1f0e",
            "/v1/heartbeat/node-1",
            "/v1/continue_inspection",
        ] {
            assert!(is_public_route(public), "{public}");
        }
        for private in [
            "/v1/nodes",
            "/v1/heartbeat/",
            "/v1/heartbeat/Node_1",
            "/v1/lookupx",
            "/v1/nodes/x/states",
        ] {
            assert!(!is_public_route(private), "{private}");
        }
    }
}
