//! The OCI distribution API (`/v2/`) as the conductor uses it to resolve an `oci://` image
//! source ([`crate::oci`]): log in, read the manifest (following an image index), and name the
//! blob to download. Always HTTPS, verified against the system's CA store plus the site's
//! `oci_verify_ca` bundle.
//!
//! Logging in follows the registry's challenge, as Docker and Ironic do: `GET /v2/` answers 200
//! (anonymous pulls), or 401 with `WWW-Authenticate: Basic …` (the secret is sent as basic
//! credentials and checked with a second `GET /v2/`) or `Bearer realm=…,service=…` (a token for
//! `repository:<name>:pull` is asked of the realm, with the secret as basic credentials when
//! there is one). The resulting `Authorization` header is sent only to the registry's own
//! host: reqwest drops it when a blob download is redirected elsewhere (a CDN, object storage).
//! Neither the secret nor the header is ever logged; [`Resolved`]'s `Debug` hides the header.

use std::time::Duration;

use serde_json::Value;
use sha2::{Digest, Sha256, Sha512};

use crate::oci::{self, Reference};

/// The largest manifest or config document read (the distribution spec suggests 4 MiB).
const DOCUMENT_LIMIT: usize = 4 * 1024 * 1024;

/// A pull secret and where it came from (named in refusals, never shown).
#[derive(Clone)]
pub struct Credential {
    /// The `Basic` credential (base64 of `user:password`).
    pub basic: String,
    /// `instance_info.image_pull_secret`, `driver_info.image_pull_secret` or
    /// `oci_authentication_config`.
    pub from: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Credential")
            .field("from", &self.from)
            .finish_non_exhaustive()
    }
}

/// A resolved image: its blob, checksum, size and disk format.
#[derive(Clone, PartialEq, Eq)]
pub struct Resolved {
    /// `https://<registry>/v2/<repository>/blobs/<digest>`.
    pub blob_url: String,
    /// The manifest chosen, `sha256:<hex>`.
    pub manifest_digest: String,
    /// The blob's digest: `sha256` or `sha512`, and lowercase hex.
    pub algo: String,
    pub hex: String,
    pub size: Option<u64>,
    /// `raw` or `qcow2`; `None`: not said (the agent detects it).
    pub disk_format: Option<&'static str>,
    /// The `Authorization` header for the registry's host, if one is needed.
    pub authorization: Option<String>,
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Resolved")
            .field("blob_url", &self.blob_url)
            .field("manifest_digest", &self.manifest_digest)
            .field("hex", &self.hex)
            .field("size", &self.size)
            .field("disk_format", &self.disk_format)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "******"),
            )
            .finish()
    }
}

/// The registry client.
#[derive(Debug, Clone)]
pub struct Registry {
    http: reqwest::Client,
    /// `https`; `http` only in this module's tests (a stub token service).
    scheme: &'static str,
}

/// What the registry was asked, and how it is asked again.
struct Pull<'a> {
    reference: &'a Reference,
    /// `https://<registry>/v2/<repository>`.
    base: String,
    authorization: Option<String>,
    credential: Option<&'a Credential>,
}

fn chain(error: &reqwest::Error) -> String {
    crate::agent_client::error_chain(error).join(": ")
}

/// The `(scheme, realm, service)` of a `WWW-Authenticate` header.
fn challenge(header: &str) -> (String, Option<String>, Option<String>) {
    let (scheme, params) = header.trim().split_once(' ').unwrap_or((header.trim(), ""));
    let param = |name: &str| {
        params.split(',').find_map(|pair| {
            let (key, value) = pair.trim().split_once('=')?;
            (key.trim().eq_ignore_ascii_case(name))
                .then(|| value.trim().trim_matches('"').to_owned())
        })
    };
    (
        scheme.to_ascii_lowercase(),
        param("realm"),
        param("service"),
    )
}

