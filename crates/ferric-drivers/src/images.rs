//! Where the agent gets an instance image from: the site's image settings (Glance, the
//! conductor's image cache, `image_download_source`) and the lookups the `direct` deploy
//! interface makes with them. A Glance image always goes through the cache (agents hold no
//! token for Glance); an http(s) URL goes through it with `image_download_source = local`,
//! else the agent fetches it from its origin as before. An `oci://` image ([`crate::oci`]) is
//! resolved by the conductor and goes through the cache unless `oci_image_download_source =
//! http`, when the agent is given the registry's blob URL and the `Authorization` header for
//! that registry (Ironic's `image_request_authorization`).

use std::path::PathBuf;

use crate::DriverError;
use crate::glance::{Glance, GlanceImage};
use crate::image_cache::{CACHE_DIR, Expected, HashAlgo, ImageCache, Origin, TOKEN_DIR};
use crate::keystone_session::ServiceSession;
use crate::oci::Reference;
use crate::oci_registry::{Credential, Registry, Resolved};
use crate::peers::{Joiner, Swarms};
use crate::settings::{DownloadSource, boot_file_url};

/// The site's image settings, as `ferric server` reads them.
#[derive(Debug, Clone)]
pub struct ImageSettings {
    /// The boot file server's root; the cache is its `image-cache/` directory.
    pub http_root: PathBuf,
    /// The cache's bound in bytes (`image_cache_size`); 0: no cache.
    pub cache_size: u64,
    /// Whether http(s) images go through the cache too (`local`).
    pub download_source: DownloadSource,
    /// Ferric's Keystone session, when `keystone_auth_url` and its credentials are set.
    pub session: Option<ServiceSession>,
    /// `glance_valid_interfaces`.
    pub glance_interfaces: Vec<String>,
    /// `glance_region_name`.
    pub glance_region: Option<String>,
    /// `oci_verify_ca`: a CA bundle trusted for OCI registries (and the cache's downloads)
    /// besides the system's.
    pub oci_verify_ca: Option<PathBuf>,
    /// `oci_authentication_config`: the site's pull secrets, a Docker `config.json`.
    pub oci_authentication_config: Option<PathBuf>,
    /// `oci_image_download_source`: `local` (through the cache) or `http` (the agent pulls).
    pub oci_download_source: DownloadSource,
    /// `image_peer_delivery`: agents deploying an image from the cache fetch pieces from each
    /// other too ([`crate::peers`]).
    pub peer_delivery: bool,
}

/// The settings put to use: the Glance client and the cache. The default has neither (tests
/// and sites without Glance): URLs reach the agent unchanged.
#[derive(Debug, Clone, Default)]
pub struct ImageSources {
    pub glance: Option<Glance>,
    pub cache: Option<ImageCache>,
    pub download_source: DownloadSource,
    /// The OCI registry client; `None`: one trusting the system's CAs only.
    pub registry: Option<Registry>,
    pub oci_authentication_config: Option<PathBuf>,
    pub oci_download_source: DownloadSource,
    /// The swarms of peer-assisted delivery: there when the cache is and `image_peer_delivery`
    /// is the default (a deploy may still say otherwise, `instance_info.image_peer_delivery`).
    pub peers: Option<Swarms>,
    /// `image_peer_delivery`, the default for deploys that do not say.
    pub peer_delivery: bool,
}

/// An `oci://` image resolved for a node.
#[derive(Debug, Clone)]
pub struct OciImage {
    /// The `image_source` as given.
    pub source: String,
    pub resolved: Resolved,
}

