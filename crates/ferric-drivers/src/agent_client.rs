//! The conductor's client of the agent REST API (`reference/ironic.md` §4.1–4.2): what the
//! `direct` deploy interface uses to run commands on the agent a node booted, whether that
//! agent is `ferric-agent` or ironic-python-agent.
//!
//! Commands go to `POST {agent_url}/v1/commands/?wait=…&agent_token=…`; asynchronous ones
//! answer `RUNNING` at once and are followed with `GET /v1/commands/{id}`. An agent that is
//! busy answers 409 and is asked again later; connection failures are retried a few times.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::Component;
use crate::DriverError;
use crate::settings::AgentVerifyCa;

/// How a command ended, or that it is still running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandStatus {
    Running,
    Succeeded,
    Failed,
    /// The agent's steps changed since the conductor read them (IPA's CLEAN_VERSION_MISMATCH).
    VersionMismatch,
}

/// A command result as the agent reports it.
#[derive(Debug, Clone)]
pub struct CommandResult {
    pub id: String,
    pub name: String,
    pub status: CommandStatus,
    /// `command_error.message` (or the error as text) when the command failed.
    pub error: Option<String>,
    pub result: Value,
}

#[derive(Debug, Deserialize)]
struct RawResult {
    #[serde(default)]
    id: String,
    #[serde(default)]
    command_name: String,
    command_status: String,
    #[serde(default)]
    command_error: Value,
    #[serde(default)]
    command_result: Value,
}

impl RawResult {
    fn into_result(self) -> Result<CommandResult, DriverError> {
        let status = match self.command_status.as_str() {
            "RUNNING" => CommandStatus::Running,
            "SUCCEEDED" => CommandStatus::Succeeded,
            "FAILED" => CommandStatus::Failed,
            // IPA's name, and the one it means to move to.
            "CLEAN_VERSION_MISMATCH" | "VERSION_MISMATCH" => CommandStatus::VersionMismatch,
            other => {
                return Err(DriverError::failed(
                    Component::Agent,
                    format!("The agent reported an unknown command status \"{other}\"."),
                ));
            }
        };
        let error = match self.command_error {
            Value::Null => None,
            Value::Object(object) => {
                let text = |key: &str| {
                    object
                        .get(key)
                        .and_then(Value::as_str)
                        .filter(|text| !text.is_empty())
                };
                Some(match (text("message"), text("details")) {
                    (Some(message), Some(details)) if details != message => {
                        format!("{message}: {details}")
                    }
                    (Some(message), _) => message.to_owned(),
                    (None, Some(details)) => details.to_owned(),
                    (None, None) => Value::Object(object.clone()).to_string(),
                })
            }
            Value::String(text) => Some(text),
            other => Some(other.to_string()),
        };
        Ok(CommandResult {
            id: self.id,
            name: self.command_name,
            status,
            error,
            result: self.command_result,
        })
    }
}

/// What the agent said to a command.
#[derive(Debug, Clone)]
pub enum Reply {
    Result(CommandResult),
    /// It is busy with another command (HTTP 409): ask again later.
    Busy,
}

/// The `driver_internal_info` keys that tie a node to the agent it talks to.
pub const AGENT_KEYS: [&str; 5] = [
    "agent_url",
    "agent_secret_token",
    "agent_secret_token_pregenerated",
    "agent_verify_ca",
    "agent_command",
];

/// Forgets the agent the node was talking to: the next agent must look the node up again
/// and gets a new token, and is asked for its steps again.
pub fn forget_agent(node: &mut ferric_model::resources::Node) {
    for key in AGENT_KEYS {
        node.driver_internal_info.remove(key);
    }
    for key in crate::agent_steps::keys() {
        node.driver_internal_info.remove(&key);
    }
}

/// A client for agents; cheap to clone (one connection pool).
#[derive(Debug, Clone)]
pub struct AgentClient {
    http: reqwest::Client,
    attempts: u32,
    timeout: Duration,
}

/// Checks that `pem` (an agent's `agent_verify_ca`) holds a certificate Ferric can trust an
/// agent by; the error says what is wrong with it.
pub fn check_certificate(pem: &str) -> Result<(), String> {
    match reqwest::Certificate::from_pem_bundle(pem.as_bytes()) {
        Ok(certificates) if !certificates.is_empty() => Ok(()),
        Ok(_) => Err("it holds no PEM certificate".to_owned()),
        Err(error) => Err(format!("it is not a PEM certificate ({error})")),
    }
}

