//! The image cache against a small HTTP origin that counts its downloads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use sha2::{Digest, Sha256};

use super::*;

/// The origin: images by name, and how many times each was downloaded.
#[derive(Clone, Default)]
struct Served {
    images: Arc<HashMap<String, Vec<u8>>>,
    downloads: Arc<Mutex<HashMap<String, usize>>>,
    total: Arc<AtomicUsize>,
}

impl Served {
    fn downloads(&self, name: &str) -> usize {
        self.downloads
            .lock()
            .unwrap()
            .get(name)
            .copied()
            .unwrap_or(0)
    }
}

async fn serve(
    State(origin): State<Served>,
    UrlPath(name): UrlPath<String>,
) -> Result<Vec<u8>, StatusCode> {
    *origin
        .downloads
        .lock()
        .unwrap()
        .entry(name.clone())
        .or_default() += 1;
    origin.total.fetch_add(1, Ordering::SeqCst);
    origin
        .images
        .get(&name)
        .cloned()
        .ok_or(StatusCode::NOT_FOUND)
}

/// Starts the origin with `images`; its base URL.
async fn origin(images: &[(&str, Vec<u8>)]) -> (String, Served) {
    let state = Served {
        images: Arc::new(
            images
                .iter()
                .map(|(name, bytes)| ((*name).to_owned(), bytes.clone()))
                .collect(),
        ),
        ..Served::default()
    };
    let app = axum::Router::new()
        .route("/{name}", axum::routing::get(serve))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), state)
}

fn sha256(bytes: &[u8]) -> Expected {
    Expected {
        algo: HashAlgo::Sha256,
        value: format!("{:x}", Sha256::digest(bytes)),
    }
}

fn from(base: &str, name: &str) -> super::Origin {
    super::Origin {
        url: format!("{base}/{name}"),
        headers: Vec::new(),
    }
}

fn cache(dir: &Path, capacity: u64) -> (ImageCache, ferric_metrics::Metrics) {
    let metrics = ferric_metrics::Metrics::new();
    let cache = ImageCache::open(dir, capacity, reqwest::Client::new(), metrics.clone()).unwrap();
    (cache, metrics)
}