impl ImageSources {
    /// The cache opened (created, or read back) and the Glance client built.
    pub fn new(settings: ImageSettings, metrics: ferric_metrics::Metrics) -> Result<Self, String> {
        let roots = match &settings.oci_verify_ca {
            Some(path) => crate::oci_registry::root_certificates(path)?,
            None => Vec::new(),
        };
        let cache = if settings.cache_size > 0 {
            let mut http = reqwest::Client::builder()
                .connect_timeout(std::time::Duration::from_secs(10))
                .user_agent(concat!("ferric/", env!("CARGO_PKG_VERSION")));
            for root in &roots {
                http = http.add_root_certificate(root.clone());
            }
            let http = http
                .build()
                .map_err(|error| format!("cannot set up the image cache's HTTP client: {error}"))?;
            Some(
                ImageCache::open(
                    &settings.http_root.join(CACHE_DIR),
                    settings.cache_size,
                    http,
                    metrics,
                )
                .map_err(|error| error.to_string())?,
            )
        } else {
            None
        };
        let glance = settings.session.map(|session| Glance {
            session,
            interfaces: settings.glance_interfaces,
            region: settings.glance_region,
        });
        let peers = cache.as_ref().map(|_| Swarms::default());
        Ok(Self {
            glance,
            cache,
            download_source: settings.download_source,
            registry: Some(Registry::new(&roots)?),
            oci_authentication_config: settings.oci_authentication_config,
            oci_download_source: settings.oci_download_source,
            peers,
            peer_delivery: settings.peer_delivery,
        })
    }

    fn cache(&self, field: &str, what: &str) -> Result<&ImageCache, DriverError> {
        self.cache.as_ref().ok_or_else(|| {
            DriverError::invalid(
                field,
                format!(
                    "{what} must go through this conductor's image cache, which is off \
                     (image_cache_size = 0); set image_cache_size."
                ),
            )
        })
    }

    /// The Glance image `id`, checked as deployable; `field` names the `instance_info` key.
    pub async fn glance_image(&self, field: &str, id: &str) -> Result<GlanceImage, DriverError> {
        self.glance_lookup(field, id, false).await
    }

    /// The Glance image `id` as a boot file (a kernel or ramdisk: any format), checked;
    /// `field` names the `driver_info`/`instance_info` key.
    pub async fn glance_boot_file(
        &self,
        field: &str,
        id: &str,
    ) -> Result<GlanceImage, DriverError> {
        self.glance_lookup(field, id, true).await
    }

    async fn glance_lookup(
        &self,
        field: &str,
        id: &str,
        boot_file: bool,
    ) -> Result<GlanceImage, DriverError> {
        let glance = self.glance.as_ref().ok_or_else(|| {
            DriverError::invalid(
                field,
                format!(
                    "{field} names Glance image {id}, but Ferric has no Keystone service \
                     credentials to reach Glance with; set keystone_auth_url, \
                     keystone_username, keystone_password and keystone_project_name."
                ),
            )
        })?;
        let image = glance.image(id, field).await?;
        let cache = self.cache(field, &image.shown())?;
        if boot_file {
            image.check_boot_file(field, cache.capacity())?;
        } else {
            image.check(field, cache.capacity())?;
        }
        if let Some(size) = image.size {
            cache
                .check_room(&glance_key(&image.id), &image.shown(), size)
                .map_err(|error| DriverError::invalid(field, error.to_string()))?;
        }
        Ok(image)
    }

    /// The Glance image in the cache: its URL on the boot file server at `http_url`, a deploy
    /// token of `holder` (the node's UUID) valid until [`Self::release`].
    pub async fn cached_glance(
        &self,
        holder: &str,
        field: &str,
        image: &GlanceImage,
        http_url: Option<&str>,
    ) -> Result<String, DriverError> {
        let http_url = served_at(&image.shown(), http_url)?;
        let name = self.cached_glance_file(holder, field, image).await?;
        boot_file_url(http_url, &name)
    }

    /// The Glance image in the cache: its name under the boot file server's root
    /// (`image-cache/t/<token>`, a deploy token of `holder`), for a boot interface that puts
    /// it into an iPXE script or reads it to build an ISO.
    pub async fn cached_glance_file(
        &self,
        holder: &str,
        field: &str,
        image: &GlanceImage,
    ) -> Result<String, DriverError> {
        let shown = image.shown();
        let cache = self.cache(field, &shown)?;
        let glance = self.glance.as_ref().ok_or_else(|| {
            DriverError::invalid(field, format!("{shown}: Ferric has no Glance client."))
        })?;
        let expected = image
            .expected()
            .ok_or_else(|| DriverError::invalid(field, format!("{shown} has no checksum.")))?;
        let origin = glance.data(&image.id).await?;
        let key = glance_key(&image.id);
        let entry = Entry {
            key: &key,
            what: &shown,
            origin: &origin,
            expected: &expected,
            size: image.size,
        };
        self.fetch(cache, holder, entry).await
    }

