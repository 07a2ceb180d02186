//! Which conductor owns which node: a consistent hash ring per conductor group and hardware
//! type over the conductors that are alive (`reference/ironic.md` §6.1; DESIGN.md "Processes").
//!
//! Theory of operation: every alive conductor puts [`POINTS_PER_CONDUCTOR`] points on a 64-bit
//! ring, at the hashes of `"{hostname}-{i}"`; a node belongs to the conductor of the first point
//! at or after the hash of its UUID. When a conductor joins or leaves, only the nodes between
//! its points and their predecessors move; everybody else keeps their owner. Every process
//! computes the same ring from the same `conductors` rows: the hash is FNV-1a with a fixed
//! finalizer, not the standard library's (whose output may change between releases), so
//! conductors and API processes built from different releases still agree.
//!
//! [`Membership`] is the live view: it re-reads the alive conductors (online, heartbeat within
//! the heartbeat timeout) and rebuilds the rings only when the member list changed. Reads
//! (every API listing asks it for each node's `conductor`) take a cheap `Arc` clone.
//!
//! [`Membership`] is re-read every [`LIVENESS_INTERVAL`] (on PostgreSQL); a change wakes recovery
//! and the callback deadlines at once, which is how a dead conductor's nodes are taken over.
//! Reconcilers act only on nodes this conductor owns (`Inner::owns`, and `Inner::owns_head` for the
//! narrow heads the power sync pages through).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use chrono::TimeDelta;
use ferric_db::{ConductorFilter, Store};
use ferric_model::resources::Node;
use uuid::Uuid;

/// Points each conductor puts on a ring: enough that three conductors split nodes within a
/// few percent of evenly.
pub const POINTS_PER_CONDUCTOR: usize = 256;

/// 64-bit FNV-1a followed by the SplitMix64 finalizer (FNV alone clusters similar keys such
/// as `host-1`, `host-2`).
fn hash(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
}

/// One consistent hash ring over a set of conductor hostnames.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HashRing {
    /// `(point, index into hosts)`, sorted by point.
    points: Vec<(u64, usize)>,
    hosts: Vec<String>,
}

impl HashRing {
    pub fn new<I, S>(hosts: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let hosts: Vec<String> = hosts
            .into_iter()
            .map(Into::into)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut points = Vec::with_capacity(hosts.len() * POINTS_PER_CONDUCTOR);
        for (index, host) in hosts.iter().enumerate() {
            for point in 0..POINTS_PER_CONDUCTOR {
                points.push((hash(format!("{host}-{point}").as_bytes()), index));
            }
        }
        points.sort_unstable();
        Self { points, hosts }
    }

    /// The conductor that owns `node`; `None` on an empty ring.
    pub fn owner(&self, node: Uuid) -> Option<&str> {
        if self.points.is_empty() {
            return None;
        }
        let key = hash(node.as_bytes());
        let at = self.points.partition_point(|(point, _)| *point < key);
        let (_, index) = self.points[at % self.points.len()];
        Some(&self.hosts[index])
    }

    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }
}

/// The rings of one view of the alive conductors: one per (conductor group, hardware type).
#[derive(Debug, Default)]
pub struct Rings {
    /// `(hostname, conductor_group, hardware types)` of every alive conductor, sorted.
    members: Vec<(String, String, Vec<String>)>,
    rings: BTreeMap<(String, String), HashRing>,
    /// Whether this view was read from the database (before that, nothing is known).
    loaded: bool,
}

impl Rings {
    fn new(members: Vec<(String, String, Vec<String>)>) -> Self {
        let mut hosts: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (hostname, group, drivers) in &members {
            for driver in drivers {
                hosts
                    .entry((group.clone(), driver.clone()))
                    .or_default()
                    .push(hostname.clone());
            }
        }
        let rings = hosts
            .into_iter()
            .map(|(key, hosts)| (key, HashRing::new(hosts)))
            .collect();
        Self {
            members,
            rings,
            loaded: true,
        }
    }

    /// The alive conductor that owns `node`: the ring of its conductor group and hardware
    /// type. `None` when no alive conductor of that group serves that hardware type.
    pub fn owner(&self, node: &Node) -> Option<&str> {
        self.owner_of(&node.conductor_group, &node.driver, node.uuid)
    }

    pub fn owner_of(&self, group: &str, driver: &str, node: Uuid) -> Option<&str> {
        self.rings
            .get(&(group.to_owned(), driver.to_owned()))
            .and_then(|ring| ring.owner(node))
    }

    /// Hostnames of the alive conductors.
    pub fn hostnames(&self) -> impl Iterator<Item = &str> {
        self.members
            .iter()
            .map(|(hostname, _, _)| hostname.as_str())
    }

