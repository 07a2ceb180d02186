//! Glance image sources: `instance_info.image_source` given as a Glance image UUID or
//! `glance://UUID`. The conductor reads the image's metadata from Glance v2 (`GET
//! /v2/images/{id}`) with Ferric's service token, the endpoint taken from that token's catalog
//! (service type `image`, `glance_valid_interfaces`, `glance_region_name`), and downloads its
//! data (`GET /v2/images/{id}/file`) into the image cache ([`crate::image_cache`]); the agent
//! is given the cache's URL, never Glance's.
//!
//! An image Ferric cannot deploy is refused when the node is validated, naming the image: one
//! that is not `active`, has no checksum or hash, is in a disk or container format Ferric
//! cannot write (raw or qcow2, bare), or is larger than the whole cache.
//!
//! Boot files may be Glance images too — `deploy_kernel`/`deploy_ramdisk` (a node's or the
//! site's) and a partition image's `kernel`/`ramdisk` — checked the same way but in any format
//! ([`GlanceImage::check_boot_file`]: Glance calls kernels `aki` and ramdisks `ari`), and served
//! from the cache to iPXE or built into the virtual-media ISO (`ImageSources::resolve_agent_files`).

use serde_json::Value;

use crate::DriverError;
use crate::image_cache::{Expected, HashAlgo, Origin};
use crate::keystone_session::{ServiceSession, endpoint};

/// The disk formats the agent writes.
pub const DISK_FORMATS: &[&str] = &["raw", "qcow2"];

/// The Glance image ID `source` names, if it names one: a UUID, or `glance://` and a UUID.
pub fn image_id(source: &str) -> Option<&str> {
    let id = source.strip_prefix("glance://").unwrap_or(source);
    is_uuid(id).then_some(id)
}

fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(at, byte)| match at {
            8 | 13 | 18 | 23 => *byte == b'-',
            _ => byte.is_ascii_hexdigit(),
        })
}

/// What Ferric uses of a Glance image's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlanceImage {
    pub id: String,
    pub name: Option<String>,
    pub status: String,
    pub disk_format: Option<String>,
    pub container_format: Option<String>,
    pub size: Option<u64>,
    pub checksum: Option<String>,
    pub os_hash_algo: Option<String>,
    pub os_hash_value: Option<String>,
}

