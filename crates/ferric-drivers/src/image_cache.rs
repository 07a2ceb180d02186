//! The conductor's image cache (Ironic's `image_download_source = http`): an instance image
//! is downloaded once — from Glance, or from an http(s) URL with `image_download_source =
//! local` — verified against its hash, kept under `<boot_http_root>/image-cache/` and served
//! to every agent deploying it by the boot file server (with range requests), so N machines
//! deploying one image cost the origin one copy.
//!
//! Theory of operation:
//! - an entry is a file named by its key (`glance-<image id>`, or `url-<digest of the URL and
//!   its checksum>` so a changed checksum is a new entry); it is written to `.<key>.part`,
//!   hashed as it arrives and renamed only once the hash matched, so a name under the served
//!   directory is always a whole, verified image;
//! - one download per key: callers for the same key wait on that key's lock and then find the
//!   entry (a hit); callers for other keys are not held up;
//! - the sum of the entries' sizes stays within the capacity (`image_cache_size`): before an
//!   image is added, the least recently used entries go (evictions). An image larger than the
//!   whole cache is refused, and a download that grows past it is stopped;
//! - at start the directory is read back (verified entries, oldest modification first); `.part`
//!   files of an interrupted download are removed.
//!
//! Hits, misses and evictions are counted in the process's metrics (`ferric_image_cache_*`).
//!
//! Exposure and pinning (deploy tokens): an entry is never served under its own name — a
//! Glance image's key holds its UUID, and anyone on the boot network who knew a private
//! image's UUID could otherwise download it. The agent runs unauthenticated (IPA sends no
//! header when it downloads `image_info.urls`), so the URL itself is the credential: each node
//! deploying from an entry is given a token ([`ImageCache::fetch_pinned`]), 32 random bytes
//! from the OS in hex, and the entry is reachable only as `image-cache/t/<token>`, a hard link
//! to it that the boot file server serves (everything else under `image-cache/` answers 404,
//! see `ferric/src/boot_files.rs`). The token is the node's while it deploys: the deploy
//! interface releases it ([`ImageCache::release`]) when the image is written, and when the
//! deploy is aborted, fails or is torn down; tokens do not outlive the process (a starting
//! conductor removes the links it did not issue, [`ImageCache::remove_stale_tokens`]), so a
//! conductor restart ends them. Ironic
//! does less here: with `image_download_source = http` it links the cached image as
//! `<http_root>/agent_images/<node UUID>` (`http_image_subdir`), a name anyone knowing the
//! node's UUID can fetch, removed when the deploy's clean-up runs.
//!
//! A token also pins its entry: eviction skips entries a token names, so an agent reading an
//! image by ranges never sees it change or shrink under it (the hard link would keep the bytes
//! anyway, but uncounted). When the room an image needs is held by pinned entries, it is
//! refused (`CacheError::Full`, naming `image_cache_size`) — at validate when Glance gave its
//! size ([`ImageCache::check_room`]), else when the deploy fetches it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use md5::Md5;
use sha2::{Digest, Sha256, Sha512};
use tokio::io::AsyncWriteExt;

/// The directory under the boot file server's root.
pub const CACHE_DIR: &str = "image-cache";

/// The directory under the cache's of the deploy tokens' links: the only names the boot file
/// server serves of the cache (`image-cache/t/<token>`).
pub const TOKEN_DIR: &str = "t";

/// A hash algorithm an image may be verified with (Glance's `os_hash_algo`, or its md5
/// `checksum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashAlgo {
    Md5,
    Sha256,
    Sha512,
}

impl HashAlgo {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "md5" => Some(Self::Md5),
            "sha256" => Some(Self::Sha256),
            "sha512" => Some(Self::Sha512),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Md5 => "md5",
            Self::Sha256 => "sha256",
            Self::Sha512 => "sha512",
        }
    }
}

/// The hash an image must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub algo: HashAlgo,
    /// Lowercase hex.
    pub value: String,
}

/// Where the bytes come from: one GET, with headers (Glance's `X-Auth-Token`).
#[derive(Debug, Clone)]
pub struct Origin {
    pub url: String,
    pub headers: Vec<(String, String)>,
}

