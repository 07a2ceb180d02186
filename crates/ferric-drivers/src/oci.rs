//! OCI image sources (Ironic 2025.1's `oci://` image service): `instance_info.image_source =
//! oci://registry/repository:tag` or `…@sha256:<digest>` names a disk image stored in an OCI
//! registry as an artifact: a manifest with one layer, the image itself. This module holds what
//! needs no network: the reference, the pull secret, and the choice of a manifest from an image
//! index; [`crate::oci_registry`] talks to the registry.
//!
//! Theory of operation, following Ironic's `OciImageService.identify_specific_image`:
//! - a tag may name an image index (one manifest per architecture and disk format) or a single
//!   manifest; a digest names one manifest, and pins it: the manifest read must hash to it;
//! - from an index, entries are ordered by their `disktype` annotation (`raw`/`applehv` are raw
//!   images, `qcow2`/`qemu` qcow2; raw first when the agent fetches from the registry, qcow2
//!   first when the conductor's cache does, as Ironic's `image_download_source` `http` and
//!   `local`), entries whose `platform.architecture` is not the node's `cpu_arch` are skipped
//!   (`x86_64` ≡ `amd64`, `aarch64` ≡ `arm64`), and the first remaining entry with a known
//!   `disktype` and a single layer is taken. Entries without `disktype` are passed over, as in
//!   Ironic;
//! - the layer's descriptor gives the image's size and checksum: its digest (sha256 or
//!   sha512), which the conductor's cache checks while downloading and the agent checks again;
//! - a manifest named directly says its disk format only through a `disktype` annotation (on the
//!   manifest or its layer); without one the agent is left to detect raw or qcow2 itself
//!   (Ironic's `unknown`);
//! - credentials (Ironic's order): `instance_info.image_pull_secret`, else
//!   `driver_info.image_pull_secret`, else the site's `oci_authentication_config` file (a
//!   Docker `config.json`: `{"auths": {"<registry host>": {"auth": "<secret>"}}}`), else
//!   anonymous. A secret is a Docker `auth` value (base64 of `user:password`) or, as Ironic's
//!   basic-auth form, a plain `user:password`; a bare token is sent with an empty user name,
//!   as Ironic does.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

/// The scheme of an OCI image source.
pub const SCHEME: &str = "oci://";

/// Whether `source` names an OCI image.
pub fn is_oci(source: &str) -> bool {
    source
        .get(..SCHEME.len())
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case(SCHEME))
}

/// An OCI artifact reference, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// `host[:port]`.
    pub registry: String,
    /// `path/to/repository`.
    pub repository: String,
    /// The tag (`latest` when neither a tag nor a digest is given).
    pub tag: Option<String>,
    /// `sha256:<hex>` or `sha512:<hex>`: pins the manifest.
    pub digest: Option<String>,
}

impl Reference {
    /// Parses `oci://registry/repository[:tag][@digest]`; the error says what is wrong.
    pub fn parse(source: &str) -> Result<Self, String> {
        if !is_oci(source) {
            return Err("it does not start with oci://".to_owned());
        }
        let rest = &source[SCHEME.len()..];
        let (registry, path) = rest
            .split_once('/')
            .ok_or("it names no repository after the registry host (oci://host/repository:tag)")?;
        if registry.is_empty()
            || !registry
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b".-:[]".contains(&byte))
        {
            return Err(format!("\"{registry}\" is not a registry host[:port]"));
        }
        let (name, digest) = match path.split_once('@') {
            Some((name, digest)) => (name, Some(check_digest(digest)?)),
            None => (path, None),
        };
        // A tag follows the last ':' after the last '/' (Ironic's own examples write
        // `repository:@sha256:…`, an empty tag before a digest).
        let last_slash = name.rfind('/').map_or(0, |at| at + 1);
        let (repository, tag) = match name[last_slash..].rfind(':') {
            Some(at) => (&name[..last_slash + at], &name[last_slash + at + 1..]),
            None => (name, ""),
        };
        check_repository(repository)?;
        // Docker Hub's API lives on another host, and its official images under `library/`.
        let (registry, repository) = match registry {
            "docker.io" | "index.docker.io" if !repository.contains('/') => {
                ("registry-1.docker.io", format!("library/{repository}"))
            }
            "docker.io" | "index.docker.io" => ("registry-1.docker.io", repository.to_owned()),
            other => (other, repository.to_owned()),
        };
        let tag = match (tag, &digest) {
            ("", Some(_)) => None,
            ("", None) => Some("latest".to_owned()),
            (tag, _) => {
                check_tag(tag)?;
                Some(tag.to_owned())
            }
        };
        Ok(Self {
            registry: registry.to_owned(),
            repository,
            tag,
            digest,
        })
    }

    /// What the manifest is asked for by: the digest when pinned, else the tag.
    pub fn manifest_reference(&self) -> &str {
        self.digest
            .as_deref()
            .or(self.tag.as_deref())
            .unwrap_or("latest")
    }

    /// The registry host without its port (the key of a Docker `config.json` may carry either).
    pub fn host(&self) -> &str {
        if self.registry.starts_with('[') {
            return self
                .registry
                .split_once(']')
                .map_or(self.registry.as_str(), |(host, _)| &host[1..]);
        }
        self.registry
            .split_once(':')
            .map_or(self.registry.as_str(), |(host, _)| host)
    }
}

