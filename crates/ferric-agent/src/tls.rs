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
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

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
    pub fn generate(host: &str) -> Result<Self, String> {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let certified = rcgen::generate_simple_self_signed(vec![host.clone()])
            .map_err(|error| format!("cannot make a TLS certificate for {host}: {error}"))?;
        let key = PrivateKeyDer::try_from(certified.key_pair.serialize_der())
            .map_err(|error| format!("cannot use the TLS key made for {host}: {error}"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| format!("rustls refused its default protocol versions: {error}"))?
            .with_no_client_auth()
            .with_single_cert(vec![certified.cert.der().clone()], key)
            .map_err(|error| format!("rustls refused the certificate made for {host}: {error}"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self {
            pem: certified.cert.pem(),
            config: Arc::new(config),
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
