//! Peer-assisted image delivery (issue 45): agents deploying the same image from the
//! conductor's image cache fetch its pieces from each other as well as from the conductor, so
//! a rack of N machines costs the conductor's link about one copy of the image instead of N.
//!
//! Theory of operation (the agent's half is `ferric-agent/src/image/peers.rs`; the wire
//! format is in docs/peers.md):
//! - a **swarm** is one cache entry being delivered: it has a random id, a random secret and
//!   a **manifest** — the image cut into pieces of `piece_size` bytes (4 MiB, doubled until
//!   there are at most [`MAX_PIECES`]), the SHA-256 of each, computed once per entry by
//!   reading the cached file, which the cache verified against the image's own hash;
//! - the conductor puts a node into the swarm when it sends `write_image` ([`Swarms::join`]):
//!   `image_info.ferric_peers` carries the swarm id, the secret, the manifest and the tracker's
//!   URL; the member is known by its node UUID, reached at its `agent_url`, and placed on the
//!   switch of its ports' `local_link_connection.switch_id`;
//! - the **tracker** is this module behind the boot file server (`POST /peers/<swarm>`,
//!   `Authorization: Bearer <secret>`): an agent says which pieces it holds (half-open index
//!   ranges) and how many pieces it wants to take from the conductor; the answer is the other
//!   live members with what they hold, and **origin grants** — pieces nobody holds yet, each
//!   given to one member at a time, given again only after [`REGRANT_AFTER`] when that
//!   member has stopped making progress (it died, or stalled) — so the conductor sends each
//!   piece about once while the members trade the rest among themselves;
//! - members that stop reporting for [`MEMBER_TIMEOUT`] are left out of the answers; swarms
//!   live as long as the process (a few kilobytes each). A cache key names one content (a
//!   Glance image, or a URL with its checksum), so its manifest stays right even when the
//!   entry is evicted and fetched again.
//!
//! What the tracker says is advice: an agent verifies every piece against the manifest and the
//! whole image against its own hash, drops a peer that served a wrong piece and takes a piece
//! from the conductor at once when a peer fails. The state is in memory: a conductor that
//! restarts starts empty swarms, and agents whose tracker is gone finish from the conductor.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ferric_model::resources::{Node, Port};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::DriverError;

/// The smallest piece: large enough that a request's overhead is noise, small enough that
/// many members have something to trade early.
pub const MIN_PIECE_SIZE: u64 = 4 * 1024 * 1024;
/// Pieces at most per image (the manifest travels inside `image_info`: 64 hex digits each).
pub const MAX_PIECES: u64 = 2048;
/// A piece granted from the conductor is granted again after this long, unless the member it
/// was granted to is alive and has reported a new piece within this long (it is working
/// through its grants: on a slow machine a grant can wait its turn longer than this).
pub const REGRANT_AFTER: Duration = Duration::from_secs(10);
/// A member silent this long is left out of the peer lists.
pub const MEMBER_TIMEOUT: Duration = Duration::from_secs(10);
/// Origin grants at most per announce.
const MAX_GRANTS: usize = 16;

/// An image cut into pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub size: u64,
    pub piece_size: u64,
    /// Lowercase hex SHA-256 of each piece, in order.
    pub pieces: Vec<String>,
}

impl Manifest {
    /// The piece size for an image of `size` bytes.
    pub fn piece_size_for(size: u64) -> u64 {
        let mut piece = MIN_PIECE_SIZE;
        while size.div_ceil(piece) > MAX_PIECES {
            piece *= 2;
        }
        piece
    }

    /// Reads `path` and hashes each piece (blocking: a whole image is read).
    pub fn compute(path: &Path) -> std::io::Result<Manifest> {
        use std::io::Read;
        let mut file = std::fs::File::open(path)?;
        let size = file.metadata()?.len();
        let piece_size = Self::piece_size_for(size);
        let mut buffer = vec![0u8; 1024 * 1024];
        let mut pieces = Vec::with_capacity(size.div_ceil(piece_size) as usize);
        let mut left = size;
        while left > 0 {
            let mut hasher = Sha256::new();
            let mut piece_left = left.min(piece_size);
            left -= piece_left;
            while piece_left > 0 {
                let want = piece_left.min(buffer.len() as u64) as usize;
                file.read_exact(&mut buffer[..want])?;
                hasher.update(&buffer[..want]);
                piece_left -= want as u64;
            }
            pieces.push(hex(&hasher.finalize()));
        }
        Ok(Manifest {
            size,
            piece_size,
            pieces,
        })
    }

