//! What an agent holds of an image swarm (peer-assisted delivery, `image/peers.rs`): the
//! swarm's plan as the conductor sent it (`image_info.ferric_peers`) and the pieces this agent
//! verified and wrote, which its API serves to the other members, read back from the disk and
//! checked again before they leave.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::commands::CommandError;

/// `image_info.ferric_peers`: the swarm this agent was put into.
#[derive(Debug, Clone, Deserialize)]
pub struct Plan {
    pub swarm: String,
    pub secret: String,
    pub tracker_url: String,
    pub peer_id: String,
    #[serde(default)]
    pub switch_id: Option<String>,
    pub size: u64,
    pub piece_size: u64,
    pub pieces: Vec<String>,
}

impl Plan {
    /// Reads `image_info.ferric_peers`, if there is one (→ 400 when malformed).
    pub fn from_image_info(info: &Map<String, Value>) -> Result<Option<Plan>, CommandError> {
        let Some(value) = info.get("ferric_peers").filter(|value| !value.is_null()) else {
            return Ok(None);
        };
        let plan: Plan = serde_json::from_value(value.clone()).map_err(|error| {
            CommandError::invalid_params(format!("image_info.ferric_peers: {error}"))
        })?;
        let expected = plan.size.div_ceil(plan.piece_size.max(1));
        if plan.piece_size == 0
            || plan.pieces.len() as u64 != expected
            || plan.pieces.iter().any(|hash| hash.len() != 64)
        {
            return Err(CommandError::invalid_params(format!(
                "image_info.ferric_peers: {} pieces of {} bytes do not make {} bytes, or a piece \
                 hash is not SHA-256 hex",
                plan.pieces.len(),
                plan.piece_size,
                plan.size
            )));
        }
        Ok(Some(plan))
    }

    pub(crate) fn count(&self) -> usize {
        self.pieces.len()
    }

    /// The offset and length of piece `index` in the image.
    pub(crate) fn span(&self, index: usize) -> (u64, u64) {
        let offset = index as u64 * self.piece_size;
        (offset, self.piece_size.min(self.size - offset))
    }
}

/// What this agent holds of a swarm: served to the other members by the API.
#[derive(Debug)]
pub struct Held {
    pub plan: Plan,
    disk: PathBuf,
    /// Where the image starts on the disk.
    pub(crate) base: u64,
    pub(crate) have: Mutex<Vec<bool>>,
    /// Pieces as written, kept in memory because the agent changes them on the disk after
    /// the image is written (the GPT fixed for the disk's size, in the first piece).
    kept: Mutex<Vec<(usize, Arc<Vec<u8>>)>>,
    /// How many times the agent said it changed its disk since the image was written.
    changes: AtomicU64,
    /// Per piece, the count of changes it was last checked at.
    checked: Mutex<Vec<u64>>,
    /// Set when another image replaces this one: the announcer stops.
    pub(crate) retired: AtomicBool,
    /// Bytes served to peers.
    pub served: AtomicU64,
}

impl Held {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Vec<bool>> {
        self.have.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `secret` is this swarm's.
    pub fn admits(&self, swarm: &str, secret: &str) -> bool {
        swarm == self.plan.swarm
            && crate::secret::constant_time_eq(secret.as_bytes(), self.plan.secret.as_bytes())
    }

    /// Piece `index` as written, to serve, or `None` when not held: kept in memory, or read
    /// back from the disk in chunks ([`PieceReader`]).
    pub fn piece(self: &Arc<Self>, index: usize) -> Option<Served> {
        if !self.lock().get(index).copied().unwrap_or(false) {
            return None;
        }
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(piece, _)| *piece == index)
            .map(|(_, bytes)| bytes.clone());
        if let Some(bytes) = kept {
            self.served.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            return Some(Served::Kept(bytes));
        }
        let (offset, len) = self.plan.span(index);
        // Pieces are checked again only once the agent changed its disk after writing them
        // (then each once per change): before that, they are as verified when written.
        let generation = self.changes.load(Ordering::Relaxed);
        let check = generation > 0
            && self
                .checked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(index)
                .is_some_and(|checked| *checked != generation);
        Some(Served::Disk(PieceReader {
            held: self.clone(),
            index,
            at: self.base + offset,
            left: len,
            hasher: check.then(Sha256::new),
            generation,
        }))
    }