impl Default for AgentClient {
    fn default() -> Self {
        Self::new(Duration::from_secs(60))
    }
}

impl AgentClient {
    /// A client whose requests time out after `timeout` (Ironic's `[agent]command_timeout`).
    pub fn new(timeout: Duration) -> Self {
        Self::builder(timeout).build().map_or_else(
            |_| Self::default_client(timeout),
            |http| Self {
                http,
                attempts: 3,
                timeout,
            },
        )
    }

    fn default_client(timeout: Duration) -> Self {
        Self {
            http: reqwest::Client::default(),
            attempts: 3,
            timeout,
        }
    }

    fn builder(timeout: Duration) -> reqwest::ClientBuilder {
        // No idle connections: an agent's address outlives the agent (the machine reboots
        // into another ramdisk or its OS with the same DHCP lease), and a pooled connection
        // to the previous one fails the next command. Commands are few; a fresh connection
        // each is cheap.
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .connect_timeout(Duration::from_secs(10))
            .timeout(timeout)
    }

    /// A client that trusts no certificate: plain HTTP agents work, HTTPS ones are refused.
    pub fn refusing_tls(timeout: Duration) -> Self {
        Self::builder(timeout)
            .tls_built_in_root_certs(false)
            .build()
            .map_or_else(
                |_| Self::default_client(timeout),
                |http| Self {
                    http,
                    attempts: 3,
                    timeout,
                },
            )
    }

    /// A client that checks agents' HTTPS certificates as `verify` says. Fails when the CA
    /// file cannot be read or holds no PEM certificate.
    pub fn with_verify_ca(timeout: Duration, verify: &AgentVerifyCa) -> Result<Self, String> {
        let builder = Self::builder(timeout);
        let builder = match verify {
            AgentVerifyCa::SystemRoots => builder,
            AgentVerifyCa::Disabled => builder.danger_accept_invalid_certs(true),
            AgentVerifyCa::CaFile(path) => {
                let pem = std::fs::read(path).map_err(|error| {
                    format!(
                        "cannot read the agent CA file {} (agent_verify_ca): {error}",
                        path.display()
                    )
                })?;
                let certificates = reqwest::Certificate::from_pem_bundle(&pem)
                    .ok()
                    .filter(|certificates| !certificates.is_empty())
                    .ok_or_else(|| {
                        format!(
                            "the agent CA file {} (agent_verify_ca) holds no PEM certificate",
                            path.display()
                        )
                    })?;
                certificates
                    .into_iter()
                    .fold(builder.tls_built_in_root_certs(false), |builder, ca| {
                        builder.add_root_certificate(ca)
                    })
            }
        };
        let http = builder
            .build()
            .map_err(|error| format!("cannot set up the agent HTTP client: {error}"))?;
        Ok(Self {
            http,
            attempts: 3,
            timeout,
        })
    }

    /// A client that trusts exactly the certificate an agent sent in its heartbeat
    /// (`agent_verify_ca`, Ironic's auto-TLS): that agent, and no other, is reached over
    /// HTTPS with it. The certificate is pinned ([`crate::agent_pin`]), not used as a CA, so
    /// its own signature algorithm does not matter (IPA signs with ECDSA-SHA512).
    pub fn trusting(timeout: Duration, pem: &str) -> Result<Self, String> {
        let tls = crate::agent_pin::PinnedCertificate::from_pem(pem)?.client_config()?;
        let http = Self::builder(timeout)
            .use_preconfigured_tls(tls)
            .build()
            .map_err(|error| format!("cannot set up an HTTPS client with it ({error})"))?;
        Ok(Self {
            http,
            attempts: 3,
            timeout,
        })
    }

    /// The client for `node`'s agent, as Ironic picks how to check it: the certificate the
    /// agent sent in its heartbeat (`driver_internal_info.agent_verify_ca`), else the node's
    /// `driver_info.agent_verify_ca` (true, false or a CA file), else the site's setting (this
    /// client).
    pub fn for_node(&self, node: &ferric_model::resources::Node) -> Result<Self, DriverError> {
        let text = |object: &ferric_model::resources::JsonObject| {
            object
                .get("agent_verify_ca")
                .and_then(serde_json::Value::as_str)
                .filter(|text| !text.trim().is_empty())
                .map(str::to_owned)
        };
        if let Some(pem) = text(&node.driver_internal_info) {
            return Self::trusting(self.timeout, &pem).map_err(|error| {
                DriverError::failed(
                    Component::Agent,
                    format!(
                        "The TLS certificate node {}'s agent sent in its heartbeat \
                     (agent_verify_ca) cannot be used: {error}. Reboot the node into a working \
                     ramdisk.",
                        node.uuid
                    ),
                )
            });
        }
        match text(&node.driver_info) {
            Some(setting) => Self::with_verify_ca(self.timeout, &AgentVerifyCa::parse(&setting))
                .map_err(|error| {
                    DriverError::invalid(
                        "driver_info.agent_verify_ca",
                        format!("Node {}'s driver_info agent_verify_ca: {error}", node.uuid),
                    )
                }),
            None => Ok(self.clone()),
        }
    }

