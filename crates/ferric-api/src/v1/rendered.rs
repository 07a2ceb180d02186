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
//! Why it is bounded: the documents are held LZ4-compressed (a ~2.7 KiB document takes about a
//! third of that) within `api_render_cache_size` bytes. One slot per node, microversion and
//! base URL, so a node's older revisions never pile up. When a new document does not fit, a
//! pseudo-random quarter of the slots is dropped: under full walks of a site larger than the
//! budget that keeps a steady share of hits, where dropping the oldest would miss every time.
//!
//! Why it empties when unused: a cache nobody has read for `api_render_cache_idle` seconds is
//! dropped whole ([`RenderedNodes::drop_if_idle`], called by the server's idle sweep), so an
//! idle server does not keep ~1 KiB per node resident for a walk that may never come; the next
//! walk renders its pages afresh and fills it again (issue 26; docs/benchmarks.md).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The default budget (`api_render_cache_size`): every detail document of a ~20,000-node
/// site at one microversion.
pub const DEFAULT_RENDER_CACHE_SIZE: usize = 24 * 1024 * 1024;

/// What one slot costs besides its compressed document: the key, the strings and the map.
const SLOT_OVERHEAD: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RenderKey {
    pub(crate) id: i64,
    pub(crate) version: i64,
    pub(crate) minor: u16,
    pub(crate) base: String,
    pub(crate) reservation: Option<String>,
    pub(crate) conductor: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Slot {
    id: i64,
    minor: u16,
    base: String,
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

#[derive(Debug, Default)]
struct Slots {
    entries: HashMap<Slot, Entry>,
    bytes: usize,
    sweeps: u64,
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
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if slots.entries.is_empty() {
            return 0;
        }
        let dropped = slots.bytes;
        slots.entries = HashMap::new();
        slots.bytes = 0;
        dropped
    }

    /// Whether the document of `key` is held (it may be dropped before it is read).
    pub(crate) fn holds(&self, key: &RenderKey) -> bool {
        self.touch();
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        slots
            .entries
            .get(&Slot {
                id: key.id,
                minor: key.minor,
                base: key.base.clone(),
            })
            .is_some_and(|entry| entry.matches(key))
    }

    /// Appends the document of `key` to `out` if it is held; false (and `out` untouched) if
    /// not.
    pub(crate) fn append_to(&self, key: &RenderKey, out: &mut Vec<u8>) -> bool {
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = Slot {
            id: key.id,
            minor: key.minor,
            base: key.base.clone(),
        };
        let Some(entry) = slots.entries.get(&slot) else {
            return false;
        };
        if !entry.matches(key) {
            return false;
        }
        let start = out.len();
        out.resize(start + entry.len, 0);
        match lz4_flex::block::decompress_into(&entry.compressed, &mut out[start..]) {
            Ok(written) if written == entry.len => true,
            _ => {
                // Cannot happen with what `put` stored; render afresh rather than serve it.
                out.truncate(start);
                false
            }
        }
    }

    /// Keeps `document` as the one of `key`'s node at its microversion and base URL.
    pub(crate) fn put(&self, key: RenderKey, document: &[u8]) {
        self.touch();
        let entry = Entry {
            version: key.version,
            reservation: key.reservation,
            conductor: key.conductor,
            len: document.len(),
            compressed: lz4_flex::block::compress(document).into_boxed_slice(),
        };
        let cost = entry.cost();
        if cost > self.budget {
            return;
        }
        let slot = Slot {
            id: key.id,
            minor: key.minor,
            base: key.base,
        };
        let mut slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(old) = slots.entries.remove(&slot) {
            slots.bytes -= old.cost();
        }
        while slots.bytes + cost > self.budget {
            slots.drop_a_quarter();
        }
        slots.bytes += cost;
        slots.entries.insert(slot, entry);
    }

    /// How many bytes the held documents take, by the same count as the budget.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .bytes
    }
}

impl Slots {
    /// Drops about a quarter of the slots, picked by a hash of the node's id that changes on
    /// every sweep (an empty cache is left as it is).
    fn drop_a_quarter(&mut self) {
        self.sweeps += 1;
        let salt = self.sweeps.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let mut freed = 0;
        self.entries.retain(|slot, entry| {
            let mixed = (u64::from_ne_bytes(slot.id.to_ne_bytes()) ^ salt)
                .wrapping_mul(0xBF58_476D_1CE4_E5B9);
            let keep = mixed >> 62 != 0;
            if !keep {
                freed += entry.cost();
            }
            keep
        });
        if freed == 0 && !self.entries.is_empty() {
            // Every survivor hashed to "keep" (a handful of slots): start over instead.
            freed = self.bytes;
            self.entries.clear();
        }
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
