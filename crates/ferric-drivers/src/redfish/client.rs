//! The Redfish HTTP client every node shares: connections and sessions per BMC, separate
//! connect and read timeouts, retries with backoff on connection errors and 5xx answers, and
//! a limit on the requests one BMC serves at once.
//!
//! Sessions (`redfish_auth_type` `session`, or `auto` when the service root links a session
//! collection) are created on first use, kept per BMC and credentials, and created again when
//! the BMC answers 401 to a kept one (it expired or the BMC restarted).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::info::{AuthType, RedfishInfo, VerifyCa};
use crate::bmc::{BmcLimits, BmcSettings, lock};

/// Why a Redfish request failed, naming the BMC; shown in `last_error`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RedfishError {
    #[error(
        "Redfish BMC {address}: authentication failed (HTTP {status}) — check \
         redfish_username/redfish_password"
    )]
    Auth { address: String, status: u16 },
    #[error(
        "Redfish BMC {address}: cannot connect ({reason}) after {attempts} attempts — check \
         redfish_address and that the BMC is reachable from the conductor"
    )]
    Unreachable {
        address: String,
        reason: String,
        attempts: u32,
    },
    #[error("Redfish BMC {address}: no answer within {timeout:?} to {method} {path}")]
    Timeout {
        address: String,
        method: String,
        path: String,
        timeout: Duration,
    },
    #[error(
        "Redfish BMC {address}: {method} {path} failed with HTTP {status} after {attempts} attempts: {message}"
    )]
    Server {
        address: String,
        method: String,
        path: String,
        status: u16,
        attempts: u32,
        message: String,
    },
    #[error("Redfish BMC {address}: {method} {path} was refused with HTTP {status}: {message}")]
    Refused {
        address: String,
        method: String,
        path: String,
        status: u16,
        message: String,
    },
    #[error("Redfish BMC {address}: {message}")]
    Protocol { address: String, message: String },
}

/// A request's answer: status and JSON body (`Null` when empty or not JSON), plus headers
/// the callers need.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) body: Value,
    pub(crate) location: Option<String>,
    pub(crate) auth_token: Option<String>,
}

#[derive(Debug, Clone)]
struct Session {
    token: String,
    location: Option<String>,
}

/// What this process knows about one BMC.
#[derive(Debug, Default)]
struct Bmc {
    /// Where its session collection lives: `Some(None)` once the root was read and links
    /// none.
    sessions_path: Option<Option<String>>,
    /// Sessions by (username, password).
    sessions: HashMap<(String, String), Session>,
    /// The only ComputerSystem's path, for nodes without `redfish_system_id`.
    default_system: Option<String>,
}

/// The shared client pool; [`crate::Drivers`] holds one.
#[derive(Debug)]
pub(crate) struct Clients {
    settings: BmcSettings,
    verified: Option<reqwest::Client>,
    unverified: Option<reqwest::Client>,
    with_bundle: Mutex<HashMap<std::path::PathBuf, reqwest::Client>>,
    bmcs: Mutex<HashMap<String, Bmc>>,
    limits: BmcLimits,
}

fn builder(settings: &BmcSettings) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .connect_timeout(settings.connect_timeout)
        .read_timeout(settings.read_timeout)
        .pool_idle_timeout(Duration::from_secs(90))
        .user_agent(concat!("ferric/", env!("CARGO_PKG_VERSION")))
}

impl Clients {
    pub(crate) fn new(settings: &BmcSettings) -> Self {
        // Building a client fails only when the TLS backend cannot start; requests then
        // report it (see `client`) instead of the process refusing to start.
        let verified = builder(settings)
            .build()
            .inspect_err(|error| tracing::error!(%error, "cannot build the Redfish HTTP client"))
            .ok();
        let unverified = builder(settings)
            .danger_accept_invalid_certs(true)
            .build()
            .ok();
        Self {
            settings: settings.clone(),
            verified,
            unverified,
            with_bundle: Mutex::new(HashMap::new()),
            bmcs: Mutex::new(HashMap::new()),
            limits: BmcLimits::new(settings.max_requests_per_bmc),
        }
    }

    pub(crate) fn settings(&self) -> &BmcSettings {
        &self.settings
    }