    /// A boot file setting (`driver_info.deploy_kernel`, …) naming a Glance image (its UUID
    /// or `glance://UUID`): checked, and with `fetch` put into the cache as `holder`'s, its
    /// name under the boot file server's root returned (without `fetch`, a name of the same
    /// shape that serves nothing, so that a boot script can be rendered to check it). None
    /// when `value` names no Glance image (a file name or URL, used as it is).
    pub async fn glance_boot_file_name(
        &self,
        holder: &str,
        field: &str,
        value: &str,
        fetch: bool,
    ) -> Result<Option<String>, DriverError> {
        let Some(id) = crate::glance::image_id(value) else {
            return Ok(None);
        };
        let image = self.glance_boot_file(field, id).await?;
        if !fetch {
            return Ok(Some(format!("{CACHE_DIR}/{TOKEN_DIR}/unfetched-{id}")));
        }
        Ok(Some(self.cached_glance_file(holder, field, &image).await?))
    }

    /// `node` with its agent kernel and ramdisk (`driver_info`, the `*_by_arch` settings or
    /// the site's) resolved where they name Glance images: checked against Glance, and with
    /// `fetch` put into the image cache as the node's deploy tokens (released when the boot
    /// interface cleans up the ramdisk), their names under the boot file server's root written
    /// into `driver_info` for the iPXE script or the ISO build.
    pub async fn resolve_agent_files(
        &self,
        settings: &crate::settings::BootSettings,
        node: &ferric_model::resources::Node,
        fetch: bool,
    ) -> Result<ferric_model::resources::Node, DriverError> {
        let (kernel, ramdisk) = crate::boot_arch::agent_files(settings, node)?;
        let (kernel, ramdisk) = (kernel.to_owned(), ramdisk.to_owned());
        let mut resolved = node.clone();
        let holder = node.uuid.to_string();
        for (key, value) in [("deploy_kernel", kernel), ("deploy_ramdisk", ramdisk)] {
            let field = format!("driver_info.{key}");
            if let Some(name) = self
                .glance_boot_file_name(&holder, &field, &value, fetch)
                .await?
            {
                resolved.driver_info.insert(key.into(), name.into());
            }
        }
        Ok(resolved)
    }

    /// Whether the agent pulls OCI images from their registry itself.
    pub fn oci_direct(&self) -> bool {
        self.oci_download_source == DownloadSource::Http
    }

    /// The `oci://` image `source` resolved for `node` and checked as deployable; every
    /// refusal names the image, and `field` the `instance_info` key.
    pub async fn oci_image(
        &self,
        field: &str,
        source: &str,
        node: &ferric_model::resources::Node,
    ) -> Result<OciImage, DriverError> {
        let refused = |reason: String| {
            DriverError::invalid(
                field,
                format!("OCI image {source} cannot be deployed: {reason}."),
            )
        };
        let reference = Reference::parse(source).map_err(|reason| {
            DriverError::invalid(
                field,
                format!("OCI image reference {source} is malformed: {reason}."),
            )
        })?;
        let credential = self.oci_credential(node, &reference)?;
        let cpu_arch = node
            .properties
            .get("cpu_arch")
            .and_then(serde_json::Value::as_str)
            .filter(|arch| !arch.is_empty());
        let registry = match &self.registry {
            Some(registry) => registry.clone(),
            None => Registry::new(&[]).map_err(refused)?,
        };
        let resolved = registry
            .resolve(
                &reference,
                cpu_arch,
                !self.oci_direct(),
                credential.as_ref(),
            )
            .await
            .map_err(refused)?;
        if !self.oci_direct() {
            let cache = self.cache(field, source)?;
            if let Some(size) = resolved.size
                && size > cache.capacity()
            {
                return Err(refused(format!(
                    "it is {size} bytes, larger than this conductor's whole image cache ({} \
                     bytes); raise image_cache_size",
                    cache.capacity()
                )));
            }
        }
        tracing::info!(node = %node.uuid, source, manifest = %resolved.manifest_digest, blob = %resolved.hex, "OCI image resolved");
        Ok(OciImage {
            source: source.to_owned(),
            resolved,
        })
    }