    /// The agent is about to change its disk where pieces may lie (the GPT fixed, a config
    /// drive, a boot loader): pieces served from now on are checked against the manifest.
    pub fn mark_changed(&self) {
        self.changes.fetch_add(1, Ordering::Relaxed);
    }

    fn read_from_disk(&self, index: usize) -> std::io::Result<Vec<u8>> {
        let (offset, len) = self.plan.span(index);
        let file = File::open(&self.disk)?;
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(&mut bytes, self.base + offset)?;
        Ok(bytes)
    }

    /// Keeps piece `index` in memory as it is now, before the agent changes it on the disk.
    pub fn keep(&self, index: usize) {
        if index >= self.plan.count() {
            return;
        }
        match self.read_from_disk(index) {
            Ok(bytes) => self
                .kept
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((index, Arc::new(bytes))),
            Err(error) => tracing::warn!(piece = index, %error, "cannot keep a piece to serve"),
        }
    }

    /// Stops announcing (a new image replaces this one).
    pub fn retire(&self) {
        self.retired.store(true, Ordering::Relaxed);
    }

    pub(crate) fn ranges(&self) -> Vec<[usize; 2]> {
        to_ranges(&self.lock())
    }
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// A piece to serve.
#[derive(Debug)]
pub enum Served {
    /// Kept in memory.
    Kept(Arc<Vec<u8>>),
    /// On the disk.
    Disk(PieceReader),
}

/// Reads a piece from the disk in chunks of [`SERVE_CHUNK`] (so serving many peers at once
/// costs little memory), hashing it on the way when it must be checked: a piece that no
/// longer matches the manifest ends in an error (the peer sees a cut answer and goes to the
/// conductor) and is no longer held.
#[derive(Debug)]
pub struct PieceReader {
    held: Arc<Held>,
    index: usize,
    at: u64,
    left: u64,
    hasher: Option<Sha256>,
    generation: u64,
}

/// The chunk a piece is served in.
pub const SERVE_CHUNK: u64 = 256 * 1024;

impl PieceReader {
    /// The piece's length.
    pub fn len(&self) -> u64 {
        self.left
    }

    pub fn is_empty(&self) -> bool {
        self.left == 0
    }

