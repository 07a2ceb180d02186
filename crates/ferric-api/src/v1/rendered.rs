//! Serialized node documents for listings that show every field (`/v1/nodes/detail`), kept
//! compressed by node revision so an unchanged node is serialized once, not on every page, and
//! its record need not even be read.
//!
//! Why: building and serializing a node's ~70 fields, and before that decoding its row, cost
//! more than the rest of a 1,000-node page together. Why it is always right: a document is
//! served only when everything it depends on matches — the node's row id and revision
//! (bumped by every write), the microversion, the base URL of the links, the reservation (a
//! lease changes without a new revision) and the owning conductor (the hash ring changes
//! without a new revision).
//!
//! Why it is small: the documents of one microversion and base URL (a *variant*) have the
//! same keys, links and most values, so each is LZ4-compressed against the variant's first
//! document as a dictionary: a ~2.7 KiB document and its slot take ~0.5 KiB, less than half
//! of what it took compressed alone (10,000 nodes: ~5 MB instead of ~10 MB).
//!
//! Why it is bounded, and why it keeps hitting on sites larger than the budget: the documents
//! are held within `api_render_cache_size` bytes, one slot per node and variant, so a node's
//! older revisions never pile up. Only nodes whose id hashes below an admission threshold are
//! kept; when a new document does not fit, the threshold is lowered by a quarter and the
//! slots above it are dropped. Under full walks of a site larger than the budget the same
//! share of nodes therefore stays held walk after walk (dropping the oldest, or a random
//! quarter, would keep replacing what the next walk needs), and a document that would not be
//! kept is never compressed. The threshold rises again when the cache is less than half full.
//!
//! Why it empties when unused: a cache nobody has read for `api_render_cache_idle` seconds is
//! dropped whole ([`RenderedNodes::drop_if_idle`], called by the server's idle sweep), so an
//! idle server does not keep ~0.5 KiB per node resident for a walk that may never come; the next
//! walk renders its pages afresh and fills it again (issue 26; docs/benchmarks.md).
//!
//! The default budget, 64 MiB, holds every document of a ~130,000-node site at one microversion; a
//! smaller site costs only what its documents take.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The default budget (`api_render_cache_size`): every detail document of a ~130,000-node
/// site at one microversion, so a 100,000-node site's detail walks never render a node twice
/// (issue 26: 24 MiB held half of them and a page took ~84 ms there). A smaller site uses only
/// what its documents take (~5 MB at 10,000 nodes), and an idle server drops them.
pub const DEFAULT_RENDER_CACHE_SIZE: usize = 64 * 1024 * 1024;

/// What one slot costs besides its compressed document: the key, the entry, its strings and
/// the map's share.
const SLOT_OVERHEAD: usize = 128;

/// At most this many variants (microversion and base URL pairs) are held at once; a new one
/// past that empties the cache, so odd `Host` headers cannot grow it.
const MAX_VARIANTS: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RenderKey {
    pub(crate) id: i64,
    pub(crate) version: i64,
    pub(crate) minor: u16,
    pub(crate) base: String,
    pub(crate) reservation: Option<String>,
    pub(crate) conductor: Option<String>,
}

#[derive(Debug)]
struct Variant {
    minor: u16,
    base: String,
    /// The first document kept for this variant, which the others are compressed against.
    dictionary: Arc<[u8]>,
}

#[derive(Debug)]
struct Entry {
    version: i64,
    reservation: Option<String>,
    conductor: Option<String>,
    /// The document's length before compression.
    len: usize,
    compressed: Box<[u8]>,
}

impl Entry {
    /// Whether this document is the one of `key`'s node as it is now.
    fn matches(&self, key: &RenderKey) -> bool {
        self.version == key.version
            && self.reservation == key.reservation
            && self.conductor == key.conductor
    }

    fn cost(&self) -> usize {
        SLOT_OVERHEAD + self.compressed.len()
    }
}