    fn count(&self) -> usize {
        self.pieces.len()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn random_hex(len: usize) -> String {
    let mut bytes = vec![0u8; len];
    rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
    hex(&bytes)
}

/// Pieces as sorted, disjoint, half-open index ranges (`[[0, 12], [20, 25]]`): what a member
/// says it holds.
pub type Ranges = Vec<[usize; 2]>;

fn ranges_contain(ranges: &Ranges, piece: usize) -> bool {
    ranges
        .iter()
        .any(|[start, end]| (*start..*end).contains(&piece))
}

/// An agent's report to the tracker.
#[derive(Debug, Clone, Deserialize)]
pub struct Announce {
    /// The member: its node's UUID.
    pub peer: String,
    /// The pieces it holds, verified and written.
    #[serde(default)]
    pub have: Ranges,
    /// How many pieces it would take from the conductor now.
    #[serde(default)]
    pub want_origin: usize,
}

/// A member as the tracker's answer lists it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PeerView {
    pub peer: String,
    pub url: String,
    pub switch_id: Option<String>,
    pub have: Ranges,
}

/// The tracker's answer.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Reply {
    pub peers: Vec<PeerView>,
    /// Pieces the announcing member may take from the conductor.
    pub origin: Vec<usize>,
}

/// Why an announce is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TrackerError {
    #[error("no swarm {0} on this conductor (it restarted, or the image left its cache)")]
    UnknownSwarm(String),
    #[error("wrong swarm secret")]
    Unauthorized,
    #[error(
        "{0} is not a member of this swarm: the conductor adds a node when it sends write_image"
    )]
    UnknownMember(String),
    #[error("piece range {0:?} is outside the image's {1} pieces")]
    BadRange([usize; 2], usize),
}

struct Member {
    url: String,
    switch_id: Option<String>,
    have: Ranges,
    seen: Instant,
    /// When it last reported more pieces than before.
    progress_at: Instant,
}

fn piece_count(ranges: &Ranges) -> usize {
    ranges
        .iter()
        .map(|[start, end]| end.saturating_sub(*start))
        .sum()
}

struct Swarm {
    key: String,
    secret: String,
    manifest: Arc<Manifest>,
    members: HashMap<String, Member>,
    /// Per piece: to whom and when it was last granted from the conductor.
    granted: Vec<Option<(String, Instant)>>,
}

impl Swarm {
    fn held_by_anyone(&self, piece: usize, now: Instant) -> bool {
        self.members.values().any(|member| {
            now.duration_since(member.seen) < MEMBER_TIMEOUT && ranges_contain(&member.have, piece)
        })
    }

    /// Whether `member` is alive and reported a new piece within [`REGRANT_AFTER`].
    fn progressing(&self, member: &str, now: Instant) -> bool {
        self.members.get(member).is_some_and(|member| {
            now.duration_since(member.seen) < MEMBER_TIMEOUT
                && now.duration_since(member.progress_at) < REGRANT_AFTER
        })
    }

    fn grant(&mut self, asker: &str, have: &Ranges, wanted: usize, now: Instant) -> Vec<usize> {
        let mut origin = Vec::new();
        for piece in 0..self.manifest.count() {
            if origin.len() >= wanted.min(MAX_GRANTS) {
                break;
            }
            let open = match &self.granted[piece] {
                None => true,
                Some((holder, at)) => {
                    now.duration_since(*at) >= REGRANT_AFTER && !self.progressing(holder, now)
                }
            };
            if open && !ranges_contain(have, piece) && !self.held_by_anyone(piece, now) {
                self.granted[piece] = Some((asker.to_owned(), now));
                origin.push(piece);
            }
        }
        origin
    }
}

/// The swarms of one conductor. Cheap to clone; clones share them.
#[derive(Clone, Default)]
pub struct Swarms {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    swarms: Mutex<HashMap<String, Swarm>>,
    /// Manifests by cache key, computed once (a lock per key while one is computed).
    manifests: Mutex<HashMap<String, Arc<tokio::sync::OnceCell<Arc<Manifest>>>>>,
}

impl std::fmt::Debug for Swarms {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("Swarms")
            .field("swarms", &self.lock().len())
            .finish()
    }
}

/// A node joining a swarm.
#[derive(Debug, Clone)]
pub struct Joiner<'a> {
    /// The node's UUID.
    pub node: &'a str,
    /// Its agent's URL (`driver_internal_info.agent_url`).
    pub agent_url: &'a str,
    /// The switch its ports are cabled to.
    pub switch_id: Option<&'a str>,
}

impl Swarms {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Swarm>> {
        self.inner
            .swarms
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The manifest of the cache entry `key` stored at `path`, computed on first use.
    async fn manifest(&self, key: &str, path: &Path) -> std::io::Result<Arc<Manifest>> {
        let cell = self
            .inner
            .manifests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.to_owned())
            .or_default()
            .clone();
        let path = path.to_owned();
        cell.get_or_try_init(|| async move {
            let started = Instant::now();
            let manifest = tokio::task::spawn_blocking(move || Manifest::compute(&path))
                .await
                .map_err(std::io::Error::other)??;
            tracing::info!(
                key,
                pieces = manifest.pieces.len(),
                piece_size = manifest.piece_size,
                seconds = started.elapsed().as_secs_f64(),
                "image piece manifest computed"
            );
            Ok::<_, std::io::Error>(Arc::new(manifest))
        })
        .await
        .cloned()
    }