/// The value of the counter `name` in the metrics' text.
fn counter(metrics: &ferric_metrics::Metrics, name: &str) -> u64 {
    let text = metrics.encode(&ferric_metrics::Snapshot::default());
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map(|value| value as u64)
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

#[tokio::test]
async fn concurrent_deploys_of_one_image_share_one_download() {
    let image = vec![7u8; 64 * 1024];
    let (base, served) = origin(&[("disk.img", image.clone())]).await;
    let dir = tempfile::tempdir().unwrap();
    let (cache, metrics) = cache(dir.path(), 1 << 20);
    let expected = sha256(&image);
    let fetches = (0..8).map(|_| {
        let cache = cache.clone();
        let origin = from(&base, "disk.img");
        let expected = expected.clone();
        tokio::spawn(async move {
            cache
                .fetch("glance-one", "image one", &origin, &expected, None)
                .await
        })
    });
    let mut paths = Vec::new();
    for fetch in fetches.collect::<Vec<_>>() {
        paths.push(fetch.await.unwrap().unwrap());
    }
    assert_eq!(
        served.downloads("disk.img"),
        1,
        "one download for eight deploys"
    );
    assert!(
        paths
            .iter()
            .all(|path| *path == dir.path().join("glance-one"))
    );
    assert_eq!(std::fs::read(&paths[0]).unwrap(), image);
    assert_eq!(counter(&metrics, "ferric_image_cache_misses_total"), 1);
    assert_eq!(counter(&metrics, "ferric_image_cache_hits_total"), 7);
    assert_eq!(cache.used(), image.len() as u64);
}

#[tokio::test]
async fn the_least_recently_used_image_is_evicted_to_make_room() {
    let images: Vec<(&str, Vec<u8>)> = vec![
        ("a", vec![1u8; 100]),
        ("b", vec![2u8; 100]),
        ("c", vec![3u8; 100]),
    ];
    let (base, served) = origin(&images).await;
    let dir = tempfile::tempdir().unwrap();
    let (cache, metrics) = cache(dir.path(), 250);
    let get = |name: &'static str, bytes: &Vec<u8>| {
        let cache = cache.clone();
        let origin = from(&base, name);
        let expected = sha256(bytes);
        async move { cache.fetch(name, name, &origin, &expected, Some(100)).await }
    };
    get("a", &images[0].1).await.unwrap();
    get("b", &images[1].1).await.unwrap();
    // `a` used again: `b` is now the least recently used.
    get("a", &images[0].1).await.unwrap();
    get("c", &images[2].1).await.unwrap();
    assert!(cache.contains("a") && cache.contains("c"));
    assert!(!cache.contains("b"));
    assert!(!dir.path().join("b").exists(), "the evicted file is gone");
    assert_eq!(cache.used(), 200);
    assert_eq!(counter(&metrics, "ferric_image_cache_evictions_total"), 1);
    // Asked for again, `b` is downloaded again (and `a` makes room for it).
    get("b", &images[1].1).await.unwrap();
    assert_eq!(served.downloads("b"), 2);
    assert!(!cache.contains("a"));

    // Read back by a new cache (a restarted conductor): the same entries, no download.
    let total = served.total.load(Ordering::SeqCst);
    let (again, _) = self::cache(dir.path(), 250);
    assert!(again.contains("b") && again.contains("c") && !again.contains("a"));
    let origin = from(&base, "c");
    again
        .fetch("c", "c", &origin, &sha256(&images[2].1), Some(100))
        .await
        .unwrap();
    assert_eq!(served.total.load(Ordering::SeqCst), total);
}

#[tokio::test]
async fn an_image_with_the_wrong_hash_is_not_kept() {
    let image = b"not the image you expect".to_vec();
    let (base, served) = origin(&[("disk.img", image.clone())]).await;
    let dir = tempfile::tempdir().unwrap();
    let (cache, _) = cache(dir.path(), 1 << 20);
    let wrong = sha256(b"something else");
    let error = cache
        .fetch("k", "image k", &from(&base, "disk.img"), &wrong, None)
        .await
        .unwrap_err();
    assert!(matches!(error, CacheError::HashMismatch { .. }), "{error}");
    assert!(error.to_string().contains("image k"), "{error}");
    assert!(!cache.contains("k"));
    assert_eq!(
        entries(dir.path()),
        0,
        "neither the image nor its partial file stays"
    );
    // The right hash: downloaded again and kept.
    cache
        .fetch(
            "k",
            "image k",
            &from(&base, "disk.img"),
            &sha256(&image),
            None,
        )
        .await
        .unwrap();
    assert_eq!(served.downloads("disk.img"), 2);
    assert!(cache.contains("k"));
}

#[tokio::test]
async fn an_image_larger_than_the_cache_is_refused() {
    let image = vec![9u8; 300];
    let (base, served) = origin(&[("big", image.clone())]).await;
    let dir = tempfile::tempdir().unwrap();
    let (cache, _) = cache(dir.path(), 200);
    let known = cache
        .fetch(
            "big",
            "big image",
            &from(&base, "big"),
            &sha256(&image),
            Some(300),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(known, CacheError::TooLarge { size: 300, .. }),
        "{known}"
    );
    assert_eq!(served.downloads("big"), 0, "refused before any download");
    // Size not known beforehand: the download is stopped.
    let found = cache
        .fetch(
            "big",
            "big image",
            &from(&base, "big"),
            &sha256(&image),
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(found, CacheError::TooLarge { .. }), "{found}");
    assert_eq!(entries(dir.path()), 0);
}

/// The cache directory's entries and partial files (its deploy-token directory aside).
fn entries(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().file_name() != TOKEN_DIR)
        .count()
}

