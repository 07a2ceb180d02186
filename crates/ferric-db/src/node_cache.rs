//! A cache of node records by row id and revision, so that a listing decodes only the rows
//! that changed since the last one.
//!
//! Why: decoding a node row (≈70 columns, a dozen JSON documents) dominated `GET
//! /v1/nodes/detail`; sqlx copies every SQLite column value of every row. A listing now reads
//! `(id, version)` of its page first and fetches whole rows only for what the cache lacks.
//!
//! Why it is always right: every write of a node goes through `node_update`, which bumps
//! `version`, and row ids are never reused (AUTOINCREMENT / identity), so an entry for
//! `(id, version)` can never describe anything but that revision. Entries of older revisions
//! simply stop being asked for; the cache is cleared when it grows past its capacity.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use ferric_model::resources::Node;

/// About 3 KiB each: 60 MiB at most. Past it the cache starts over.
// TODO-perf: an LRU for sites with more nodes than this, whose full listings now thrash.
const CAPACITY: usize = 20_000;

#[derive(Debug, Default)]
pub(crate) struct NodeCache {
    entries: Mutex<HashMap<i64, Arc<Node>>>,
}

impl NodeCache {
    /// The cached node with row id `id` if it is at revision `version`.
    pub(crate) fn get(&self, id: i64, version: i64) -> Option<Arc<Node>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries
            .get(&id)
            .filter(|node| node.version == version)
            .cloned()
    }

    pub(crate) fn put(&self, node: Arc<Node>) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= CAPACITY && !entries.contains_key(&node.id) {
            entries.clear();
        }
        entries.insert(node.id, node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use uuid::Uuid;

    fn node(id: i64, version: i64) -> Arc<Node> {
        let mut node = Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Enroll);
        node.id = id;
        node.version = version;
        Arc::new(node)
    }

    #[test]
    fn an_entry_serves_only_its_revision() {
        let cache = NodeCache::default();
        cache.put(node(7, 2));
        assert!(cache.get(7, 2).is_some());
        assert!(cache.get(7, 3).is_none(), "a newer revision must be read");
        assert!(cache.get(8, 2).is_none());
    }
}