    fn url(agent_url: &str, path: &str) -> String {
        format!("{}/v1/{path}", agent_url.trim_end_matches('/'))
    }

    /// Runs `name` (`extension.command`) with `params`. With `wait`, the agent answers when
    /// the command has finished; otherwise an asynchronous command answers `RUNNING`.
    pub async fn execute(
        &self,
        agent_url: &str,
        token: &str,
        name: &str,
        params: Map<String, Value>,
        wait: bool,
    ) -> Result<Reply, DriverError> {
        let url = Self::url(agent_url, "commands/");
        let body = json!({"name": name, "params": params});
        let mut last_error = String::new();
        for attempt in 1..=self.attempts {
            let sent = self
                .http
                .post(&url)
                .query(&[
                    ("wait", if wait { "true" } else { "false" }),
                    ("agent_token", token),
                ])
                .json(&body)
                .send()
                .await;
            match sent {
                Ok(response) => return Self::read(agent_url, name, response).await,
                // A refused or unreachable agent may be starting; a TLS failure stays one.
                Err(error) if error.is_connect() && !is_tls(&error) && attempt < self.attempts => {
                    last_error = error.to_string();
                    tokio::time::sleep(Duration::from_secs(2 * u64::from(attempt))).await;
                }
                Err(error) => {
                    return Err(DriverError::failed(
                        Component::Agent,
                        format!(
                            "Could not reach the agent at {agent_url} to run {name}: {}",
                            describe(&error)
                        ),
                    ));
                }
            }
        }
        Err(DriverError::failed(
            Component::Agent,
            format!(
                "Could not reach the agent at {agent_url} to run {name} after {} attempts: \
             {last_error}",
                self.attempts
            ),
        ))
    }

    /// The current result of command `id`.
    pub async fn command(
        &self,
        agent_url: &str,
        token: &str,
        id: &str,
    ) -> Result<Reply, DriverError> {
        let url = Self::url(agent_url, &format!("commands/{id}"));
        let response = self
            .http
            .get(&url)
            .query(&[("agent_token", token)])
            .send()
            .await
            .map_err(|error| {
                DriverError::failed(
                    Component::Agent,
                    format!(
                        "Could not reach the agent at {agent_url} to follow command {id}: {}",
                        describe(&error)
                    ),
                )
            })?;
        Self::read(agent_url, id, response).await
    }

    async fn read(
        agent_url: &str,
        what: &str,
        response: reqwest::Response,
    ) -> Result<Reply, DriverError> {
        let status = response.status();
        let text = response.text().await.map_err(|error| {
            DriverError::failed(
                Component::Agent,
                format!("The agent at {agent_url} did not finish its answer about {what}: {error}"),
            )
        })?;
        if status == reqwest::StatusCode::CONFLICT {
            return Ok(Reply::Busy);
        }
        if !status.is_success() {
            let detail = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|body| {
                    body.get("faultstring")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .unwrap_or(text);
            return Err(DriverError::failed(
                Component::Agent,
                format!(
                    "The agent at {agent_url} refused {what} (HTTP {}): {detail}",
                    status.as_u16()
                ),
            ));
        }
        serde_json::from_str::<RawResult>(&text)
            .map_err(|error| {
                DriverError::failed(
                    Component::Agent,
                    format!(
                        "The agent at {agent_url} answered {what} with something that is not a \
                     command result ({error})."
                    ),
                )
            })?
            .into_result()
            .map(Reply::Result)
    }
}

/// Each error of `error`'s chain, outermost first (reqwest's own text is only the outermost).
pub(crate) fn error_chain(error: &reqwest::Error) -> Vec<String> {
    let mut chain = Vec::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        chain.push(current.to_string());
        source = current.source();
    }
    chain
}