/// Why an image is not in the cache.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error(
        "{what} is {size} bytes, larger than the whole image cache ({capacity} bytes, image_cache_size)"
    )]
    TooLarge {
        what: String,
        size: u64,
        capacity: u64,
    },
    #[error("downloading {what} from {url} failed: {problem}")]
    Download {
        what: String,
        url: String,
        problem: String,
    },
    #[error(
        "{what} downloaded from {url} has {algo} {actual}, not the expected {expected}; it was not kept"
    )]
    HashMismatch {
        what: String,
        url: String,
        algo: &'static str,
        actual: String,
        expected: String,
    },
    #[error(
        "{what} ({size} bytes) does not fit in the image cache now: {pinned} of its {capacity} \
         bytes hold images that nodes are deploying from; retry once those deploys end, or raise \
         image_cache_size"
    )]
    Full {
        what: String,
        size: u64,
        pinned: u64,
        capacity: u64,
    },
    #[error("the image cache directory {path} cannot be written")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The cache. Cheap to clone; clones share it.
#[derive(Clone)]
pub struct ImageCache {
    inner: Arc<Inner>,
}

struct Inner {
    dir: PathBuf,
    capacity: u64,
    http: reqwest::Client,
    index: Mutex<Index>,
    /// One lock per key: the single download.
    downloads: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    metrics: ferric_metrics::Metrics,
}

#[derive(Default)]
struct Index {
    entries: HashMap<String, Entry>,
    /// Bytes of all entries.
    used: u64,
    /// A use counter: larger is more recent.
    clock: u64,
    /// The deploy tokens: token → who holds it and the entry it names (pinned).
    tokens: HashMap<String, Token>,
}

struct Token {
    holder: String,
    key: String,
}

impl Index {
    fn pinned(&self, key: &str) -> bool {
        self.tokens.values().any(|token| token.key == key)
    }

    /// Bytes of the pinned entries other than `except`.
    fn pinned_bytes(&self, except: &str) -> u64 {
        self.entries
            .iter()
            .filter(|(key, _)| key.as_str() != except && self.pinned(key))
            .map(|(_, entry)| entry.size)
            .sum()
    }
}

struct Entry {
    size: u64,
    last_used: u64,
}

impl std::fmt::Debug for ImageCache {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("ImageCache")
            .field("dir", &self.inner.dir)
            .field("capacity", &self.inner.capacity)
            .finish_non_exhaustive()
    }
}

impl ImageCache {
    /// The cache in `dir` (created if missing, read back if not), holding at most `capacity`
    /// bytes, downloading with `http`.
    pub fn open(
        dir: &Path,
        capacity: u64,
        http: reqwest::Client,
        metrics: ferric_metrics::Metrics,
    ) -> Result<Self, CacheError> {
        let io = |source| CacheError::Io {
            path: dir.to_owned(),
            source,
        };
        std::fs::create_dir_all(dir.join(TOKEN_DIR)).map_err(io)?;
        let mut found = Vec::new();
        for item in std::fs::read_dir(dir).map_err(io)? {
            let item = item.map_err(io)?;
            let name = item.file_name().to_string_lossy().into_owned();
            let meta = item.metadata().map_err(io)?;
            if !meta.is_file() {
                continue;
            }
            if name.starts_with('.') {
                let _ = std::fs::remove_file(item.path());
                continue;
            }
            let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
            found.push((modified, name, meta.len()));
        }
        found.sort();
        let mut index = Index::default();
        for (_, name, size) in found {
            index.clock += 1;
            index.used += size;
            index.entries.insert(
                name,
                Entry {
                    size,
                    last_used: index.clock,
                },
            );
        }
        metrics.image_cache_size(index.used);
        Ok(Self {
            inner: Arc::new(Inner {
                dir: dir.to_owned(),
                capacity,
                http,
                index: Mutex::new(index),
                downloads: Mutex::new(HashMap::new()),
                metrics,
            }),
        })
    }