    fn client(&self, info: &RedfishInfo) -> Result<reqwest::Client, RedfishError> {
        let protocol = |message: String| RedfishError::Protocol {
            address: info.address.clone(),
            message,
        };
        match &info.verify_ca {
            VerifyCa::System => self
                .verified
                .clone()
                .ok_or_else(|| protocol("the HTTPS client could not be set up".to_owned())),
            VerifyCa::No => self
                .unverified
                .clone()
                .ok_or_else(|| protocol("the HTTPS client could not be set up".to_owned())),
            VerifyCa::Bundle(path) => {
                if let Some(client) = lock(&self.with_bundle).get(path) {
                    return Ok(client.clone());
                }
                let pem = std::fs::read(path).map_err(|error| {
                    protocol(format!(
                        "cannot read redfish_verify_ca bundle {}: {error}",
                        path.display()
                    ))
                })?;
                let certificates =
                    reqwest::Certificate::from_pem_bundle(&pem).map_err(|error| {
                        protocol(format!(
                            "redfish_verify_ca bundle {} holds no usable PEM certificate: {error}",
                            path.display()
                        ))
                    })?;
                let mut builder = builder(&self.settings).tls_built_in_root_certs(false);
                for certificate in certificates {
                    builder = builder.add_root_certificate(certificate);
                }
                let client = builder.build().map_err(|error| {
                    protocol(format!("cannot set up HTTPS with that bundle: {error}"))
                })?;
                lock(&self.with_bundle).insert(path.clone(), client.clone());
                Ok(client)
            }
        }
    }

