//! Where the agent gets an instance image from: the site's image settings (Glance, the
//! conductor's image cache, `image_download_source`) and the lookups the `direct` deploy
//! interface makes with them. A Glance image always goes through the cache (agents hold no
//! token for Glance); an http(s) URL goes through it with `image_download_source = local`,
//! else the agent fetches it from its origin as before.

use std::path::PathBuf;

use crate::DriverError;
use crate::glance::{Glance, GlanceImage};
use crate::image_cache::{CACHE_DIR, Expected, HashAlgo, ImageCache, Origin};
use crate::keystone_session::ServiceSession;
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
}

/// The settings put to use: the Glance client and the cache. The default has neither (tests
/// and sites without Glance): URLs reach the agent unchanged.
#[derive(Debug, Clone, Default)]
pub struct ImageSources {
    pub glance: Option<Glance>,
    pub cache: Option<ImageCache>,
    pub download_source: DownloadSource,
}

impl ImageSources {
    /// The cache opened (created, or read back) and the Glance client built.
    pub fn new(settings: ImageSettings, metrics: ferric_metrics::Metrics) -> Result<Self, String> {
        let cache = if settings.cache_size > 0 {
            let http = reqwest::Client::builder()
                .connect_timeout(std::time::Duration::from_secs(10))
                .user_agent(concat!("ferric/", env!("CARGO_PKG_VERSION")))
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
        Ok(Self {
            glance,
            cache,
            download_source: settings.download_source,
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
        image.check(field, cache.capacity())?;
        Ok(image)
    }

    /// The Glance image in the cache: its URL on the boot file server at `http_url`.
    pub async fn cached_glance(
        &self,
        field: &str,
        image: &GlanceImage,
        http_url: Option<&str>,
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
        let key = format!("glance-{}", image.id);
        self.fetch(
            cache, &key, &shown, &origin, &expected, image.size, http_url,
        )
        .await
    }

    /// Whether http(s) images go through the cache.
    pub fn caches_urls(&self) -> bool {
        self.download_source == DownloadSource::Local && self.cache.is_some()
    }

    /// An http(s) image in the cache: its URL on the boot file server.
    pub async fn cached_url(
        &self,
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
        self.fetch(cache, &key, url, &origin, expected, None, http_url)
            .await
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "one private helper of the two above"
    )]
    async fn fetch(
        &self,
        cache: &ImageCache,
        key: &str,
        what: &str,
        origin: &Origin,
        expected: &Expected,
        size: Option<u64>,
        http_url: Option<&str>,
    ) -> Result<String, DriverError> {
        let http_url = http_url.ok_or_else(|| {
            DriverError::missing(
                "settings.boot_http_url",
                format!(
                    "{what} is served to the agent by the boot file server, but boot_http_url \
                     is not set."
                ),
            )
        })?;
        cache
            .fetch(key, what, origin, expected, size)
            .await
            .map_err(|error| DriverError::failed(crate::Component::Conductor, error.to_string()))?;
        boot_file_url(http_url, &format!("{CACHE_DIR}/{key}"))
    }
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