impl Registry {
    /// A client trusting the system's CAs and `extra_roots`.
    pub fn new(extra_roots: &[reqwest::Certificate]) -> Result<Self, String> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .user_agent(concat!("ferric/", env!("CARGO_PKG_VERSION")));
        for root in extra_roots {
            builder = builder.add_root_certificate(root.clone());
        }
        Ok(Self {
            http: builder
                .build()
                .map_err(|error| format!("cannot set up the OCI registry client: {error}"))?,
            scheme: "https",
        })
    }

    /// Resolves `reference` to one disk image blob for a node of `cpu_arch`; the error is the
    /// reason, for a refusal that names the image.
    pub async fn resolve(
        &self,
        reference: &Reference,
        cpu_arch: Option<&str>,
        prefer_qcow2: bool,
        credential: Option<&Credential>,
    ) -> Result<Resolved, String> {
        let mut pull = Pull {
            reference,
            base: format!(
                "{}://{}/v2/{}",
                self.scheme, reference.registry, reference.repository
            ),
            authorization: None,
            credential,
        };
        pull.authorization = self.log_in(&pull).await?;
        let pinned = reference.digest.as_deref();
        let top = self
            .manifest(&pull, reference.manifest_reference(), pinned)
            .await?;
        if oci::is_index(&top.0, top.1.as_deref()) {
            let mut last = String::new();
            for candidate in oci::candidates(&top.0, cpu_arch, prefer_qcow2)? {
                let manifest = self
                    .manifest(&pull, &candidate.digest, Some(&candidate.digest))
                    .await?;
                match oci::single_layer(&manifest.0) {
                    Ok(layer) => {
                        return Ok(resolved(
                            &pull,
                            candidate.digest.clone(),
                            layer,
                            Some(candidate.disk_format),
                        ));
                    }
                    Err(reason) => last = format!("manifest {}: {reason}", candidate.digest),
                }
            }
            return Err(last);
        }
        let layer = oci::single_layer(&top.0)?;
        if let Some(cpu_arch) = cpu_arch {
            self.check_architecture(&pull, &top.0, cpu_arch).await?;
        }
        let format = layer.disk_format;
        Ok(resolved(&pull, top.2, layer, format))
    }

    /// The `Authorization` header to pull with, if the registry wants one.
    async fn log_in(&self, pull: &Pull<'_>) -> Result<Option<String>, String> {
        let registry = &pull.reference.registry;
        let root = format!("{}://{registry}/v2/", self.scheme);
        let response = self.http.get(&root).send().await.map_err(|error| {
            format!(
                "the registry {registry} cannot be reached: {}",
                chain(&error)
            )
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(None);
        }
        if status != reqwest::StatusCode::UNAUTHORIZED {
            return Err(format!(
                "the registry {registry} answered {status} at {root}"
            ));
        }
        let header = response
            .headers()
            .get(reqwest::header::WWW_AUTHENTICATE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let (scheme, realm, service) = challenge(&header);
        match scheme.as_str() {
            "basic" => {
                let credential = pull.credential.ok_or_else(|| needs_credentials(registry))?;
                let authorization = format!("Basic {}", credential.basic);
                let check = self
                    .http
                    .get(&root)
                    .header(reqwest::header::AUTHORIZATION, &authorization)
                    .send()
                    .await
                    .map_err(|error| {
                        format!(
                            "the registry {registry} cannot be reached: {}",
                            chain(&error)
                        )
                    })?;
                match check.status() {
                    status if status.is_success() => Ok(Some(authorization)),
                    status => Err(refused(registry, status, credential)),
                }
            }
            "bearer" => {
                let realm = realm.ok_or_else(|| {
                    format!("the registry {registry} asks for a bearer token but names no realm")
                })?;
                let mut request = self.http.get(&realm).query(&[(
                    "scope",
                    format!("repository:{}:pull", pull.reference.repository),
                )]);
                if let Some(service) = &service {
                    request = request.query(&[("service", service)]);
                }
                if let Some(credential) = pull.credential {
                    request = request.header(
                        reqwest::header::AUTHORIZATION,
                        format!("Basic {}", credential.basic),
                    );
                }
                let answer = request.send().await.map_err(|error| {
                    format!(
                        "the token service {realm} of registry {registry} cannot be reached: {}",
                        chain(&error)
                    )
                })?;
                let status = answer.status();
                if !status.is_success() {
                    return Err(match pull.credential {
                        Some(credential) => refused(registry, status, credential),
                        None => needs_credentials(registry),
                    });
                }
                let document: Value = answer.json().await.map_err(|error| {
                    format!("the token service {realm} answered no JSON: {error}")
                })?;
                let token = document["token"]
                    .as_str()
                    .or(document["access_token"].as_str())
                    .ok_or_else(|| format!("the token service {realm} answered no token"))?;
                Ok(Some(format!("Bearer {token}")))
            }
            _ => Err(format!(
                "the registry {registry} asks for an authentication scheme Ferric does not \
                 know (\"{header}\")"
            )),
        }
    }

    /// A manifest: (document, content type, its digest); `pinned` must be its digest.
    async fn manifest(
        &self,
        pull: &Pull<'_>,
        reference: &str,
        pinned: Option<&str>,
    ) -> Result<(Value, Option<String>, String), String> {
        let url = format!("{}/manifests/{reference}", pull.base);
        let accept = [
            oci::MEDIA_INDEX,
            oci::MEDIA_MANIFEST,
            oci::MEDIA_DOCKER_LIST,
            oci::MEDIA_DOCKER_MANIFEST,
        ]
        .join(", ");
        let (bytes, content_type) = self.document(pull, &url, &accept, reference).await?;
        let algo = pinned
            .and_then(|digest| digest.split_once(':'))
            .map_or("sha256", |(algo, _)| algo);
        let digest = match algo {
            "sha512" => format!("sha512:{:x}", Sha512::digest(&bytes)),
            _ => format!("sha256:{:x}", Sha256::digest(&bytes)),
        };
        if let Some(pinned) = pinned
            && pinned != digest
        {
            return Err(format!(
                "the registry's manifest {reference} hashes to {digest}, not to its digest; it \
                 was not used"
            ));
        }
        let document = serde_json::from_slice(&bytes)
            .map_err(|error| format!("manifest {reference} is not JSON: {error}"))?;
        Ok((document, content_type, digest))
    }

    /// A small document of the repository (a manifest or a config blob): (bytes, content type).
    async fn document(
        &self,
        pull: &Pull<'_>,
        url: &str,
        accept: &str,
        what: &str,
    ) -> Result<(Vec<u8>, Option<String>), String> {
        let registry = &pull.reference.registry;
        let mut request = self.http.get(url).header(reqwest::header::ACCEPT, accept);
        if let Some(authorization) = &pull.authorization {
            request = request.header(reqwest::header::AUTHORIZATION, authorization);
        }
        let mut response = request.send().await.map_err(|error| {
            format!(
                "the registry {registry} cannot be reached: {}",
                chain(&error)
            )
        })?;
        let status = response.status();
        match status {
            reqwest::StatusCode::UNAUTHORIZED | reqwest::StatusCode::FORBIDDEN => {
                return Err(match pull.credential {
                    Some(credential) => refused(registry, status, credential),
                    None => needs_credentials(registry),
                });
            }
            reqwest::StatusCode::NOT_FOUND => {
                return Err(format!(
                    "the registry {registry} has no {what} in repository {}",
                    pull.reference.repository
                ));
            }
            status if !status.is_success() => {
                return Err(format!(
                    "the registry {registry} answered {status} for {url}"
                ));
            }
            _ => {}
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split(';').next().unwrap_or(value).trim().to_owned());
        let mut bytes = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| format!("reading {url} failed: {}", chain(&error)))?
        {
            bytes.extend_from_slice(&chunk);
            if bytes.len() > DOCUMENT_LIMIT {
                return Err(format!("{url} is larger than {DOCUMENT_LIMIT} bytes"));
            }
        }
        Ok((bytes, content_type))
    }

    /// A manifest named directly says its architecture in its image config, when it has one.
    async fn check_architecture(
        &self,
        pull: &Pull<'_>,
        manifest: &Value,
        cpu_arch: &str,
    ) -> Result<(), String> {
        let config = &manifest["config"];
        let is_image_config = matches!(
            config["mediaType"].as_str(),
            Some(
                "application/vnd.oci.image.config.v1+json"
                    | "application/vnd.docker.container.image.v1+json"
            )
        );
        let (Some(digest), true) = (config["digest"].as_str(), is_image_config) else {
            return Ok(());
        };
        let url = format!("{}/blobs/{digest}", pull.base);
        let (bytes, _) = self
            .document(
                pull,
                &url,
                "application/json, */*",
                &format!("config {digest}"),
            )
            .await?;
        let document: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        match document["architecture"].as_str() {
            Some(architecture) if !oci::same_architecture(cpu_arch, architecture) => Err(format!(
                "it has no manifest for the node's architecture {cpu_arch} (its manifest is \
                 for {architecture})"
            )),
            _ => Ok(()),
        }
    }
}