    /// The pull secret for `reference`, in Ironic's order (see [`crate::oci`]).
    fn oci_credential(
        &self,
        node: &ferric_model::resources::Node,
        reference: &Reference,
    ) -> Result<Option<Credential>, DriverError> {
        for (object, from) in [
            (&node.instance_info, "instance_info.image_pull_secret"),
            (&node.driver_info, "driver_info.image_pull_secret"),
        ] {
            if let Some(secret) = object
                .get("image_pull_secret")
                .and_then(serde_json::Value::as_str)
                .filter(|secret| !secret.trim().is_empty())
            {
                return Ok(Some(Credential {
                    basic: crate::oci::basic_credential(secret),
                    from: from.to_owned(),
                }));
            }
        }
        let Some(path) = &self.oci_authentication_config else {
            return Ok(None);
        };
        // Read at every use, as Ironic does: a site may renew its secrets without a restart.
        let unreadable = |problem: String| {
            DriverError::invalid(
                "settings.oci_authentication_config",
                format!("oci_authentication_config {} {problem}", path.display()),
            )
        };
        let text = std::fs::read_to_string(path)
            .map_err(|error| unreadable(format!("cannot be read: {error}")))?;
        let config: serde_json::Value = serde_json::from_str(&text)
            .map_err(|error| unreadable(format!("is not JSON: {error}")))?;
        Ok(
            crate::oci::secret_from_config(&config, &reference.registry, reference.host()).map(
                |secret| Credential {
                    basic: crate::oci::basic_credential(&secret),
                    from: format!("oci_authentication_config ({})", reference.registry),
                },
            ),
        )
    }

    /// The OCI image in the cache, keyed by its blob's digest: its URL on the boot file
    /// server at `http_url`, a deploy token of `holder`.
    pub async fn cached_oci(
        &self,
        holder: &str,
        field: &str,
        image: &OciImage,
        http_url: Option<&str>,
    ) -> Result<String, DriverError> {
        let cache = self.cache(field, &image.source)?;
        let resolved = &image.resolved;
        let algo = HashAlgo::parse(&resolved.algo).ok_or_else(|| {
            DriverError::invalid(field, format!("{}: unknown digest algorithm", image.source))
        })?;
        let origin = Origin {
            url: resolved.blob_url.clone(),
            headers: resolved
                .authorization
                .iter()
                .map(|value| ("Authorization".to_owned(), value.clone()))
                .collect(),
        };
        let expected = Expected {
            algo,
            value: resolved.hex.clone(),
        };
        let key = format!("oci-{}-{}", resolved.algo, resolved.hex);
        let what = format!("OCI image {}", image.source);
        let http_url = served_at(&what, http_url)?;
        let entry = Entry {
            key: &key,
            what: &what,
            origin: &origin,
            expected: &expected,
            size: resolved.size,
        };
        let name = self.fetch(cache, holder, entry).await?;
        boot_file_url(http_url, &name)
    }

    /// Whether http(s) images go through the cache.
    pub fn caches_urls(&self) -> bool {
        self.download_source == DownloadSource::Local && self.cache.is_some()
    }

    /// An http(s) image in the cache: its URL on the boot file server, a deploy token of
    /// `holder`.
    pub async fn cached_url(
        &self,
        holder: &str,
        field: &str,
        url: &str,
        expected: &Expected,
        http_url: Option<&str>,
    ) -> Result<String, DriverError> {
        let cache = self.cache(field, url)?;
        let origin = Origin {
            url: url.to_owned(),
            headers: Vec::new(),
        };
        let key = ImageCache::url_key(url, expected);
        let entry = Entry {
            key: &key,
            what: url,
            origin: &origin,
            expected,
            size: None,
        };
        let http_url = served_at(url, http_url)?;
        let name = self.fetch(cache, holder, entry).await?;
        boot_file_url(http_url, &name)
    }

