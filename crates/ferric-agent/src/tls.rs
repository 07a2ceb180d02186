//! Auto-TLS, as ironic-python-agent's `enable_auto_tls`: at start the agent makes a
//! self-signed certificate for the address it advertises, serves its API over HTTPS with it,
//! and sends the certificate in its heartbeats (`agent_verify_ca`, API 1.68), so the
//! conductor — which trusts that certificate for this node only — never sends the agent token
//! in clear text.
//!
//! `axum::serve` takes only plain TCP listeners, so this is its small TLS twin (as the
//! `ferric` binary's own HTTPS listener): accept, run the handshake in the connection's own
//! task, then serve HTTP/1.1 on the decrypted stream.

use std::sync::Arc;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::PrivateKeyDer;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Which TLS versions and cipher suites a listener accepts: Ferric's `tls_min_version` and
/// `tls_cipher_suites` settings for its own HTTPS listeners, and the same two keys of the
/// lookup's `config` for the agent's (as Ironic sends them). One type, so the API and the
/// agent accept exactly the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsPolicy {
    /// `true`: TLS 1.3 only; `false`: 1.2 and 1.3.
    pub tls13_only: bool,
    /// IANA names of the suites allowed (`TLS13_AES_256_GCM_SHA384`); empty: the library's
    /// safe defaults.
    pub cipher_suites: Vec<String>,
}

impl Default for TlsPolicy {
    /// TLS 1.3 only, every default suite (Ironic 2026.2's default).
    fn default() -> Self {
        Self {
            tls13_only: true,
            cipher_suites: Vec::new(),
        }
    }
}

impl TlsPolicy {
    /// From a minimum version (`1.2`, `1.3`, also written `TLSv1.3`) and suite names; unknown
    /// versions or suites, or suites that leave a version without any, are refused with the
    /// names that would work.
    pub fn parse(min_version: &str, cipher_suites: &[String]) -> Result<Self, String> {
        let version = min_version.trim().to_ascii_lowercase();
        let tls13_only = match version.trim_start_matches("tlsv").trim_start_matches("tls") {
            "1.2" => false,
            "1.3" => true,
            _ => {
                return Err(format!(
                    "tls_min_version {min_version:?} is not 1.2 or 1.3 (older versions are \
                     not offered)"
                ));
            }
        };
        let policy = Self {
            tls13_only,
            cipher_suites: cipher_suites
                .iter()
                .map(|name| name.trim().to_owned())
                .filter(|name| !name.is_empty())
                .collect(),
        };
        policy.provider()?;
        Ok(policy)
    }

    /// The policy an agent was sent at lookup; absent keys (an older server) keep the
    /// library's defaults for both versions.
    pub fn from_lookup(config: &Value) -> Result<Self, String> {
        let min_version = config["tls_min_version"].as_str().unwrap_or("1.2");
        let suites: Vec<String> = match &config["tls_cipher_suites"] {
            Value::Array(names) => names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            Value::String(names) => names.split(',').map(str::to_owned).collect(),
            _ => Vec::new(),
        };
        Self::parse(min_version, &suites)
    }

    /// The minimum version as it is written in settings and sent to agents.
    pub fn min_version(&self) -> &'static str {
        if self.tls13_only { "1.3" } else { "1.2" }
    }

    fn versions(&self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        static TLS13_ONLY: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];
        static TLS12_AND_13: &[&rustls::SupportedProtocolVersion] =
            &[&rustls::version::TLS12, &rustls::version::TLS13];
        if self.tls13_only {
            TLS13_ONLY
        } else {
            TLS12_AND_13
        }
    }

    /// The crypto provider with only the allowed suites.
    fn provider(&self) -> Result<rustls::crypto::CryptoProvider, String> {
        let mut provider = rustls::crypto::ring::default_provider();
        if self.cipher_suites.is_empty() {
            return Ok(provider);
        }
        let known: Vec<&str> = provider
            .cipher_suites
            .iter()
            .filter_map(|suite| suite.suite().as_str())
            .collect();
        if let Some(unknown) = self
            .cipher_suites
            .iter()
            .find(|name| !known.contains(&name.as_str()))
        {
            return Err(format!(
                "tls_cipher_suites names {unknown:?}, which is not one of {}",
                known.join(", ")
            ));
        }
        provider.cipher_suites.retain(|suite| {
            suite
                .suite()
                .as_str()
                .is_some_and(|name| self.cipher_suites.iter().any(|allowed| allowed == name))
        });
        let has_tls13 = provider
            .cipher_suites
            .iter()
            .any(|suite| suite.version() == &rustls::version::TLS13);
        if !has_tls13 {
            return Err(
                "tls_cipher_suites allows no TLS 1.3 suite (TLS13_…): every TLS client Ferric \
                 talks to may use 1.3, so keep at least one"
                    .to_owned(),
            );
        }
        Ok(provider)
    }

    /// A rustls server configuration accepting what this policy allows, with `chain` and
    /// `key`, speaking HTTP/1.1.
    pub fn server_config(
        &self,
        chain: Vec<rustls::pki_types::CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
    ) -> Result<Arc<rustls::ServerConfig>, String> {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(self.provider()?))
            .with_protocol_versions(self.versions())
            .map_err(|error| format!("rustls refused the TLS versions: {error}"))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|error| format!("the certificate and key do not fit together: {error}"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// The agent's certificate: its PEM (sent in heartbeats) and the server configuration.
#[derive(Clone)]
pub struct AgentCertificate {
    pub pem: String,
    config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for AgentCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentCertificate").finish_non_exhaustive()
    }
}