    pub fn is_loaded(&self) -> bool {
        self.loaded
    }
}

/// How often every process re-reads which conductors are alive. A conductor that dies loses
/// its lock at once (`ferric_db::ConductorLock`), so this is how long its nodes may still look
/// like its own; the query is one small statement.
pub const LIVENESS_INTERVAL: Duration = Duration::from_secs(1);

/// The live view of which conductors are alive, shared by a process's conductor and API: online
/// (for a conductor registered under its lock: the lock is held) and heartbeating.
#[derive(Debug, Clone)]
pub struct Membership {
    store: Store,
    heartbeat_timeout: Duration,
    current: Arc<RwLock<Arc<Rings>>>,
}

impl Membership {
    /// A view over `store`'s conductors; a conductor whose heartbeat is older than
    /// `heartbeat_timeout` is dead. Empty until the first [`Membership::refresh`].
    pub fn new(store: Store, heartbeat_timeout: Duration) -> Self {
        Self {
            store,
            heartbeat_timeout,
            current: Arc::default(),
        }
    }

    pub fn heartbeat_timeout(&self) -> Duration {
        self.heartbeat_timeout
    }

    /// The rings as of the last refresh.
    pub fn rings(&self) -> Arc<Rings> {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Re-reads the alive conductors; rebuilds the rings and returns `true` when the members
    /// changed.
    pub async fn refresh(&self) -> Result<bool, ferric_db::Error> {
        let since = self.store.now()
            - TimeDelta::from_std(self.heartbeat_timeout).unwrap_or(TimeDelta::seconds(60));
        let alive = self
            .store
            .conductor_list(&ConductorFilter {
                alive_since: Some(since),
                ..ConductorFilter::default()
            })
            .await?;
        let mut members: Vec<(String, String, Vec<String>)> = alive
            .into_iter()
            .map(|conductor| {
                let mut drivers = conductor.drivers;
                drivers.sort();
                (conductor.hostname, conductor.conductor_group, drivers)
            })
            .collect();
        members.sort();
        let previous = self.rings();
        if previous.loaded && previous.members == members {
            return Ok(false);
        }
        let hostnames: Vec<&str> = members.iter().map(|(name, _, _)| name.as_str()).collect();
        tracing::info!(conductors = ?hostnames, "conductor membership changed; hash ring rebuilt");
        let rings = Arc::new(Rings::new(members));
        *self
            .current
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = rings;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uuids(count: usize) -> Vec<Uuid> {
        // Deterministic, spread-out UUIDs: the test must not depend on chance.
        (0..count)
            .map(|index| Uuid::from_u64_pair(hash(&index.to_le_bytes()), index as u64))
            .collect()
    }

    fn spread(ring: &HashRing, nodes: &[Uuid]) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for node in nodes {
            *counts
                .entry(ring.owner(*node).unwrap_or("none").to_owned())
                .or_default() += 1;
        }
        counts
    }

    #[test]
    fn nodes_spread_evenly_over_conductors() {
        let nodes = uuids(30_000);
        let ring = HashRing::new(["c1", "c2", "c3"]);
        for (host, count) in spread(&ring, &nodes) {
            assert!(
                (9_000..=11_000).contains(&count),
                "{host} owns {count} of 30000 nodes"
            );
        }
    }

    #[test]
    fn only_the_leavers_nodes_move() {
        let nodes = uuids(3_000);
        let before = HashRing::new(["c1", "c2", "c3"]);
        let after = HashRing::new(["c1", "c3"]);
        for node in nodes {
            let old = before.owner(node).unwrap_or_default();
            let new = after.owner(node).unwrap_or_default();
            if old != "c2" {
                assert_eq!(old, new, "node {node} moved though its owner stayed");
            } else {
                assert_ne!(new, "c2");
            }
        }
    }

    #[test]
    fn the_ring_does_not_depend_on_the_order_hosts_are_given() {
        let node = Uuid::from_u128(42);
        assert_eq!(
            HashRing::new(["a", "b", "c"]).owner(node),
            HashRing::new(["c", "a", "b", "a"]).owner(node)
        );
        assert_eq!(HashRing::new(Vec::<String>::new()).owner(node), None);
    }

    #[test]
    fn rings_are_per_group_and_hardware_type() {
        let rings = Rings::new(vec![
            ("a".into(), String::new(), vec!["fake-hardware".into()]),
            ("b".into(), "rack2".into(), vec!["fake-hardware".into()]),
        ]);
        let node = Uuid::from_u128(7);
        assert_eq!(rings.owner_of("", "fake-hardware", node), Some("a"));
        assert_eq!(rings.owner_of("rack2", "fake-hardware", node), Some("b"));
        assert_eq!(rings.owner_of("", "redfish", node), None);
    }
}
