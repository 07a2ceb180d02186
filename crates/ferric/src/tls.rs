//! HTTPS for the API listener (`api_tls_cert` + `api_tls_key`) and the boot file server's
//! (`boot_tls_cert` + `boot_tls_key`): rustls over the same axum router `axum::serve` runs for
//! plain HTTP.
//!
//! `axum::serve` takes only plain TCP listeners, so this is its small TLS twin: accept, run the
//! TLS handshake in the connection's own task (a slow or hostile client holds up nobody else),
//! then serve HTTP/1.1 on the decrypted stream (every Bare Metal client speaks it; HTTP/2 would
//! add the `h2` crate for nothing) with the peer address attached as
//! `ConnectInfo`, as `into_make_service_with_connect_info` does for plain HTTP.
//!
//! rustls uses the `ring` provider, the one reqwest already brings.

use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use axum::extract::ConnectInfo;
use ferric_agent::tls::TlsPolicy;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// The rustls server configuration from a PEM certificate chain and a PEM private key.
pub(crate) fn server_config(
    cert: &Path,
    key: &Path,
    policy: &TlsPolicy,
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    server_config_of(cert, key, policy, ["api_tls_cert", "api_tls_key"])
}

/// [`server_config`] for the listener whose files are the settings `names` (certificate, key).
pub(crate) fn server_config_of(
    cert: &Path,
    key: &Path,
    policy: &TlsPolicy,
    [cert_name, key_name]: [&str; 2],
) -> anyhow::Result<Arc<rustls::ServerConfig>> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .with_context(|| {
            format!(
                "cannot read the certificate file {} ({cert_name})",
                cert.display()
            )
        })?
        .collect::<Result<_, _>>()
        .with_context(|| {
            format!(
                "{} ({cert_name}) is not a PEM certificate chain",
                cert.display()
            )
        })?;
    anyhow::ensure!(
        !chain.is_empty(),
        "{} ({cert_name}) holds no PEM certificate",
        cert.display()
    );
    let private_key = PrivateKeyDer::from_pem_file(key).with_context(|| {
        format!(
            "cannot read a PEM private key from {} ({key_name})",
            key.display()
        )
    })?;
    policy
        .server_config(chain, private_key)
        .map_err(|error| anyhow::anyhow!("{error} ({cert_name}, {key_name}, tls_min_version)"))
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
                // WebSockets (the console stream) take the connection over.
                .with_upgrades()
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

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        reason = "in tests a failed unwrap is a failed test"
    )]
    use super::*;
    use axum::routing::get;

    /// A self-signed certificate for `localhost`, written as PEM files; returns the
    /// certificate's PEM too (the client's trust anchor).
    fn self_signed(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf, String) {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let cert_pem = certified.cert.pem();
        let cert = dir.join("api.crt");
        let key = dir.join("api.key");
        std::fs::write(&cert, &cert_pem).unwrap();
        std::fs::write(&key, certified.key_pair.serialize_pem()).unwrap();
        (cert, key, cert_pem)
    }

    #[tokio::test]
    async fn the_api_speaks_https_and_knows_its_peers() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key, cert_pem) = self_signed(dir.path());
        let config = server_config(&cert, &key, &TlsPolicy::default()).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let router = Router::new().route(
            "/peer",
            get(|ConnectInfo(peer): ConnectInfo<SocketAddr>| async move { peer.ip().to_string() }),
        );
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, config, router, async {
            stopped.await.ok();
        }));

        let url = format!("https://localhost:{port}/peer");
        let trusting = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).unwrap())
            .build()
            .unwrap();
        let answer = trusting.get(&url).send().await.unwrap();
        assert_eq!(answer.status(), reqwest::StatusCode::OK);
        assert_eq!(answer.text().await.unwrap(), "127.0.0.1");

        // A client that does not trust the certificate gets no answer at all.
        let stranger = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .build()
            .unwrap();
        assert!(stranger.get(&url).send().await.is_err());
        // Nor does plain HTTP on the HTTPS port.
        let plain = reqwest::get(format!("http://localhost:{port}/peer")).await;
        assert!(plain.is_err() || !plain.unwrap().status().is_success());

        stop.send(()).unwrap();
        server.await.unwrap().unwrap();
    }

    /// `tls_min_version` (default 1.3, as Ironic 2026.2): a client that offers only TLS 1.2
    /// is refused at the handshake, and accepted once the setting says 1.2.
    #[tokio::test]
    async fn the_minimum_tls_version_is_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key, cert_pem) = self_signed(dir.path());
        let tls12_client = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(cert_pem.as_bytes()).unwrap())
            .max_tls_version(reqwest::tls::Version::TLS_1_2)
            .build()
            .unwrap();
        for (policy, accepted) in [
            (TlsPolicy::default(), false),
            (TlsPolicy::parse("1.2", &[]).unwrap(), true),
        ] {
            let config = server_config(&cert, &key, &policy).unwrap();
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let router = Router::new().route("/", get(|| async { "ok" }));
            let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
            let server = tokio::spawn(serve(listener, config, router, async {
                stopped.await.ok();
            }));
            let answer = tls12_client
                .get(format!("https://localhost:{port}/"))
                .send()
                .await;
            assert_eq!(answer.is_ok(), accepted, "{policy:?}: {answer:?}");
            stop.send(()).unwrap();
            server.await.unwrap().unwrap();
        }
    }

    #[test]
    fn unusable_certificates_stop_the_server_with_the_setting_named() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key, _) = self_signed(dir.path());
        let missing = dir.path().join("missing.pem");
        let error = server_config(&missing, &key, &TlsPolicy::default()).unwrap_err();
        assert!(format!("{error:#}").contains("api_tls_cert"), "{error:#}");
        let error = server_config(&cert, &missing, &TlsPolicy::default()).unwrap_err();
        assert!(format!("{error:#}").contains("api_tls_key"), "{error:#}");
        // A key from another certificate.
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        let (_, other_key, _) = self_signed(&other);
        let error = server_config(&cert, &other_key, &TlsPolicy::default()).unwrap_err();
        assert!(format!("{error:#}").contains("do not fit"), "{error:#}");
    }
}
