//! Trusting an agent by the exact certificate it sent in its heartbeat (Ironic's auto-TLS).
//!
//! A pinned certificate is compared byte for byte; its own signature is not checked, because
//! nothing vouches for a self-signed certificate but the pin itself. That matters in practice:
//! ironic-python-agent signs its certificate with ECDSA and SHA-512, which webpki's ring
//! algorithms do not verify, so treating the pin as a root CA refused every IPA agent. The
//! handshake's own signature (the proof that the peer holds the pinned key) is still verified
//! with the crypto provider's algorithms, and the name in the URL is not checked: the
//! certificate, not the address, identifies the agent.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, SignatureScheme};

/// Accepts a server whose certificate is one of `pinned`.
#[derive(Debug)]
pub(crate) struct PinnedCertificate {
    pinned: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl PinnedCertificate {
    /// The certificates in `pem`; an error says why there are none.
    pub(crate) fn from_pem(pem: &str) -> Result<Self, String> {
        let pinned = CertificateDer::pem_slice_iter(pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| format!("it is not a PEM certificate ({error})"))?;
        if pinned.is_empty() {
            return Err("it holds no PEM certificate".to_owned());
        }
        Ok(Self {
            pinned,
            provider: Arc::new(rustls::crypto::ring::default_provider()),
        })
    }

    /// A TLS client configuration that trusts only the pinned certificates.
    pub(crate) fn client_config(self) -> Result<rustls::ClientConfig, String> {
        let provider = self.provider.clone();
        Ok(rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| format!("no TLS protocol version to offer ({error})"))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(self))
            .with_no_client_auth())
    }
}

impl ServerCertVerifier for PinnedCertificate {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        if self
            .pinned
            .iter()
            .any(|pinned| pinned.as_ref() == end_entity.as_ref())
        {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(Error::InvalidCertificate(CertificateError::Other(
                rustls::OtherError(Arc::new(NotPinned)),
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The error a certificate other than the pinned one gets.
#[derive(Debug)]
struct NotPinned;

impl std::fmt::Display for NotPinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the agent presented a certificate other than the one it sent in its heartbeat")
    }
}

impl std::error::Error for NotPinned {}