#[tokio::test]
async fn a_missing_image_is_a_download_error_naming_it() {
    let (base, _) = origin(&[]).await;
    let dir = tempfile::tempdir().unwrap();
    let (cache, _) = cache(dir.path(), 200);
    let error = cache
        .fetch(
            "gone",
            "image gone",
            &from(&base, "gone"),
            &sha256(b""),
            None,
        )
        .await
        .unwrap_err();
    assert!(error.to_string().contains("404"), "{error}");
    assert!(error.to_string().contains("image gone"), "{error}");
}

#[tokio::test]
async fn a_deploy_token_names_its_entry_until_released_and_pins_it() {
    let images: Vec<(&str, Vec<u8>)> = vec![
        ("a", (0..100u8).collect()),
        ("b", vec![2u8; 100]),
        ("c", vec![3u8; 100]),
    ];
    let (base, served) = origin(&images).await;
    let dir = tempfile::tempdir().unwrap();
    let (cache, metrics) = cache(dir.path(), 250);
    let pinned = |holder: &'static str, name: &'static str, bytes: &Vec<u8>| {
        let cache = cache.clone();
        let origin = from(&base, name);
        let expected = sha256(bytes);
        async move {
            cache
                .fetch_pinned(holder, name, name, &origin, &expected, Some(100))
                .await
        }
    };
    let token = pinned("node-1", "a", &images[0].1).await.unwrap();
    assert_eq!(token.len(), 64, "256 bits in hex: {token}");
    let link = dir.path().join(TOKEN_DIR).join(&token);
    assert_eq!(std::fs::read(&link).unwrap(), images[0].1);
    // The same holder asking again keeps its token; another holder gets its own.
    assert_eq!(pinned("node-1", "a", &images[0].1).await.unwrap(), token);
    let other = pinned("node-2", "a", &images[0].1).await.unwrap();
    assert_ne!(other, token);
    assert_eq!(served.downloads("a"), 1);

    // `b` fits beside `a`; `c` would need `a` evicted, which two deploys read: refused, by the
    // setting's name, at validate (check_room) and when fetched.
    pinned("node-3", "b", &images[1].1).await.unwrap();
    let refused = cache
        .check_room("c", "image c", 100)
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("image c") && refused.contains("image_cache_size"),
        "{refused}"
    );
    let refused = pinned("node-4", "c", &images[2].1).await.unwrap_err();
    assert!(
        matches!(refused, CacheError::Full { pinned: 200, .. }),
        "{refused}"
    );
    assert_eq!(
        served.downloads("c"),
        0,
        "its size told: refused before downloading"
    );
    assert!(!dir.path().join("c").exists());
    assert!(cache.contains("a") && cache.contains("b"));
    assert_eq!(counter(&metrics, "ferric_image_cache_evictions_total"), 0);

    // node-3's deploy ends: `b` is free to go, so `c` fits (evicting `b`, not pinned `a`).
    assert_eq!(cache.release("node-3"), 1);
    cache.check_room("c", "image c", 100).unwrap();
    pinned("node-4", "c", &images[2].1).await.unwrap();
    assert!(cache.contains("a") && cache.contains("c") && !cache.contains("b"));
    // Pinned `a` read again whole through its token after the eviction next to it.
    assert_eq!(std::fs::read(&link).unwrap(), images[0].1);

    // Released tokens' links are gone; a restarted cache starts with none.
    assert_eq!(cache.release("node-1"), 1);
    assert!(!link.exists());
    assert_eq!(cache.tokens(), 2);
    let (again, _) = self::cache(dir.path(), 250);
    assert_eq!(again.tokens(), 0);
    assert_eq!(again.remove_stale_tokens().unwrap(), 2);
    assert_eq!(
        std::fs::read_dir(dir.path().join(TOKEN_DIR))
            .unwrap()
            .count(),
        0,
        "the previous life's links are removed"
    );
    assert!(again.contains("a") && again.contains("c"));
}