    /// Puts `joiner` into the swarm of the cache entry `key` (made on first use) and returns
    /// `image_info.ferric_peers` for its agent; `tracker` is the boot file server's URL.
    pub async fn join(
        &self,
        key: &str,
        path: &Path,
        joiner: Joiner<'_>,
        tracker: &str,
    ) -> std::io::Result<Value> {
        let manifest = self.manifest(key, path).await?;
        let mut swarms = self.lock();
        let id = match swarms.iter().find(|(_, swarm)| swarm.key == key) {
            Some((id, _)) => id.clone(),
            None => {
                let id = random_hex(16);
                swarms.insert(
                    id.clone(),
                    Swarm {
                        key: key.to_owned(),
                        secret: random_hex(32),
                        granted: vec![None; manifest.count()],
                        manifest: manifest.clone(),
                        members: HashMap::new(),
                    },
                );
                id
            }
        };
        let Some(swarm) = swarms.get_mut(&id) else {
            return Err(std::io::Error::other("swarm vanished"));
        };
        swarm.members.insert(
            joiner.node.to_owned(),
            Member {
                url: joiner.agent_url.trim_end_matches('/').to_owned(),
                switch_id: joiner.switch_id.map(str::to_owned),
                have: Vec::new(),
                seen: Instant::now(),
                progress_at: Instant::now(),
            },
        );
        tracing::info!(
            key,
            swarm = %id,
            node = joiner.node,
            members = swarm.members.len(),
            "node joined an image swarm"
        );
        Ok(json!({
            "swarm": id,
            "secret": swarm.secret,
            "tracker_url": format!("{}/peers/{id}", tracker.trim_end_matches('/')),
            "peer_id": joiner.node,
            "switch_id": joiner.switch_id,
            "size": manifest.size,
            "piece_size": manifest.piece_size,
            "pieces": manifest.pieces,
        }))
    }

    /// The tracker: records what `announce.peer` holds and answers with the other live
    /// members and the pieces it may take from the conductor.
    pub fn announce(
        &self,
        swarm_id: &str,
        secret: &str,
        announce: Announce,
    ) -> Result<Reply, TrackerError> {
        let now = Instant::now();
        let mut swarms = self.lock();
        let swarm = swarms
            .get_mut(swarm_id)
            .ok_or_else(|| TrackerError::UnknownSwarm(swarm_id.to_owned()))?;
        if !constant_time_eq(swarm.secret.as_bytes(), secret.as_bytes()) {
            return Err(TrackerError::Unauthorized);
        }
        let count = swarm.manifest.count();
        if let Some(bad) = announce
            .have
            .iter()
            .find(|[start, end]| start > end || *end > count)
        {
            return Err(TrackerError::BadRange(*bad, count));
        }
        let member = swarm
            .members
            .get_mut(&announce.peer)
            .ok_or_else(|| TrackerError::UnknownMember(announce.peer.clone()))?;
        if piece_count(&announce.have) > piece_count(&member.have) {
            member.progress_at = now;
        }
        member.have = announce.have.clone();
        member.seen = now;
        let origin = swarm.grant(&announce.peer, &announce.have, announce.want_origin, now);
        let peers = swarm
            .members
            .iter()
            .filter(|(id, member)| {
                **id != announce.peer && now.duration_since(member.seen) < MEMBER_TIMEOUT
            })
            .map(|(id, member)| PeerView {
                peer: id.clone(),
                url: member.url.clone(),
                switch_id: member.switch_id.clone(),
                have: member.have.clone(),
            })
            .collect();
        Ok(Reply { peers, origin })
    }

    /// Swarms now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether a deploy wants peer-assisted delivery: `instance_info.image_peer_delivery` (a
/// boolean, or `true`/`false` and the like as text), else the site's `image_peer_delivery`.
pub fn wanted(node: &Node, site: bool) -> Result<bool, DriverError> {
    let refuse = || {
        DriverError::invalid(
            "instance_info.image_peer_delivery",
            format!(
                "Node {}: image_peer_delivery must be true or false (or left out for the \
                 image_peer_delivery setting).",
                node.uuid
            ),
        )
    };
    match node.instance_info.get("image_peer_delivery") {
        None | Some(Value::Null) => Ok(site),
        Some(Value::Bool(wanted)) => Ok(*wanted),
        Some(Value::String(text)) => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err(refuse()),
        },
        Some(_) => Err(refuse()),
    }
}

/// The switch a node's ports are cabled to (the first `local_link_connection.switch_id`).
pub fn switch_of(ports: &[Port]) -> Option<&str> {
    ports.iter().find_map(|port| {
        port.local_link_connection
            .get("switch_id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
    })
}

/// Compares without leaking, through timing, how many leading bytes matched.
fn constant_time_eq(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len()
        && left
            .iter()
            .zip(right)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

#[cfg(test)]
#[path = "peers_tests.rs"]
mod tests;