/// The part of the error chain that says the TLS handshake failed, if it did.
fn tls_detail(chain: &[String]) -> Option<&String> {
    chain.iter().find(|text| {
        let text = text.to_ascii_lowercase();
        [
            "certificate",
            "tls",
            "handshake",
            "unknownissuer",
            "unknown ca",
            "ssl",
        ]
        .iter()
        .any(|word| text.contains(word))
    })
}

fn is_tls(error: &reqwest::Error) -> bool {
    tls_detail(&error_chain(error)).is_some()
}

/// A reqwest error in words an operator can act on. TLS failures (an agent certificate that
/// does not verify, an agent that speaks plain HTTP where HTTPS is expected) are named as
/// such with what the TLS library said, not as an unreachable agent.
fn describe(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        return "the request timed out".to_owned();
    }
    let chain = error_chain(error);
    match tls_detail(&chain) {
        Some(detail) => format!(
            "TLS failure: {detail} (the agent's certificate did not verify against \
             agent_verify_ca, or the agent does not speak the protocol its callback URL names)"
        ),
        None if error.is_connect() => format!(
            "connection refused or unreachable ({})",
            chain.last().map_or("no detail", String::as_str)
        ),
        None => chain.join(": "),
    }
}

#[cfg(test)]
mod tls_tests {
    //! `agent_verify_ca` against a real TLS handshake with an agent stub.
    use super::*;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// An HTTPS agent on loopback with a self-signed certificate for `localhost`: answers 409
    /// (busy) to a request carrying `agent_token=tok`, 401 to any other. Returns its URL and
    /// the certificate's PEM.
    async fn https_agent() -> (String, String) {
        let certified =
            rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
        https_agent_with(&certified.cert.pem(), &certified.key_pair.serialize_pem()).await
    }