fn check_digest(digest: &str) -> Result<String, String> {
    let (algo, hex) = digest
        .split_once(':')
        .ok_or_else(|| format!("digest \"{digest}\" is not algorithm:hex"))?;
    let length = match algo {
        "sha256" => 64,
        "sha512" => 128,
        other => {
            return Err(format!(
                "digest algorithm \"{other}\" is not sha256 or sha512"
            ));
        }
    };
    if hex.len() != length || !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(format!(
            "digest \"{digest}\" is not {length} hexadecimal digits of {algo}"
        ));
    }
    Ok(format!("{algo}:{}", hex.to_ascii_lowercase()))
}

/// The distribution spec's name grammar: lowercase alphanumeric components joined by `.`, `_`,
/// `__` or dashes, separated by `/`.
fn check_repository(repository: &str) -> Result<(), String> {
    let component_ok = |component: &str| {
        let bytes = component.as_bytes();
        !bytes.is_empty()
            && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
            && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
            && bytes.iter().all(|byte| {
                byte.is_ascii_lowercase() || byte.is_ascii_digit() || b"._-".contains(byte)
            })
    };
    if repository.is_empty() || repository.len() > 255 || !repository.split('/').all(component_ok) {
        return Err(format!(
            "\"{repository}\" is not a repository name (lowercase letters, digits and . _ - \
             between / separated parts)"
        ));
    }
    Ok(())
}

fn check_tag(tag: &str) -> Result<(), String> {
    let bytes = tag.as_bytes();
    let ok = bytes.len() <= 128
        && bytes
            .first()
            .is_some_and(|byte| byte.is_ascii_alphanumeric() || *byte == b'_')
        && bytes
            .iter()
            .all(|byte| byte.is_ascii_alphanumeric() || b"._-".contains(byte));
    if ok {
        Ok(())
    } else {
        Err(format!("\"{tag}\" is not a tag"))
    }
}

/// The `Authorization: Basic` credential of a pull secret (see the module docs).
pub fn basic_credential(secret: &str) -> String {
    let secret = secret.trim();
    let is_docker_auth = STANDARD
        .decode(secret)
        .ok()
        .and_then(|decoded| String::from_utf8(decoded).ok())
        .is_some_and(|decoded| decoded.contains(':'));
    if is_docker_auth {
        secret.to_owned()
    } else if secret.contains(':') {
        STANDARD.encode(secret)
    } else {
        STANDARD.encode(format!(":{secret}"))
    }
}

/// The pull secret for `host` in a Docker `config.json` document, if it has one; keys may be
/// `host`, `host:port` or a URL of either.
pub fn secret_from_config(config: &Value, registry: &str, host: &str) -> Option<String> {
    let auths = config.get("auths")?.as_object()?;
    auths.iter().find_map(|(key, entry)| {
        let key = key
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .trim_end_matches('/');
        (key == registry || key == host)
            .then(|| entry.get("auth")?.as_str().map(str::to_owned))
            .flatten()
    })
}

/// The media types of an OCI index and an OCI manifest (and Docker's own two, which
/// registries may answer with).
pub const MEDIA_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MEDIA_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MEDIA_DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const MEDIA_DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// Whether a manifest document is an index (a list of manifests).
pub fn is_index(document: &Value, content_type: Option<&str>) -> bool {
    let media = document["mediaType"].as_str().or(content_type);
    matches!(media, Some(MEDIA_INDEX | MEDIA_DOCKER_LIST))
        || (media.is_none() && document["manifests"].is_array())
}

/// A disk format a `disktype` annotation names, if Ferric can deploy it.
pub fn disk_format(disktype: &str) -> Option<&'static str> {
    match disktype {
        "raw" | "applehv" => Some("raw"),
        "qcow2" | "qemu" => Some("qcow2"),
        _ => None,
    }
}