impl GlanceImage {
    /// From Glance v2's image document.
    pub fn from_json(document: &Value) -> Self {
        let text = |key: &str| {
            document[key]
                .as_str()
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        Self {
            id: text("id").unwrap_or_default(),
            name: text("name"),
            status: text("status").unwrap_or_default(),
            disk_format: text("disk_format"),
            container_format: text("container_format"),
            size: document["size"].as_u64(),
            checksum: text("checksum"),
            os_hash_algo: text("os_hash_algo"),
            os_hash_value: text("os_hash_value"),
        }
    }

    /// How the image is named in messages: its ID, and its name when it has one.
    pub fn shown(&self) -> String {
        match &self.name {
            Some(name) => format!("Glance image {} ({name})", self.id),
            None => format!("Glance image {}", self.id),
        }
    }

    /// The hash its data is verified with: `os_hash_algo`/`os_hash_value` (sha256, sha512),
    /// else the md5 `checksum`.
    pub fn expected(&self) -> Option<Expected> {
        let multihash = match (&self.os_hash_algo, &self.os_hash_value) {
            (Some(algo), Some(value)) => HashAlgo::parse(algo).map(|algo| Expected {
                algo,
                value: value.to_ascii_lowercase(),
            }),
            _ => None,
        };
        multihash.or_else(|| {
            self.checksum.as_ref().map(|value| Expected {
                algo: HashAlgo::Md5,
                value: value.to_ascii_lowercase(),
            })
        })
    }

    /// Whether Ferric can deploy it through a cache of `capacity` bytes; the refusal names
    /// the image and, as `field`, the `instance_info` key that named it.
    pub fn check(&self, field: &str, capacity: u64) -> Result<(), DriverError> {
        self.check_data(field, capacity, false)
    }

    /// Whether Ferric can serve it as a boot file (`deploy_kernel`, `deploy_ramdisk`, a
    /// partition image's `kernel`/`ramdisk`): as [`Self::check`], in any disk and container
    /// format (Glance labels kernels `aki`, ramdisks `ari`; the bytes are served as they are).
    pub fn check_boot_file(&self, field: &str, capacity: u64) -> Result<(), DriverError> {
        self.check_data(field, capacity, true)
    }

    fn check_data(&self, field: &str, capacity: u64, any_format: bool) -> Result<(), DriverError> {
        let shown = self.shown();
        let invalid = |message: String| DriverError::invalid(field, message);
        if self.expected().is_none() {
            return Err(invalid(format!(
                "{shown} has no checksum and no sha256/sha512 os_hash_value in Glance, so the \
                 written image could not be verified; upload it again so Glance computes them."
            )));
        }
        if self.status != "active" {
            return Err(invalid(format!(
                "{shown} is {}, not active: its data is not (yet) in Glance.",
                if self.status.is_empty() {
                    "of no status"
                } else {
                    &self.status
                }
            )));
        }
        match self.disk_format.as_deref() {
            _ if any_format => {}
            Some(format) if DISK_FORMATS.contains(&format) => {}
            other => {
                return Err(invalid(format!(
                    "{shown} has disk_format {}; Ferric deploys raw and qcow2 images only.",
                    other.unwrap_or("(none)")
                )));
            }
        }
        match self.container_format.as_deref() {
            _ if any_format => {}
            None | Some("bare") => {}
            Some(other) => {
                return Err(invalid(format!(
                    "{shown} has container_format {other}; Ferric deploys bare images only."
                )));
            }
        }
        if let Some(size) = self.size
            && size > capacity
        {
            return Err(invalid(format!(
                "{shown} is {size} bytes, larger than this conductor's whole image cache \
                 ({capacity} bytes); raise image_cache_size."
            )));
        }
        Ok(())
    }
}

/// Glance, found through Ferric's service token.
#[derive(Debug, Clone)]
pub struct Glance {
    pub session: ServiceSession,
    /// The catalog interfaces tried in order (`glance_valid_interfaces`).
    pub interfaces: Vec<String>,
    /// The catalog region (`glance_region_name`); `None`: any.
    pub region: Option<String>,
}

impl Glance {
    /// The image endpoint and a token to call it with.
    async fn endpoint(&self, renew: bool) -> Result<(String, String), DriverError> {
        let token =
            self.session.token(renew).await.map_err(|error| {
                DriverError::failed(crate::Component::Glance, error.to_string())
            })?;
        let interfaces: Vec<&str> = self.interfaces.iter().map(String::as_str).collect();
        let url = endpoint(&token.catalog, "image", &interfaces, self.region.as_deref())
            .ok_or_else(|| {
                DriverError::failed(
                    crate::Component::Glance,
                    format!(
                        "Keystone's catalog has no image service endpoint (interfaces {}{}) for \
                         Ferric's service user {}",
                        self.interfaces.join(", "),
                        self.region
                            .as_deref()
                            .map(|region| format!(", region {region}"))
                            .unwrap_or_default(),
                        self.session.credentials().username
                    ),
                )
            })?;
        Ok((url, token.token))
    }