#[derive(Debug)]
struct Slots {
    variants: Vec<Variant>,
    /// Bumped whenever `variants` is emptied, so a document compressed against a dictionary
    /// that is gone meanwhile is not kept.
    generation: u64,
    /// By node row id and index into `variants`.
    entries: HashMap<(i64, u8), Entry>,
    bytes: usize,
    /// Nodes whose id hashes above this are not kept.
    admit: u64,
}

impl Default for Slots {
    fn default() -> Self {
        Self {
            variants: Vec::new(),
            generation: 0,
            entries: HashMap::new(),
            bytes: 0,
            admit: u64::MAX,
        }
    }
}

#[derive(Debug)]
pub(crate) struct RenderedNodes {
    budget: usize,
    slots: Mutex<Slots>,
    /// When the cache was created: `last_used` counts from it.
    created: Instant,
    /// Milliseconds after `created` of the last look-up or insertion.
    last_used: AtomicU64,
}

impl Default for RenderedNodes {
    fn default() -> Self {
        Self::with_budget(DEFAULT_RENDER_CACHE_SIZE)
    }
}

/// A fixed, well-mixed hash of a node's row id (splitmix64's finalizer): which nodes are
/// admitted does not depend on the order they come in.
fn mix(id: i64) -> u64 {
    let mut x = u64::from_ne_bytes(id.to_ne_bytes());
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

impl RenderedNodes {
    /// A cache holding at most `budget` bytes (0: none at all).
    pub(crate) fn with_budget(budget: usize) -> Self {
        Self {
            budget,
            slots: Mutex::default(),
            created: Instant::now(),
            last_used: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn touch(&self) {
        let now = u64::try_from(self.created.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_used.store(now, Ordering::Relaxed);
    }

    /// Drops every document if none was looked up or kept for `idle` (and the cache holds
    /// any), returning the map's memory too; the number of bytes dropped (by the budget's
    /// count).
    pub(crate) fn drop_if_idle(&self, idle: Duration) -> usize {
        let last = Duration::from_millis(self.last_used.load(Ordering::Relaxed));
        if self.created.elapsed().saturating_sub(last) < idle {
            return 0;
        }
        let mut slots = self.lock();
        if slots.entries.is_empty() {
            return 0;
        }
        let dropped = slots.bytes;
        // Everything goes, the dictionaries too; a document compressed meanwhile against one
        // of them is not kept (the generation moves on).
        let generation = slots.generation.wrapping_add(1);
        *slots = Slots {
            generation,
            ..Slots::default()
        };
        dropped
    }

    /// Whether the document of `key` is held (it may be dropped before it is read).
    pub(crate) fn holds(&self, key: &RenderKey) -> bool {
        self.touch();
        let slots = self.lock();
        slots
            .entry(key)
            .is_some_and(|(entry, _)| entry.matches(key))
    }

    /// Appends the document of `key` to `out` if it is held; false (and `out` untouched) if
    /// not.
    pub(crate) fn append_to(&self, key: &RenderKey, out: &mut Vec<u8>) -> bool {
        self.touch();
        let slots = self.lock();
        let Some((entry, dictionary)) = slots.entry(key) else {
            return false;
        };
        if !entry.matches(key) {
            return false;
        }
        let start = out.len();
        out.resize(start + entry.len, 0);
        match lz4_flex::block::decompress_into_with_dict(
            &entry.compressed,
            &mut out[start..],
            dictionary,
        ) {
            Ok(written) if written == entry.len => true,
            _ => {
                // Cannot happen with what `put` stored; render afresh rather than serve it.
                out.truncate(start);
                false
            }
        }
    }

    /// Keeps `document` as the one of `key`'s node at its microversion and base URL, if the
    /// node is among those admitted (else nothing is done, not even compression).
    pub(crate) fn put(&self, key: RenderKey, document: &[u8]) {
        self.touch();
        if self.budget == 0 {
            return;
        }
        let (variant, dictionary, generation) = {
            let mut slots = self.lock();
            if mix(key.id) > slots.admit {
                if slots.bytes < self.budget / 2 {
                    // Room again (nodes deleted, or the site shrank): admit a third more.
                    slots.admit = slots.admit.saturating_add(slots.admit / 3);
                }
                return;
            }
            match slots.variant(key.minor, &key.base, document) {
                Some((variant, dictionary)) => (variant, dictionary, slots.generation),
                None => return,
            }
        };
        let entry = Entry {
            version: key.version,
            reservation: key.reservation,
            conductor: key.conductor,
            len: document.len(),
            compressed: lz4_flex::block::compress_with_dict(document, &dictionary)
                .into_boxed_slice(),
        };
        let cost = entry.cost();
        if cost + dictionary.len() > self.budget {
            return;
        }
        let mut slots = self.lock();
        if slots.generation != generation {
            return;
        }
        if let Some(old) = slots.entries.remove(&(key.id, variant)) {
            slots.bytes -= old.cost();
        }
        while slots.bytes + cost > self.budget {
            slots.lower_admission();
        }
        if slots.generation != generation || mix(key.id) > slots.admit {
            return;
        }
        slots.bytes += cost;
        slots.entries.insert((key.id, variant), entry);
    }

    /// How many bytes the held documents take, by the same count as the budget.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.lock().bytes
    }
}

impl Slots {
    /// The entry of `key`'s node and variant, and the variant's dictionary.
    fn entry(&self, key: &RenderKey) -> Option<(&Entry, &[u8])> {
        let index = self
            .variants
            .iter()
            .position(|variant| variant.minor == key.minor && variant.base == key.base)?;
        let entry = self.entries.get(&(key.id, u8::try_from(index).ok()?))?;
        Some((entry, &self.variants[index].dictionary))
    }

    /// The index and dictionary of the variant `minor` and `base`, made with `document` as
    /// its dictionary if it is new. `None` when a new one does not fit.
    fn variant(&mut self, minor: u16, base: &str, document: &[u8]) -> Option<(u8, Arc<[u8]>)> {
        if let Some(index) = self
            .variants
            .iter()
            .position(|variant| variant.minor == minor && variant.base == base)
        {
            let index = u8::try_from(index).ok()?;
            return Some((index, self.variants[usize::from(index)].dictionary.clone()));
        }
        if self.variants.len() >= MAX_VARIANTS {
            self.clear();
        }
        let dictionary: Arc<[u8]> = document.into();
        self.bytes += dictionary.len() + base.len();
        self.variants.push(Variant {
            minor,
            base: base.to_owned(),
            dictionary: dictionary.clone(),
        });
        Some((u8::try_from(self.variants.len() - 1).ok()?, dictionary))
    }

    /// Drops everything, variants and their dictionaries too.
    fn clear(&mut self) {
        self.entries.clear();
        self.variants.clear();
        self.bytes = 0;
        self.generation += 1;
    }

    /// Lowers the admission threshold by a quarter and drops the slots of nodes above it;
    /// once nothing is left to drop, empties the cache.
    fn lower_admission(&mut self) {
        if self.entries.is_empty() || self.admit == 0 {
            self.clear();
            self.admit = u64::MAX;
            return;
        }
        self.admit -= self.admit / 4;
        let admit = self.admit;
        let mut freed = 0;
        self.entries.retain(|(id, _), entry| {
            let keep = mix(*id) <= admit;
            if !keep {
                freed += entry.cost();
            }
            keep
        });
        self.bytes -= freed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: i64, version: i64) -> RenderKey {
        RenderKey {
            id,
            version,
            minor: 96,
            base: "http://ferric".to_owned(),
            reservation: None,
            conductor: Some("c1".to_owned()),
        }
    }

    fn document(id: i64) -> Vec<u8> {
        format!(r#"{{"uuid":"{id:036}","driver":"fake-hardware","extra":{{}},"name":null}}"#)
            .into_bytes()
    }

    #[test]
    fn a_document_is_served_only_for_what_it_was_rendered_from() {
        let cache = RenderedNodes::default();
        cache.put(key(7, 2), &document(7));
        let mut out = b"[".to_vec();
        assert!(cache.holds(&key(7, 2)));
        assert!(cache.append_to(&key(7, 2), &mut out));
        assert_eq!(out[1..], document(7));

        let mut out = Vec::new();
        assert!(!cache.append_to(&key(7, 3), &mut out), "a newer revision");
        assert!(!cache.holds(&key(7, 3)));
        assert!(!cache.append_to(&key(8, 2), &mut out), "another node");
        let mut reserved = key(7, 2);
        reserved.reservation = Some("c1".to_owned());
        assert!(!cache.append_to(&reserved, &mut out), "a lease taken since");
        let mut moved = key(7, 2);
        moved.conductor = Some("c2".to_owned());
        assert!(!cache.append_to(&moved, &mut out), "another owner");
        let mut older = key(7, 2);
        older.minor = 1;
        assert!(!cache.append_to(&older, &mut out), "another microversion");
        assert!(out.is_empty());
    }

    #[test]
    fn a_new_revision_replaces_the_old_one() {
        let cache = RenderedNodes::default();
        cache.put(key(7, 2), &document(7));
        let one = cache.bytes();
        cache.put(key(7, 3), &document(7));
        assert_eq!(cache.bytes(), one, "one slot per node");
        assert!(!cache.append_to(&key(7, 2), &mut Vec::new()));
        assert!(cache.append_to(&key(7, 3), &mut Vec::new()));
    }

    #[test]
    fn the_budget_is_never_exceeded_and_a_walk_keeps_hitting() {
        let budget = 100 * (SLOT_OVERHEAD + 80);
        let cache = RenderedNodes::with_budget(budget);
        for id in 0..1_000 {
            cache.put(key(id, 1), &document(id));
            assert!(cache.bytes() <= budget);
        }
        let hits = (0..1_000)
            .filter(|&id| cache.append_to(&key(id, 1), &mut Vec::new()))
            .count();
        assert!(hits > 20, "{hits} documents of 1,000 still held");

        let none = RenderedNodes::with_budget(0);
        none.put(key(1, 1), &document(1));
        assert!(!none.append_to(&key(1, 1), &mut Vec::new()));
    }

    #[test]
    fn walks_over_more_nodes_than_fit_keep_hitting_the_same_ones() {
        let cache = RenderedNodes::with_budget(300 * (SLOT_OVERHEAD + 40));
        // One walk: serve what is held, render and keep what is not.
        let walk = || -> Vec<i64> {
            (0..3_000)
                .filter(|&id| {
                    let hit = cache.append_to(&key(id, 1), &mut Vec::new());
                    if !hit {
                        cache.put(key(id, 1), &document(id));
                    }
                    hit
                })
                .collect()
        };
        walk();
        let second = walk();
        assert!(second.len() > 100, "{} of 3,000 held", second.len());
        assert_eq!(walk(), second, "the same nodes are held walk after walk");
    }

    #[test]
    fn documents_are_compressed_against_their_variant() {
        let cache = RenderedNodes::default();
        cache.put(key(1, 1), &document(1));
        let first = cache.bytes();
        cache.put(key(2, 1), &document(2));
        let alone = lz4_flex::block::compress(&document(2)).len();
        assert!(
            cache.bytes() - first < SLOT_OVERHEAD + alone,
            "a document like the dictionary takes less than compressed alone"
        );
        let mut out = Vec::new();
        assert!(cache.append_to(&key(2, 1), &mut out));
        assert_eq!(out, document(2));
    }

    #[test]
    fn an_unused_cache_is_dropped_whole_and_fills_again() {
        let cache = RenderedNodes::default();
        cache.put(key(7, 2), &document(7));
        let held = cache.bytes();
        assert_eq!(
            cache.drop_if_idle(Duration::from_secs(3600)),
            0,
            "used just now"
        );
        assert!(cache.holds(&key(7, 2)));
        assert_eq!(cache.drop_if_idle(Duration::ZERO), held);
        assert_eq!(cache.bytes(), 0);
        assert!(!cache.holds(&key(7, 2)));
        assert_eq!(cache.drop_if_idle(Duration::ZERO), 0, "already empty");
        cache.put(key(7, 2), &document(7));
        assert!(cache.append_to(&key(7, 2), &mut Vec::new()));
    }
}