/// The architecture names a node's `cpu_arch` matches in an index.
fn architectures(cpu_arch: &str) -> Vec<&str> {
    match cpu_arch {
        "x86_64" | "amd64" => vec!["x86_64", "amd64"],
        "aarch64" | "arm64" => vec!["aarch64", "arm64"],
        other => vec![other],
    }
}

/// Whether an index's or config's `architecture` is the node's `cpu_arch`.
pub fn same_architecture(cpu_arch: &str, architecture: &str) -> bool {
    architectures(cpu_arch).contains(&architecture)
}

/// An index entry chosen: its manifest's digest and disk format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub digest: String,
    pub disk_format: &'static str,
}

/// The index entries worth reading, best first (see the module docs); the error says why
/// none is.
pub fn candidates(
    index: &Value,
    cpu_arch: Option<&str>,
    prefer_qcow2: bool,
) -> Result<Vec<Candidate>, String> {
    let manifests = index["manifests"].as_array().cloned().unwrap_or_default();
    if manifests.is_empty() {
        return Err("its image index lists no manifests".to_owned());
    }
    let wanted = cpu_arch.map(architectures);
    let mut seen_architectures = Vec::new();
    let mut seen_disktypes = Vec::new();
    let mut found = Vec::new();
    for entry in &manifests {
        let architecture = entry["platform"]["architecture"].as_str();
        if let Some(architecture) = architecture
            && !seen_architectures.contains(&architecture)
        {
            seen_architectures.push(architecture);
        }
        if let (Some(wanted), Some(architecture)) = (&wanted, architecture)
            && !wanted.contains(&architecture)
        {
            continue;
        }
        let disktype = entry["annotations"]["disktype"].as_str();
        let Some(disktype) = disktype else {
            seen_disktypes.push("(none)");
            continue;
        };
        let (Some(format), Some(digest)) = (disk_format(disktype), entry["digest"].as_str()) else {
            seen_disktypes.push(disktype);
            continue;
        };
        found.push(Candidate {
            digest: digest.to_owned(),
            disk_format: format,
        });
    }
    if found.is_empty() {
        let arch = cpu_arch.unwrap_or("any");
        if seen_disktypes.is_empty() {
            return Err(format!(
                "it has no manifest for the node's architecture {arch} (it has {})",
                if seen_architectures.is_empty() {
                    "none named".to_owned()
                } else {
                    seen_architectures.join(", ")
                }
            ));
        }
        seen_disktypes.dedup();
        return Err(format!(
            "its manifests for architecture {arch} have disktype {}; Ferric deploys raw \
             (disktype raw, applehv) and qcow2 (disktype qcow2, qemu) images",
            seen_disktypes.join(", ")
        ));
    }
    let rank = |format: &str| match (format, prefer_qcow2) {
        ("raw", false) | ("qcow2", true) => 0,
        _ => 1,
    };
    // A stable sort: among equals the index's order stands.
    found.sort_by_key(|candidate| rank(candidate.disk_format));
    Ok(found)
}

/// The one layer of an artifact manifest: (digest, size, its disk format when annotated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layer {
    pub digest: String,
    pub size: Option<u64>,
    pub media_type: String,
    pub disk_format: Option<&'static str>,
}

/// The artifact's layer; the error says why the manifest is not a disk image artifact.
pub fn single_layer(manifest: &Value) -> Result<Layer, String> {
    let layers = manifest["layers"].as_array().cloned().unwrap_or_default();
    let [layer] = layers.as_slice() else {
        return Err(format!(
            "its manifest has {} layers, not one: it is a container image or another artifact, \
             not a disk image",
            layers.len()
        ));
    };
    let digest = layer["digest"]
        .as_str()
        .ok_or("its layer has no digest")
        .and_then(|digest| check_digest(digest).map_err(|_| "its layer's digest is malformed"))?;
    let media_type = layer["mediaType"].as_str().unwrap_or_default().to_owned();
    if media_type.ends_with("zstd") || media_type.ends_with("gzip") {
        return Err(format!(
            "its layer is compressed ({media_type}); the agent writes uncompressed raw and \
             qcow2 images only"
        ));
    }
    let disktype = manifest["annotations"]["disktype"]
        .as_str()
        .or(layer["annotations"]["disktype"].as_str());
    let disk_format = match disktype {
        Some(disktype) => Some(disk_format(disktype).ok_or_else(|| {
            format!(
                "it has disktype {disktype}; Ferric deploys raw (disktype raw, applehv) and \
                 qcow2 (disktype qcow2, qemu) images"
            )
        })?),
        None => None,
    };
    Ok(Layer {
        digest,
        size: layer["size"].as_u64(),
        media_type,
        disk_format,
    })
}

#[cfg(test)]
#[path = "oci_tests.rs"]
mod tests;
