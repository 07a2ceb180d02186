//! Serialized node documents for listings that show every field (`/v1/nodes/detail`), kept by
//! node revision so an unchanged node is serialized once, not on every page.
//!
//! Why: building and serializing a node's ~70 fields cost more than the rest of a 1,000-node
//! page together. Why it is always right: the key holds everything the document depends on —
//! the node's row id and revision (bumped by every write), the microversion, the base URL of
//! the links, the reservation (a lease changes without a new revision) and the owning
//! conductor (the hash ring changes without a new revision).

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use axum::body::Bytes;

/// Every node of a 10,000-node site at two microversions; a detail document is ~2.7 KiB, so
/// 55 MiB at most. Past it the cache starts over.
const CAPACITY: usize = 20_000;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct RenderKey {
    pub(crate) id: i64,
    pub(crate) version: i64,
    pub(crate) minor: u16,
    pub(crate) base: String,
    pub(crate) reservation: Option<String>,
    pub(crate) conductor: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct RenderedNodes {
    entries: Mutex<HashMap<RenderKey, Bytes>>,
}

impl RenderedNodes {
    pub(crate) fn get(&self, key: &RenderKey) -> Option<Bytes> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.get(key).cloned()
    }

    pub(crate) fn put(&self, key: RenderKey, document: Bytes) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= CAPACITY {
            entries.clear();
        }
        entries.insert(key, document);
    }
}