    /// `GET /v2/images/{id}`; `field` names the `instance_info` key in a refusal.
    pub async fn image(&self, id: &str, field: &str) -> Result<GlanceImage, DriverError> {
        for attempt in 0..2 {
            let (base, token) = self.endpoint(attempt > 0).await?;
            let url = format!("{base}/v2/images/{id}");
            let response = self
                .session
                .http()
                .get(&url)
                .header("X-Auth-Token", &token)
                .send()
                .await
                .map_err(|error| {
                    DriverError::failed(
                        crate::Component::Glance,
                        format!(
                            "Glance at {base} did not answer for image {id}: {}",
                            crate::agent_client::error_chain(&error).join(": ")
                        ),
                    )
                })?;
            match response.status() {
                reqwest::StatusCode::UNAUTHORIZED if attempt == 0 => continue,
                reqwest::StatusCode::NOT_FOUND => {
                    return Err(DriverError::invalid(
                        field,
                        format!(
                            "Glance image {id} does not exist (or Ferric's service user may not \
                             see it)."
                        ),
                    ));
                }
                status if status.is_success() => {
                    let document: Value = response.json().await.map_err(|error| {
                        DriverError::failed(
                            crate::Component::Glance,
                            format!("Glance answered image {id} with no JSON document: {error}"),
                        )
                    })?;
                    return Ok(GlanceImage::from_json(&document));
                }
                status => {
                    return Err(DriverError::failed(
                        crate::Component::Glance,
                        format!("Glance at {base} answered {status} for image {id}"),
                    ));
                }
            }
        }
        Err(DriverError::failed(
            crate::Component::Glance,
            "Glance does not accept Ferric's fresh service token".to_owned(),
        ))
    }

    /// Where the image's data is read from, with the token as a header.
    pub async fn data(&self, id: &str) -> Result<Origin, DriverError> {
        let (base, token) = self.endpoint(false).await?;
        Ok(Origin {
            url: format!("{base}/v2/images/{id}/file"),
            headers: vec![("X-Auth-Token".to_owned(), token)],
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const ID: &str = "0b9f4c4e-5a8e-4a62-9d1b-1f5d2c3b4a59";

    fn image(overrides: Value) -> GlanceImage {
        let mut document = json!({
            "id": ID, "name": "debian", "status": "active", "disk_format": "raw",
            "container_format": "bare", "size": 1000, "checksum": "ab",
            "os_hash_algo": "sha512", "os_hash_value": "CD",
        });
        for (key, value) in overrides.as_object().unwrap() {
            document[key] = value.clone();
        }
        GlanceImage::from_json(&document)
    }

    #[test]
    fn sources_name_glance_images_by_uuid() {
        assert_eq!(image_id(ID), Some(ID));
        assert_eq!(image_id(&format!("glance://{ID}")), Some(ID));
        assert_eq!(image_id("http://x/disk.img"), None);
        assert_eq!(image_id("disk.img"), None);
        assert_eq!(image_id(&ID.replace('-', "x")), None);
    }

    #[test]
    fn the_multihash_is_preferred_to_md5() {
        let expected = image(json!({})).expected().unwrap();
        assert_eq!(
            (expected.algo, expected.value.as_str()),
            (HashAlgo::Sha512, "cd")
        );
        let md5 = image(json!({"os_hash_algo": null, "os_hash_value": null}));
        assert_eq!(md5.expected().unwrap().algo, HashAlgo::Md5);
    }

    #[test]
    fn images_ferric_cannot_deploy_are_refused_by_name() {
        let field = "instance_info.image_source";
        assert!(image(json!({})).check(field, 1000).is_ok());
        let refusal = |overrides: Value, capacity| {
            image(overrides)
                .check(field, capacity)
                .unwrap_err()
                .to_string()
        };
        let no_hash = refusal(
            json!({"checksum": null, "os_hash_algo": null, "os_hash_value": null}),
            1000,
        );
        assert!(
            no_hash.contains(ID) && no_hash.contains("no checksum"),
            "{no_hash}"
        );
        let iso = refusal(json!({"disk_format": "iso"}), 1000);
        assert!(
            iso.contains("disk_format iso") && iso.contains("debian"),
            "{iso}"
        );
        let ova = refusal(json!({"container_format": "ova"}), 1000);
        assert!(ova.contains("container_format ova"), "{ova}");
        let large = refusal(json!({}), 999);
        assert!(
            large.contains("larger than") && large.contains(ID),
            "{large}"
        );
        let queued = refusal(json!({"status": "queued"}), 1000);
        assert!(queued.contains("queued"), "{queued}");
    }
}