    pub fn capacity(&self) -> u64 {
        self.inner.capacity
    }

    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        self.lock_index().used
    }

    /// Whether `key` is held.
    pub fn contains(&self, key: &str) -> bool {
        self.lock_index().entries.contains_key(key)
    }

    /// The entry's key for an http(s) image: its URL and checksum, digested.
    pub fn url_key(url: &str, expected: &Expected) -> String {
        let digest = Sha256::digest(format!(
            "{url}\n{}:{}",
            expected.algo.as_str(),
            expected.value
        ));
        format!("url-{:x}", digest)[..36].to_owned()
    }

    /// The file of `key`, downloaded from `origin` first unless held. `what` names the image
    /// in errors; `size`, when known, refuses an image larger than the cache before any
    /// download and makes room first.
    pub async fn fetch(
        &self,
        key: &str,
        what: &str,
        origin: &Origin,
        expected: &Expected,
        size: Option<u64>,
    ) -> Result<PathBuf, CacheError> {
        let lock = {
            let mut downloads = self
                .inner
                .downloads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            downloads.entry(key.to_owned()).or_default().clone()
        };
        let _single = lock.lock().await;
        let path = self.inner.dir.join(key);
        if self.touch(key) && path.is_file() {
            self.inner.metrics.image_cache_hit();
            return Ok(path);
        }
        self.forget(key);
        self.inner.metrics.image_cache_miss();
        if let Some(size) = size {
            self.check_fits(what, size)?;
            self.make_room(what, size, key)?;
        }
        let written = self.download(key, what, origin, expected).await?;
        if let Err(error) = self.make_room(what, written, key) {
            let _ = std::fs::remove_file(&path);
            return Err(error);
        }
        let mut index = self.lock_index();
        index.clock += 1;
        let last_used = index.clock;
        index.used += written;
        index.entries.insert(
            key.to_owned(),
            Entry {
                size: written,
                last_used,
            },
        );
        self.inner.metrics.image_cache_size(index.used);
        Ok(path)
    }

    /// [`Self::fetch`], and a deploy token of `holder` (a node's UUID) for the entry: its name
    /// under `image-cache/t/`, valid, and the entry pinned, until [`Self::release`].
    pub async fn fetch_pinned(
        &self,
        holder: &str,
        key: &str,
        what: &str,
        origin: &Origin,
        expected: &Expected,
        size: Option<u64>,
    ) -> Result<String, CacheError> {
        // Another fetch may evict the entry between its arrival and the pin: fetch again.
        for _ in 0..3 {
            self.fetch(key, what, origin, expected, size).await?;
            if let Some(token) = self.pin(holder, key)? {
                return Ok(token);
            }
        }
        let index = self.lock_index();
        Err(CacheError::Full {
            what: what.to_owned(),
            size: size.unwrap_or_default(),
            pinned: index.pinned_bytes(key),
            capacity: self.inner.capacity,
        })
    }

    /// A token of `holder` for `key`'s entry (the one it has already, if any); None when the
    /// entry is not held.
    fn pin(&self, holder: &str, key: &str) -> Result<Option<String>, CacheError> {
        let mut index = self.lock_index();
        if !index.entries.contains_key(key) {
            return Ok(None);
        }
        if let Some((token, _)) = index
            .tokens
            .iter()
            .find(|(_, token)| token.holder == holder && token.key == key)
        {
            return Ok(Some(token.clone()));
        }
        let mut bytes = [0u8; 32];
        rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
        let token: String = bytes.iter().map(|byte| format!("{byte:02x}")).collect();
        let link = self.inner.dir.join(TOKEN_DIR).join(&token);
        std::fs::hard_link(self.inner.dir.join(key), &link).map_err(|source| CacheError::Io {
            path: link.clone(),
            source,
        })?;
        index.tokens.insert(
            token.clone(),
            Token {
                holder: holder.to_owned(),
                key: key.to_owned(),
            },
        );
        tracing::info!(key, holder, "image cache entry pinned for a deploy");
        Ok(Some(token))
    }

    /// Ends every token of `holder`: their URLs answer 404 and their entries may be evicted
    /// again. Returns how many there were.
    pub fn release(&self, holder: &str) -> usize {
        let mut index = self.lock_index();
        let ended: Vec<String> = index
            .tokens
            .iter()
            .filter(|(_, token)| token.holder == holder)
            .map(|(token, _)| token.clone())
            .collect();
        for token in &ended {
            index.tokens.remove(token);
            let link = self.inner.dir.join(TOKEN_DIR).join(token);
            if let Err(error) = std::fs::remove_file(&link)
                && error.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(holder, %error, "cannot remove a deploy token's link");
            }
        }
        if !ended.is_empty() {
            tracing::info!(holder, tokens = ended.len(), "deploy tokens released");
        }
        ended.len()
    }

    /// Removes the token links this cache did not issue: a previous life's (tokens do not
    /// outlive the conductor that issued them). Called by the process that serves the cache
    /// when it starts — not by every process that opens it (an API-only process or `ferric
    /// inspector` on the same root must not end a running conductor's tokens). Returns how
    /// many went.
    pub fn remove_stale_tokens(&self) -> Result<usize, CacheError> {
        let index = self.lock_index();
        let dir = self.inner.dir.join(TOKEN_DIR);
        let io = |source| CacheError::Io {
            path: dir.clone(),
            source,
        };
        let mut removed = 0;
        for item in std::fs::read_dir(&dir).map_err(io)? {
            let item = item.map_err(io)?;
            let name = item.file_name().to_string_lossy().into_owned();
            if !index.tokens.contains_key(&name) {
                std::fs::remove_file(item.path()).map_err(io)?;
                removed += 1;
            }
        }
        if removed > 0 {
            tracing::info!(removed, "stale deploy tokens of a previous life removed");
        }
        Ok(removed)
    }

    /// The entry a live token names: its key and its file.
    pub fn entry_of_token(&self, token: &str) -> Option<(String, PathBuf)> {
        let index = self.lock_index();
        let key = &index.tokens.get(token)?.key;
        Some((key.clone(), self.inner.dir.join(key)))
    }

    /// The tokens held now (by any node).
    pub fn tokens(&self) -> usize {
        self.lock_index().tokens.len()
    }

    /// Whether an image of `size` bytes under `key` could be added now: held already, or
    /// fitting beside the pinned entries. `what` names it in the refusal.
    pub fn check_room(&self, key: &str, what: &str, size: u64) -> Result<(), CacheError> {
        self.check_fits(what, size)?;
        let index = self.lock_index();
        if index.entries.contains_key(key) {
            return Ok(());
        }
        let pinned = index.pinned_bytes(key);
        if pinned + size > self.inner.capacity {
            return Err(CacheError::Full {
                what: what.to_owned(),
                size,
                pinned,
                capacity: self.inner.capacity,
            });
        }
        Ok(())
    }

    fn check_fits(&self, what: &str, size: u64) -> Result<(), CacheError> {
        if size > self.inner.capacity {
            return Err(CacheError::TooLarge {
                what: what.to_owned(),
                size,
                capacity: self.inner.capacity,
            });
        }
        Ok(())
    }

    /// Streams `origin` into `.<key>.part`, hashing it; renamed to `<key>` when the hash
    /// matches. Returns the size.
    async fn download(
        &self,
        key: &str,
        what: &str,
        origin: &Origin,
        expected: &Expected,
    ) -> Result<u64, CacheError> {
        let failed = |problem: String| CacheError::Download {
            what: what.to_owned(),
            url: origin.url.clone(),
            problem,
        };
        let mut request = self.inner.http.get(&origin.url);
        for (name, value) in &origin.headers {
            request = request.header(name, value);
        }
        let mut response = request
            .send()
            .await
            .map_err(|error| failed(crate::agent_client::error_chain(&error).join(": ")))?;
        if !response.status().is_success() {
            return Err(failed(format!("it answered {}", response.status())));
        }
        if let Some(length) = response.content_length() {
            self.check_fits(what, length)?;
        }
        let part = self.inner.dir.join(format!(".{key}.part"));
        let io = |source| CacheError::Io {
            path: self.inner.dir.clone(),
            source,
        };
        let mut file = tokio::fs::File::create(&part).await.map_err(io)?;
        let mut hasher = Hasher::new(expected.algo);
        let mut written = 0u64;
        let outcome = async {
            while let Some(chunk) = response
                .chunk()
                .await
                .map_err(|error| failed(crate::agent_client::error_chain(&error).join(": ")))?
            {
                written += chunk.len() as u64;
                self.check_fits(what, written)?;
                hasher.update(&chunk);
                file.write_all(&chunk).await.map_err(io)?;
            }
            file.flush().await.map_err(io)?;
            file.sync_all().await.map_err(io)?;
            let actual = hasher.finish();
            if actual != expected.value.to_ascii_lowercase() {
                return Err(CacheError::HashMismatch {
                    what: what.to_owned(),
                    url: origin.url.clone(),
                    algo: expected.algo.as_str(),
                    actual,
                    expected: expected.value.clone(),
                });
            }
            Ok(())
        }
        .await;
        if let Err(error) = outcome {
            let _ = tokio::fs::remove_file(&part).await;
            return Err(error);
        }
        tokio::fs::rename(&part, self.inner.dir.join(key))
            .await
            .map_err(io)?;
        tracing::info!(key, what, bytes = written, "image cached");
        Ok(written)
    }

    /// Marks `key` used now; false when it is not held.
    fn touch(&self, key: &str) -> bool {
        let mut index = self.lock_index();
        index.clock += 1;
        let now = index.clock;
        match index.entries.get_mut(key) {
            Some(entry) => {
                entry.last_used = now;
                true
            }
            None => false,
        }
    }

    /// Drops `key` from the index (its file went missing).
    fn forget(&self, key: &str) {
        let mut index = self.lock_index();
        if let Some(entry) = index.entries.remove(key) {
            index.used -= entry.size;
        }
    }

    /// Evicts least recently used entries (never `keep`, never a pinned one) until `size` more
    /// bytes fit; refused when only pinned entries are left to evict.
    fn make_room(&self, what: &str, size: u64, keep: &str) -> Result<(), CacheError> {
        let mut index = self.lock_index();
        while index.used + size > self.inner.capacity {
            let Some(oldest) = index
                .entries
                .iter()
                .filter(|(key, _)| key.as_str() != keep && !index.pinned(key))
                .min_by_key(|(_, entry)| entry.last_used)
                .map(|(key, _)| key.clone())
            else {
                self.inner.metrics.image_cache_size(index.used);
                return Err(CacheError::Full {
                    what: what.to_owned(),
                    size,
                    pinned: index.pinned_bytes(keep),
                    capacity: self.inner.capacity,
                });
            };
            if let Some(entry) = index.entries.remove(&oldest) {
                index.used -= entry.size;
            }
            if let Err(error) = std::fs::remove_file(self.inner.dir.join(&oldest)) {
                tracing::warn!(key = %oldest, %error, "cannot remove an evicted image");
            }
            tracing::info!(key = %oldest, "image evicted from the cache");
            self.inner.metrics.image_cache_eviction();
        }
        self.inner.metrics.image_cache_size(index.used);
        Ok(())
    }

    fn lock_index(&self) -> std::sync::MutexGuard<'_, Index> {
        // Every change to the index is complete before its lock is released.
        self.inner
            .index
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One of the three hashes, fed chunk by chunk.
enum Hasher {
    Md5(Md5),
    Sha256(Sha256),
    Sha512(Sha512),
}

impl Hasher {
    fn new(algo: HashAlgo) -> Self {
        match algo {
            HashAlgo::Md5 => Self::Md5(Md5::new()),
            HashAlgo::Sha256 => Self::Sha256(Sha256::new()),
            HashAlgo::Sha512 => Self::Sha512(Sha512::new()),
        }
    }

    fn update(&mut self, bytes: &[u8]) {
        match self {
            Self::Md5(hasher) => hasher.update(bytes),
            Self::Sha256(hasher) => hasher.update(bytes),
            Self::Sha512(hasher) => hasher.update(bytes),
        }
    }

    fn finish(self) -> String {
        match self {
            Self::Md5(hasher) => format!("{:x}", hasher.finalize()),
            Self::Sha256(hasher) => format!("{:x}", hasher.finalize()),
            Self::Sha512(hasher) => format!("{:x}", hasher.finalize()),
        }
    }
}

#[cfg(test)]
#[path = "image_cache_tests.rs"]
mod tests;