    /// [`https_agent`] with the given certificate and PKCS#8 key (PEM).
    async fn https_agent_with(cert_pem: &str, key_pem: &str) -> (String, String) {
        use rustls::pki_types::pem::PemObject;
        let cert = rustls::pki_types::CertificateDer::from_pem_slice(cert_pem.as_bytes())
            .expect("certificate");
        let key =
            rustls::pki_types::PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).expect("key");
        let cert_pem = cert_pem.to_owned();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_single_cert(vec![cert], key)
            .expect("config");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("address").port();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let mut request = Vec::new();
                    let mut buffer = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buffer[..n]),
                        }
                    }
                    let line = String::from_utf8_lossy(&request);
                    let status = if line.contains("agent_token=tok ") {
                        "409 Conflict"
                    } else {
                        "401 Unauthorized"
                    };
                    let answer = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n\
                         content-length: 2\r\nconnection: close\r\n\r\n{{}}"
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        (format!("https://localhost:{port}"), cert_pem)
    }

    /// ironic-python-agent signs its auto-TLS certificate with ECDSA and SHA-512, which
    /// webpki's ring algorithms cannot verify: the pin is trusted by its bytes, so such an
    /// agent is reached; a different certificate with the same name still is not.
    #[tokio::test]
    async fn an_ipa_style_sha512_certificate_is_trusted_by_its_pin() {
        let dir = tempfile::tempdir().expect("dir");
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        let status = std::process::Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
            .args([
                "ec_paramgen_curve:prime256v1",
                "-sha512",
                "-nodes",
                "-days",
                "1",
            ])
            .args([
                "-subj",
                "/CN=localhost",
                "-addext",
                "subjectAltName=DNS:localhost",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .stderr(std::process::Stdio::null())
            .status()
            .expect("openssl (Debian's openssl package) makes the test certificate");
        assert!(status.success(), "openssl req failed");
        let cert_pem = std::fs::read_to_string(&cert).expect("cert");
        let key_pem = std::fs::read_to_string(&key).expect("key");
        let (url, cert_pem) = https_agent_with(&cert_pem, &key_pem).await;
        let timeout = Duration::from_secs(10);

        let pinned = AgentClient::trusting(timeout, &cert_pem).expect("client");
        let reply = pinned.command(&url, "tok", "c1").await.expect("reply");
        assert!(matches!(reply, Reply::Busy), "{reply:?}");

        let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
            .expect("cert")
            .cert
            .pem();
        let error = AgentClient::trusting(timeout, &other)
            .expect("client")
            .command(&url, "tok", "c1")
            .await
            .unwrap_err();
        assert!(error.to_string().contains("TLS failure"), "{error}");
    }

    #[tokio::test]
    async fn agent_certificates_are_checked_as_agent_verify_ca_says() {
        let (url, cert_pem) = https_agent().await;
        let dir = tempfile::tempdir().expect("dir");
        let ca = dir.path().join("agent-ca.pem");
        std::fs::write(&ca, &cert_pem).expect("write");
        let timeout = Duration::from_secs(10);

        let pinned = AgentClient::with_verify_ca(timeout, &AgentVerifyCa::CaFile(ca.clone()))
            .expect("client");
        let reply = pinned.command(&url, "tok", "c1").await.expect("reply");
        assert!(matches!(reply, Reply::Busy), "{reply:?}");
        // The token rides on the call: without the right one the agent refuses.
        assert!(pinned.command(&url, "wrong", "c1").await.is_err());

        // The system roots do not know a self-signed agent certificate: a TLS failure, named.
        let system =
            AgentClient::with_verify_ca(timeout, &AgentVerifyCa::SystemRoots).expect("client");
        let error = system.command(&url, "tok", "c1").await.unwrap_err();
        assert!(error.to_string().contains("TLS failure"), "{error}");
        assert!(!error.to_string().contains("refused"), "{error}");

        // The certificate the agent sent in its heartbeat is trusted for that node only.
        let mut node = ferric_model::resources::Node::new(
            uuid::Uuid::nil(),
            "fake-hardware",
            ferric_model::ProvisionState::CleanWait,
        );
        node.driver_internal_info
            .insert("agent_verify_ca".into(), cert_pem.clone().into());
        let per_node = system.for_node(&node).expect("client");
        let reply = per_node.command(&url, "tok", "c1").await.expect("reply");
        assert!(matches!(reply, Reply::Busy), "{reply:?}");
        let other = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])
            .expect("cert")
            .cert
            .pem();
        node.driver_internal_info
            .insert("agent_verify_ca".into(), other.into());
        let error = system
            .for_node(&node)
            .expect("client")
            .command(&url, "tok", "c1")
            .await
            .unwrap_err();
        assert!(error.to_string().contains("TLS failure"), "{error}");
        node.driver_internal_info
            .insert("agent_verify_ca".into(), "not a certificate".into());
        let error = system.for_node(&node).unwrap_err();
        assert!(error.to_string().contains("agent_verify_ca"), "{error}");
        // A plain HTTP client asking an HTTPS agent: also a TLS-level failure, not "refused".
        let plain = url.replace("https://", "http://");
        let error = system.command(&plain, "tok", "c1").await.unwrap_err();
        assert!(!error.to_string().contains("refused"), "{error}");

        let unchecked =
            AgentClient::with_verify_ca(timeout, &AgentVerifyCa::Disabled).expect("client");
        let reply = unchecked.command(&url, "tok", "c1").await.expect("reply");
        assert!(matches!(reply, Reply::Busy), "{reply:?}");

        // Unusable CA files are refused up front, naming the setting.
        let missing = AgentVerifyCa::CaFile(dir.path().join("missing.pem"));
        let error = AgentClient::with_verify_ca(timeout, &missing).unwrap_err();
        assert!(error.contains("agent_verify_ca"), "{error}");
        std::fs::write(&ca, "not a certificate").expect("write");
        let error = AgentClient::with_verify_ca(timeout, &AgentVerifyCa::CaFile(ca)).unwrap_err();
        assert!(error.contains("no PEM certificate"), "{error}");

        assert_eq!(AgentVerifyCa::parse("False"), AgentVerifyCa::Disabled);
        assert_eq!(AgentVerifyCa::parse("true"), AgentVerifyCa::SystemRoots);
        assert_eq!(
            AgentVerifyCa::parse("/etc/ferric/ca.pem"),
            AgentVerifyCa::CaFile("/etc/ferric/ca.pem".into())
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_read_as_the_agent_sends_them() {
        let raw: RawResult = serde_json::from_value(json!({
            "id": "c1",
            "command_name": "execute_deploy_step",
            "command_status": "FAILED",
            "command_error": {"type": "ImageChecksumError", "code": 500,
                              "message": "checksum mismatch", "details": "…"},
            "command_result": null,
        }))
        .expect("shape");
        let result = raw.into_result().expect("known status");
        assert_eq!(result.status, CommandStatus::Failed);
        assert_eq!(result.error.as_deref(), Some("checksum mismatch: …"));

        let raw: RawResult = serde_json::from_value(json!({
            "id": "c2", "command_name": "x", "command_status": "EXPLODED",
        }))
        .expect("shape");
        assert!(raw.into_result().is_err());
    }
}