    /// Sends one request to the BMC with authentication, under the BMC's request limit,
    /// retrying connection failures, timeouts and 5xx answers.
    pub(crate) async fn send(
        &self,
        info: &RedfishInfo,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Answer, RedfishError> {
        let _slot = self.limits.acquire(&info.address).await;
        let session = self.session(info).await?;
        match self
            .send_raw(info, method.clone(), path, body, session.as_ref())
            .await
        {
            // A kept session the BMC no longer knows: log in again, once.
            Err(RedfishError::Auth { .. }) if session.is_some() => {
                self.forget_session(info);
                let session = self.session(info).await?;
                self.send_raw(info, method, path, body, session.as_ref())
                    .await
            }
            other => other,
        }
    }

    /// The system path of a node without `redfish_system_id`, cached per BMC.
    pub(crate) fn default_system(&self, address: &str) -> Option<String> {
        lock(&self.bmcs)
            .get(address)
            .and_then(|bmc| bmc.default_system.clone())
    }

    pub(crate) fn remember_default_system(&self, address: &str, path: &str) {
        lock(&self.bmcs)
            .entry(address.to_owned())
            .or_default()
            .default_system = Some(path.to_owned());
    }

    fn credentials(info: &RedfishInfo) -> (String, String) {
        (
            info.username.clone().unwrap_or_default(),
            info.password.clone().unwrap_or_default(),
        )
    }

    fn forget_session(&self, info: &RedfishInfo) {
        if let Some(bmc) = lock(&self.bmcs).get_mut(&info.address) {
            bmc.sessions.remove(&Self::credentials(info));
        }
    }

    /// The session to use, creating it when needed; `None` means basic authentication.
    async fn session(&self, info: &RedfishInfo) -> Result<Option<Session>, RedfishError> {
        if info.auth_type == AuthType::Basic || info.username.is_none() {
            return Ok(None);
        }
        let credentials = Self::credentials(info);
        let known_path = {
            let bmcs = lock(&self.bmcs);
            let bmc = bmcs.get(&info.address);
            if let Some(session) = bmc.and_then(|bmc| bmc.sessions.get(&credentials)) {
                return Ok(Some(session.clone()));
            }
            bmc.and_then(|bmc| bmc.sessions_path.clone())
        };
        let sessions_path = match known_path {
            Some(path) => path,
            None => {
                let root = self
                    .send_raw(info, Method::GET, "/redfish/v1/", None, None)
                    .await?
                    .body;
                let path = root
                    .pointer("/Links/Sessions/@odata.id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                lock(&self.bmcs)
                    .entry(info.address.clone())
                    .or_default()
                    .sessions_path = Some(path.clone());
                path
            }
        };
        let Some(sessions_path) = sessions_path else {
            return match info.auth_type {
                AuthType::Session => Err(RedfishError::Protocol {
                    address: info.address.clone(),
                    message: "the BMC offers no sessions (its service root links no session \
                              collection); set redfish_auth_type to basic or auto"
                        .to_owned(),
                }),
                _ => Ok(None),
            };
        };
        let login = json!({"UserName": credentials.0, "Password": credentials.1});
        let answer = self
            .send_raw(info, Method::POST, &sessions_path, Some(&login), None)
            .await?;
        let token = answer.auth_token.ok_or_else(|| RedfishError::Protocol {
            address: info.address.clone(),
            message: "the BMC created a session but sent no X-Auth-Token".to_owned(),
        })?;
        let session = Session {
            token,
            location: answer.location,
        };
        tracing::debug!(bmc = %info.address, location = ?session.location, "Redfish session created");
        lock(&self.bmcs)
            .entry(info.address.clone())
            .or_default()
            .sessions
            .insert(credentials, session.clone());
        Ok(Some(session))
    }

    async fn send_raw(
        &self,
        info: &RedfishInfo,
        method: Method,
        path: &str,
        body: Option<&Value>,
        session: Option<&Session>,
    ) -> Result<Answer, RedfishError> {
        let client = self.client(info)?;
        let url = format!("{}{path}", info.address);
        let attempts = self.settings.retries + 1;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut request = client
                .request(method.clone(), &url)
                .header("Accept", "application/json")
                .header("OData-Version", "4.0");
            if let Some(session) = session {
                request = request.header("X-Auth-Token", &session.token);
            } else if let Some(username) = &info.username {
                request = request.basic_auth(username, info.password.as_ref());
            }
            if let Some(body) = body {
                request = request.json(body);
            }
            let failure = match request.send().await {
                Ok(response) => {
                    let status = response.status();
                    let header = |name: &str| {
                        response
                            .headers()
                            .get(name)
                            .and_then(|value| value.to_str().ok())
                            .map(str::to_owned)
                    };
                    let location = header("location");
                    let auth_token = header("x-auth-token");
                    let bytes = response.bytes().await;
                    let body = bytes.as_deref().map_or(Value::Null, decode_body);
                    // A read is useless without its document: a BMC answering 200 with
                    // something else (an HTML error page, a truncated body) has failed.
                    if status.is_success() && method == Method::GET && body.is_null() {
                        return Err(RedfishError::Protocol {
                            address: info.address.clone(),
                            message: format!(
                                "GET {path} answered HTTP {} with a body that is not a JSON \
                                 document",
                                status.as_u16()
                            ),
                        });
                    }
                    if status.is_success() {
                        return Ok(Answer {
                            body,
                            location,
                            auth_token,
                        });
                    }
                    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
                        return Err(RedfishError::Auth {
                            address: info.address.clone(),
                            status: status.as_u16(),
                        });
                    }
                    if !status.is_server_error() {
                        return Err(RedfishError::Refused {
                            address: info.address.clone(),
                            method: method.to_string(),
                            path: path.to_owned(),
                            status: status.as_u16(),
                            message: error_message(&body),
                        });
                    }
                    RedfishError::Server {
                        address: info.address.clone(),
                        method: method.to_string(),
                        path: path.to_owned(),
                        status: status.as_u16(),
                        attempts: attempt,
                        message: error_message(&body),
                    }
                }
                Err(error) if error.is_timeout() => RedfishError::Timeout {
                    address: info.address.clone(),
                    method: method.to_string(),
                    path: path.to_owned(),
                    timeout: self.settings.read_timeout,
                },
                Err(error) => RedfishError::Unreachable {
                    address: info.address.clone(),
                    reason: root_cause(&error),
                    attempts: attempt,
                },
            };
            if attempt >= attempts {
                return Err(failure);
            }
            tracing::debug!(bmc = %info.address, attempt, error = %failure, "Redfish request failed; retrying");
            tokio::time::sleep(self.settings.backoff(attempt)).await;
        }
    }
}

/// The innermost cause of a transport error ("Connection refused (os error 111)"), which
/// says more than reqwest's "error sending request".
fn root_cause(error: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// A response body as JSON; `Null` when it is empty or not JSON (the callers then find none
/// of the members they look for and say so).
pub(crate) fn decode_body(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

/// The message of a Redfish error body (`error.message`, or the first extended info's), or a
/// placeholder.
pub(crate) fn error_message(body: &Value) -> String {
    body.pointer("/error/@Message.ExtendedInfo/0/Message")
        .or_else(|| body.pointer("/error/message"))
        .and_then(Value::as_str)
        .map_or_else(|| "no error message".to_owned(), str::to_owned)
}