    /// The next chunk (blocking), `None` at the end; an error when the disk cannot be read or
    /// the piece changed.
    pub fn next_chunk(&mut self) -> Option<std::io::Result<Vec<u8>>> {
        if self.left == 0 {
            let hasher = self.hasher.take()?;
            let expected = &self.held.plan.pieces[self.index];
            if &hex(&hasher.finalize()) != expected {
                tracing::warn!(
                    piece = self.index,
                    "a written piece changed on the disk: no longer served"
                );
                self.held.lock()[self.index] = false;
                return Some(Err(std::io::Error::other("the piece changed on the disk")));
            }
            if let Some(checked) = self
                .held
                .checked
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_mut(self.index)
            {
                *checked = self.generation;
            }
            return None;
        }
        let len = self.left.min(SERVE_CHUNK);
        let mut bytes = vec![0u8; len as usize];
        let read =
            File::open(&self.held.disk).and_then(|file| file.read_exact_at(&mut bytes, self.at));
        if let Err(error) = read {
            self.left = 0;
            self.hasher = None;
            return Some(Err(error));
        }
        if let Some(hasher) = &mut self.hasher {
            hasher.update(&bytes);
        }
        self.at += len;
        self.left -= len;
        self.held.served.fetch_add(len, Ordering::Relaxed);
        Some(Ok(bytes))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Held pieces as half-open index ranges.
fn to_ranges(have: &[bool]) -> Vec<[usize; 2]> {
    let mut ranges = Vec::new();
    let mut start = None;
    for (index, held) in have.iter().copied().chain([false]).enumerate() {
        match (held, start) {
            (true, None) => start = Some(index),
            (false, Some(first)) => {
                ranges.push([first, index]);
                start = None;
            }
            _ => {}
        }
    }
    ranges
}

/// A swarm's [`Held`] for `plan`, its image at `base` of `disk`.
pub fn hold(plan: Plan, disk: PathBuf, base: u64) -> Arc<Held> {
    let count = plan.count();
    Arc::new(Held {
        plan,
        disk,
        base,
        have: Mutex::new(vec![false; count]),
        kept: Mutex::new(Vec::new()),
        changes: AtomicU64::new(0),
        checked: Mutex::new(vec![0; count]),
        retired: AtomicBool::new(false),
        served: AtomicU64::new(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn held_pieces_become_ranges() {
        assert!(to_ranges(&[]).is_empty());
        assert_eq!(
            to_ranges(&[true, true, false, true, false, false, true]),
            vec![[0, 2], [3, 4], [6, 7]]
        );
    }

    fn read_all(held: &Arc<Held>, index: usize) -> Option<std::io::Result<Vec<u8>>> {
        let Served::Disk(mut reader) = held.piece(index)? else {
            panic!("piece {index} is not on the disk");
        };
        let mut bytes = Vec::new();
        while let Some(chunk) = reader.next_chunk() {
            match chunk {
                Ok(chunk) => bytes.extend(chunk),
                Err(error) => return Some(Err(error)),
            }
        }
        Some(Ok(bytes))
    }

    #[test]
    fn a_piece_changed_after_a_marked_change_is_no_longer_served() {
        let dir = tempfile::tempdir().unwrap();
        let disk = dir.path().join("disk");
        let piece = (SERVE_CHUNK + 100) as usize;
        let image: Vec<u8> = (0..2 * piece).map(|i| (i % 251) as u8).collect();
        std::fs::write(&disk, &image).unwrap();
        let plan = Plan {
            swarm: "s".into(),
            secret: "x".into(),
            tracker_url: "http://t".into(),
            peer_id: "me".into(),
            switch_id: None,
            size: image.len() as u64,
            piece_size: piece as u64,
            pieces: image.chunks(piece).map(sha256_hex).collect(),
        };
        let held = hold(plan, disk.clone(), 0);
        assert!(held.piece(0).is_none(), "not held yet");
        held.lock()[0] = true;
        held.lock()[1] = true;
        assert_eq!(read_all(&held, 1).unwrap().unwrap(), image[piece..]);
        // The agent changes its disk: piece 1 no longer matches; piece 0 was kept before.
        held.keep(0);
        held.mark_changed();
        let file = std::fs::OpenOptions::new().write(true).open(&disk).unwrap();
        file.write_all_at(b"changed", piece as u64 + 10).unwrap();
        file.write_all_at(b"changed", 10).unwrap();
        match held.piece(0) {
            Some(Served::Kept(bytes)) => assert_eq!(*bytes, image[..piece]),
            other => panic!("piece 0 kept, not {other:?}"),
        }
        assert!(
            read_all(&held, 1).unwrap().is_err(),
            "a changed piece is cut"
        );
        assert!(held.piece(1).is_none(), "and no longer held");
    }

    #[test]
    fn a_plan_must_add_up() {
        let good = json!({"ferric_peers": {
            "swarm": "s", "secret": "x", "tracker_url": "http://t", "peer_id": "me",
            "size": 9, "piece_size": 4, "pieces": ["a".repeat(64), "b".repeat(64), "c".repeat(64)],
        }});
        let parsed = Plan::from_image_info(good.as_object().unwrap())
            .unwrap()
            .unwrap();
        assert_eq!(parsed.span(2), (8, 1));
        assert_eq!(parsed.span(1), (4, 4));
        let mut short = good.clone();
        short["ferric_peers"]["size"] = json!(13);
        assert!(Plan::from_image_info(short.as_object().unwrap()).is_err());
        let none = json!({"urls": []});
        assert!(
            Plan::from_image_info(none.as_object().unwrap())
                .unwrap()
                .is_none()
        );
    }
}