    /// `image_info.ferric_peers` for `node`, whose agent is given `image` from the boot file
    /// server at `tracker`: the node joins the swarm of the cache entry its token names
    /// ([`crate::peers`]). `None` when the URL is not a cache token's, or the image is not raw
    /// (a qcow2 image is converted by each agent as it arrives: its pieces cannot be read back
    /// from the disk to serve to others).
    pub async fn join_swarm(
        &self,
        node: &ferric_model::resources::Node,
        ports: &[ferric_model::resources::Port],
        image: &ferric_model::resources::JsonObject,
        tracker: Option<&str>,
        agent_url: &str,
    ) -> Result<Option<serde_json::Value>, DriverError> {
        let url = image.get("urls").and_then(|urls| urls[0].as_str());
        let (Some(cache), Some(swarms), Some(url), Some(tracker)) =
            (&self.cache, &self.peers, url, tracker)
        else {
            return Ok(None);
        };
        let Some((key, path)) = url
            .rsplit_once('/')
            .and_then(|(_, token)| cache.entry_of_token(token))
        else {
            return Ok(None);
        };
        let node_uuid = node.uuid.to_string();
        let joiner = Joiner {
            node: &node_uuid,
            agent_url,
            switch_id: crate::peers::switch_of(ports),
        };
        let failed = |error: std::io::Error| {
            DriverError::failed(
                crate::Component::Conductor,
                format!("cannot read the cached image {key} for peer delivery: {error}"),
            )
        };
        if is_qcow2(&path).map_err(failed)? {
            tracing::info!(
                key,
                node = joiner.node,
                "peer delivery is for raw images: this qcow2 image goes from the conductor"
            );
            return Ok(None);
        }
        swarms
            .join(&key, &path, joiner, tracker)
            .await
            .map(Some)
            .map_err(failed)
    }

    /// Ends `holder`'s deploy tokens (its deploy wrote its image, or ended otherwise): their
    /// URLs answer 404 and the entries they pinned may be evicted.
    pub fn release(&self, holder: &str) {
        if let Some(cache) = &self.cache {
            cache.release(holder);
        }
    }

    /// The entry in the cache, pinned for `holder`: its token's name under the boot file
    /// server's root.
    async fn fetch(
        &self,
        cache: &ImageCache,
        holder: &str,
        entry: Entry<'_>,
    ) -> Result<String, DriverError> {
        let Entry {
            key,
            what,
            origin,
            expected,
            size,
        } = entry;
        let token = cache
            .fetch_pinned(holder, key, what, origin, expected, size)
            .await
            .map_err(|error| DriverError::failed(crate::Component::Conductor, error.to_string()))?;
        Ok(format!("{CACHE_DIR}/{TOKEN_DIR}/{token}"))
    }
}

/// The boot file server's URL, which serves `what` from the cache.
fn served_at<'a>(what: &str, http_url: Option<&'a str>) -> Result<&'a str, DriverError> {
    http_url.ok_or_else(|| {
        DriverError::missing(
            "settings.boot_http_url",
            format!(
                "{what} is served to the agent by the boot file server, but boot_http_url is not \
                 set."
            ),
        )
    })
}

/// Whether the file starts as a qcow2 image does.
fn is_qcow2(path: &std::path::Path) -> std::io::Result<bool> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path)?;
    match file.read_exact(&mut magic) {
        Ok(()) => Ok(&magic == b"QFI\xfb"),
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
        Err(error) => Err(error),
    }
}

/// What one cache entry is made of.
struct Entry<'a> {
    key: &'a str,
    what: &'a str,
    origin: &'a Origin,
    expected: &'a Expected,
    size: Option<u64>,
}

/// The cache key of a Glance image.
fn glance_key(id: &str) -> String {
    format!("glance-{id}")
}

/// The hash an http(s) image is checked with: `image_os_hash_algo`/`image_os_hash_value`, else
/// `image_checksum` (its algorithm told by its length: md5, sha256 or sha512).
pub fn expected_hash(
    checksum: Option<&str>,
    algo: Option<&str>,
    value: Option<&str>,
) -> Option<Expected> {
    if let (Some(algo), Some(value)) = (algo.and_then(HashAlgo::parse), value) {
        return Some(Expected {
            algo,
            value: value.to_ascii_lowercase(),
        });
    }
    let checksum = checksum?.trim();
    let algo = match checksum.len() {
        32 => HashAlgo::Md5,
        64 => HashAlgo::Sha256,
        128 => HashAlgo::Sha512,
        _ => return None,
    };
    checksum
        .bytes()
        .all(|byte| byte.is_ascii_hexdigit())
        .then(|| Expected {
            algo,
            value: checksum.to_ascii_lowercase(),
        })
}