fn resolved(
    pull: &Pull<'_>,
    manifest_digest: String,
    layer: oci::Layer,
    disk_format: Option<&'static str>,
) -> Resolved {
    let (algo, hex) = layer
        .digest
        .split_once(':')
        .map(|(algo, hex)| (algo.to_owned(), hex.to_owned()))
        .unwrap_or_default();
    Resolved {
        blob_url: format!("{}/blobs/{}", pull.base, layer.digest),
        manifest_digest,
        algo,
        hex,
        size: layer.size,
        disk_format,
        authorization: pull.authorization.clone(),
    }
}

fn needs_credentials(registry: &str) -> String {
    format!(
        "the registry {registry} requires credentials (HTTP 401) and none were given; set \
         instance_info.image_pull_secret, or the site's oci_authentication_config"
    )
}

fn refused(registry: &str, status: reqwest::StatusCode, credential: &Credential) -> String {
    format!(
        "the registry {registry} refused the credentials of {} ({status})",
        credential.from
    )
}

/// The certificates of a PEM bundle (`oci_verify_ca`).
pub fn root_certificates(path: &std::path::Path) -> Result<Vec<reqwest::Certificate>, String> {
    let pem = std::fs::read(path)
        .map_err(|error| format!("cannot read oci_verify_ca {}: {error}", path.display()))?;
    reqwest::Certificate::from_pem_bundle(&pem).map_err(|error| {
        format!(
            "oci_verify_ca {} holds no PEM certificates: {error}",
            path.display()
        )
    })
}

#[cfg(test)]
#[path = "oci_registry_tests.rs"]
mod tests;
