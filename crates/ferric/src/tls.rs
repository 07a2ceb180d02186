//! HTTPS for the API listener (`api_tls_cert` + `api_tls_key`): rustls over the same axum
//! router `axum::serve` runs for plain HTTP.
//!
//! `axum::serve` takes only plain TCP listeners, so this is its small TLS twin: accept, run the
//! TLS handshake in the connection's own task (a slow or hostile client holds up nobody else),
//! then serve HTTP/1.1 on the decrypted stream (every Bare Metal client speaks it; HTTP/2 would
//! add the `h2` crate for nothing) with the peer address attached as
//! `ConnectInfo`, as `into_make_service_with_connect_info` does for plain HTTP.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::extract::ConnectInfo;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// The rustls server configuration from a PEM certificate chain and a PEM private key.
pub(crate) fn server_config(cert: &Path, key: &Path) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| {
            format!(
                "cannot read the certificate file {} (api_tls_cert)",
                cert.display()
            )
        })?
        .collect::<Result<_, _>>()
        .with_context(|| {
            format!(
                "{} (api_tls_cert) is not a PEM certificate chain",
                cert.display()
            )
        })?;
    anyhow::ensure!(
        !chain.is_empty(),
        "{} (api_tls_cert) holds no PEM certificate",
        cert.display()
    );
    let private_key = PrivateKeyDer::from_pem_file(key).with_context(|| {
        format!(
            "cannot read a PEM private key from {} (api_tls_key)",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("rustls refused its own default protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .context("the API certificate and key do not fit together (api_tls_cert, api_tls_key)")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Serves `router` over TLS on `listener` until `shutdown` completes.
pub(crate) async fn serve(
    listener: TcpListener,
    config: Arc<rustls::ServerConfig>,
    router: Router,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let acceptor = TlsAcceptor::from(config);
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => return Ok(()),
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: keep serving the others.
                    tracing::warn!(%error, "could not accept an API connection");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
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
            let service = router.map_request(with_peer(peer));
            let served = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                .await;
            if let Err(error) = served {
                tracing::debug!(%peer, %error, "API connection ended with an error");
            }
        });
    }
}

/// Attaches the peer address to each request, as `ConnectInfo` (whatever the body type).
fn with_peer<B>(
    peer: SocketAddr,
) -> impl FnMut(axum::http::Request<B>) -> axum::http::Request<B> + Clone {
    move |mut request| {
        request.extensions_mut().insert(ConnectInfo(peer));
        request
    }
}