impl AgentCertificate {
    /// A new self-signed certificate (and key, never written anywhere) naming `host` — an IP
    /// address becomes an IP subject alternative name, as the conductor checks it against
    /// the callback URL's host.
    pub fn generate(host: &str, policy: &TlsPolicy) -> Result<Self, String> {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let certified = rcgen::generate_simple_self_signed(vec![host.clone()])
            .map_err(|error| format!("cannot make a TLS certificate for {host}: {error}"))?;
        let key = PrivateKeyDer::try_from(certified.key_pair.serialize_der())
            .map_err(|error| format!("cannot use the TLS key made for {host}: {error}"))?;
        let config = policy
            .server_config(vec![certified.cert.der().clone()], key)
            .map_err(|error| format!("cannot serve TLS for {host}: {error}"))?;
        Ok(Self {
            pem: certified.cert.pem(),
            config,
        })
    }
}

/// Serves `router` over TLS on `listener` with `certificate`, for as long as the future runs.
pub async fn serve(listener: TcpListener, certificate: AgentCertificate, router: Router) {
    let acceptor = TlsAcceptor::from(certificate.config);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "could not accept an API connection");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let stream = match acceptor.accept(stream).await {
                Ok(stream) => stream,
                Err(error) => {
                    tracing::info!(%peer, %error, "TLS handshake with an API client failed");
                    return;
                }
            };
            let served = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(router))
                .await;
            if let Err(error) = served {
                tracing::debug!(%peer, %error, "API connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn versions_and_suites_are_parsed_or_refused_by_name() {
        assert!(TlsPolicy::default().tls13_only);
        for (text, tls13_only) in [("1.3", true), ("TLSv1.3", true), ("1.2", false)] {
            assert_eq!(
                TlsPolicy::parse(text, &[]).expect(text).tls13_only,
                tls13_only
            );
        }
        for text in ["1.1", "1.0", "", "tls"] {
            assert!(TlsPolicy::parse(text, &[]).is_err(), "{text}");
        }
        let suites = vec!["TLS13_AES_256_GCM_SHA384".to_owned()];
        assert_eq!(
            TlsPolicy::parse("1.3", &suites)
                .expect("known")
                .cipher_suites,
            suites
        );
        let error =
            TlsPolicy::parse("1.3", &["TLS_RSA_WITH_RC4_128_MD5".to_owned()]).expect_err("unknown");
        assert!(error.contains("TLS13_AES_128_GCM_SHA256"), "{error}");
        let only_tls12 = vec!["TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384".to_owned()];
        assert!(TlsPolicy::parse("1.2", &only_tls12).is_err());
    }

    #[test]
    fn the_lookup_says_what_the_agent_accepts() {
        let sent =
            json!({"tls_min_version": "1.3", "tls_cipher_suites": ["TLS13_AES_256_GCM_SHA384"]});
        let policy = TlsPolicy::from_lookup(&sent).expect("valid");
        assert!(policy.tls13_only);
        assert_eq!(policy.cipher_suites, ["TLS13_AES_256_GCM_SHA384"]);
        // An older server sends neither: both versions, default suites.
        let policy = TlsPolicy::from_lookup(&json!({})).expect("valid");
        assert!(!policy.tls13_only && policy.cipher_suites.is_empty());
        assert_eq!(policy.min_version(), "1.2");
        assert!(AgentCertificate::generate("10.0.0.5", &TlsPolicy::default()).is_ok());
    }
}
