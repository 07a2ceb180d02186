//! Peer-assisted delivery of a raw image (issue 45; the conductor's half, the manifest and the
//! tracker, is `ferric-drivers/src/peers.rs`, the wire format docs/peers.md).
//!
//! When `image_info.ferric_peers` is given, the image is not streamed from the conductor in
//! one piece: it is cut into the manifest's pieces, and worker threads fetch them — from
//! other agents deploying the same image where one holds a piece (the rarest first, a peer on
//! this machine's switch first, the least busy next), else from the conductor when its
//! tracker granted this agent that piece. Every piece is checked against the manifest's
//! SHA-256 before it is written at its offset; a peer that served a wrong piece is dropped,
//! and a piece a peer failed to give (an error, a wrong hash, too slow: [`PEER_TIMEOUT_BASE`]
//! plus the piece at [`PEER_MIN_RATE`]) is fetched from the conductor at once. The whole image
//! is then verified as always: this thread reads the written pieces back in order, as they
//! become contiguous, and hashes them with the image's own algorithm.
//!
//! An announcer thread tells the tracker what this agent holds, every
//! [`ANNOUNCE_INTERVAL`] or sooner when the workers run out of work, and learns the other
//! members and its origin grants; when the tracker cannot be reached the workers take every
//! piece from the conductor. What this agent wrote is served to the others by its API
//! (`GET /v1/peer/<swarm>/pieces/<index>`, the swarm's secret as a bearer token), read back
//! from the disk, only pieces it verified and wrote; it keeps serving and announcing after its
//! own image is written, until the next image replaces the swarm or the machine reboots.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::commands::CommandError;
use crate::image::held::sha256_hex;
pub use crate::image::held::{Held, Plan, hold};

/// Worker threads fetching pieces at once.
const WORKERS: usize = 4;
/// Workers that take pieces from the conductor first.
const ORIGIN_WORKERS: usize = 2;
/// Requests at most in flight from this agent to one peer.
const PER_PEER: usize = 2;
/// Origin grants this agent keeps in hand.
const WANT_ORIGIN: usize = 8;
/// The tracker is told what this agent holds at least this often.
pub const ANNOUNCE_INTERVAL: Duration = Duration::from_millis(500);
/// A seeder (its own image written) announces this often.
const SEED_INTERVAL: Duration = Duration::from_secs(2);
/// A peer's piece must start within this…
pub const PEER_TIMEOUT_BASE: Duration = Duration::from_secs(10);
/// …and arrive at this rate (bytes per second), or the piece comes from the conductor. Lax:
/// a peer busy writing its own image on a slow CPU (the lab's emulated machines) still
/// serves faster than this, and a dead one fails at once anyway (refused, reset).
pub const PEER_MIN_RATE: u64 = 1024 * 1024;
/// A piece that fails this often from the conductor fails the deploy.
const ORIGIN_TRIES: u8 = 3;

/// A member as the tracker lists it.
#[derive(Debug, Clone, Deserialize)]
struct PeerView {
    peer: String,
    url: String,
    #[serde(default)]
    switch_id: Option<String>,
    #[serde(default)]
    have: Vec<[usize; 2]>,
}

#[derive(Debug, Deserialize)]
struct Reply {
    #[serde(default)]
    peers: Vec<PeerView>,
    #[serde(default)]
    origin: Vec<usize>,
}

#[derive(Debug)]
struct Peer {
    id: String,
    url: String,
    near: bool,
    have: Vec<[usize; 2]>,
    dropped: bool,
    busy: usize,
}

impl Peer {
    fn holds(&self, piece: usize) -> bool {
        self.have
            .iter()
            .any(|[start, end]| (*start..*end).contains(&piece))
    }

    fn usable(&self) -> bool {
        !self.dropped && self.busy < PER_PEER
    }
}

/// Where a piece is to come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Peer(usize),
    Origin,
}

#[derive(Debug, Default)]
struct State {
    have: Vec<bool>,
    in_flight: Vec<bool>,
    /// Pieces the tracker granted this agent from the conductor.
    grants: Vec<usize>,
    /// Pieces a peer failed to give: from the conductor, at once.
    retry: Vec<usize>,
    origin_failures: Vec<u8>,
    peers: Vec<Peer>,
    /// Workers fetching from the conductor now.
    origin_busy: usize,
    /// The tracker could not be reached: everything from the conductor.
    tracker_down: bool,
    held: usize,
    error: Option<CommandError>,
}

impl State {
    fn open(&self, piece: usize) -> bool {
        !self.have[piece] && !self.in_flight[piece]
    }

    /// The next piece to fetch and where from, marked in flight.
    /// Up to [`ORIGIN_WORKERS`] workers take what only the conductor can give (the swarm
    /// waits on those pieces), the others what peers hold; a worker with nothing from peers
    /// takes from the conductor too.
    fn next_job(&mut self) -> Option<(usize, Source)> {
        let job = if self.origin_busy < ORIGIN_WORKERS {
            self.origin_job().or_else(|| self.peer_job())
        } else {
            self.peer_job().or_else(|| self.origin_job())
        }?;
        self.in_flight[job.0] = true;
        match job.1 {
            Source::Peer(peer) => self.peers[peer].busy += 1,
            Source::Origin => self.origin_busy += 1,
        }
        Some(job)
    }

    /// The rarest open piece some usable peer holds, from a near peer first, then the least
    /// busy; ties broken at random so members spread over different pieces.
    fn peer_job(&self) -> Option<(usize, Source)> {
        let mut best: Option<(usize, usize, u32)> = None;
        for piece in (0..self.have.len()).filter(|piece| self.open(*piece)) {
            let holders = self
                .peers
                .iter()
                .filter(|peer| !peer.dropped && peer.holds(piece))
                .count();
            if holders == 0 || !self.peers.iter().any(|p| p.usable() && p.holds(piece)) {
                continue;
            }
            let tie: u32 = rand::random();
            if best.is_none_or(|(_, count, best_tie)| (holders, tie) < (count, best_tie)) {
                best = Some((piece, holders, tie));
            }
        }
        let (piece, _, _) = best?;
        let peer = self
            .peers
            .iter()
            .enumerate()
            .filter(|(_, peer)| peer.usable() && peer.holds(piece))
            .min_by_key(|(_, peer)| (!peer.near, peer.busy))
            .map(|(index, _)| index)?;
        Some((piece, Source::Peer(peer)))
    }

    fn origin_job(&mut self) -> Option<(usize, Source)> {
        let retry = self.retry.iter().position(|piece| self.open(*piece));
        if let Some(at) = retry {
            return Some((self.retry.swap_remove(at), Source::Origin));
        }
        self.grants.retain(|piece| !self.have[*piece]);
        let granted = self.grants.iter().position(|piece| self.open(*piece));
        if let Some(at) = granted {
            return Some((self.grants.swap_remove(at), Source::Origin));
        }
        // Pieces only dropped peers hold (the tracker still lists them as held, so it grants
        // them to nobody): from the conductor at once. With no tracker, everything.
        (0..self.have.len())
            .find(|piece| {
                self.open(*piece)
                    && (self.tracker_down
                        || (self.peers.iter().any(|peer| peer.holds(*piece))
                            && self
                                .peers
                                .iter()
                                .all(|peer| peer.dropped || !peer.holds(*piece))))
            })
            .map(|piece| (piece, Source::Origin))
    }

    fn done(&self) -> bool {
        self.held == self.have.len() || self.error.is_some()
    }
}

/// A delivery's shared state.
struct Swarm {
    plan: Plan,
    origin_url: String,
    held: Arc<Held>,
    state: Mutex<State>,
    changed: Condvar,
    /// Bytes fetched from the conductor and from peers.
    from_origin: AtomicU64,
    from_peers: AtomicU64,
}

impl Swarm {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fail(&self, error: CommandError) {
        let mut state = self.lock();
        if state.error.is_none() {
            state.error = Some(error);
        }
        self.changed.notify_all();
    }
}

/// What [`deliver`] did.
#[derive(Debug, Clone, Copy, Default)]
pub struct Delivered {
    pub from_origin: u64,
    pub from_peers: u64,
    pub peers_dropped: usize,
}

/// The clients: the conductor's (no overall timeout, images are large) and the peers'
/// (timed out, so a slow peer is left for the conductor). A peer's certificate is its own
/// self-signed one (auto-TLS); what it serves is checked against the manifest instead.
struct Clients {
    /// The conductor's: its boot file server serves the pieces and the tracker (with the
    /// CA the agent trusts for it).
    origin: reqwest::blocking::Client,
    peers: reqwest::blocking::Client,
}

/// How long the tracker may take to answer an announce.
const TRACKER_TIMEOUT: Duration = Duration::from_secs(10);

fn clients(origin: &reqwest::blocking::Client, plan: &Plan) -> Result<Clients, CommandError> {
    let build = |builder: reqwest::blocking::ClientBuilder| {
        builder.build().map_err(|error| {
            CommandError::internal(format!("cannot build an HTTP client: {error}"))
        })
    };
    let peer_timeout =
        PEER_TIMEOUT_BASE + Duration::from_secs_f64(plan.piece_size as f64 / PEER_MIN_RATE as f64);
    Ok(Clients {
        origin: origin.clone(),
        peers: build(
            reqwest::blocking::Client::builder()
                .connect_timeout(Duration::from_secs(2))
                .timeout(peer_timeout)
                .danger_accept_invalid_certs(true),
        )?,
    })
}

fn download_error(details: impl Into<String>) -> CommandError {
    CommandError::new("ImageDownloadError", "Error downloading image", details)
}

/// Writes the image of `plan` at `base` of `file` (the disk at `disk`), fetching its pieces
/// from peers and the conductor (`origin_url`, range requests); returns the image's digest
/// by `hasher`, read back in order. `held` is shared with the API from the start, so pieces
/// are served as soon as they are written. `report(written)` is called as the digest
/// advances.
pub fn deliver(
    held: Arc<Held>,
    origin_url: &str,
    http: &reqwest::blocking::Client,
    file: &File,
    mut hasher: Box<dyn sha2::digest::DynDigest + Send>,
    report: &mut dyn FnMut(u64),
) -> Result<(String, Delivered), CommandError> {
    let plan = held.plan.clone();
    let count = plan.count();
    let swarm = Arc::new(Swarm {
        origin_url: origin_url.to_owned(),
        state: Mutex::new(State {
            have: vec![false; count],
            in_flight: vec![false; count],
            origin_failures: vec![0; count],
            ..State::default()
        }),
        changed: Condvar::new(),
        from_origin: AtomicU64::new(0),
        from_peers: AtomicU64::new(0),
        held,
        plan,
    });
    let clients = Arc::new(clients(http, &swarm.plan)?);
    start_announcer(swarm.clone(), clients.clone());
    let digest = std::thread::scope(|scope| {
        for index in 0..WORKERS {
            let (swarm, clients) = (&swarm, &clients);
            std::thread::Builder::new()
                .name(format!("image-piece-{index}"))
                .spawn_scoped(scope, move || work(swarm, clients, file))
                .map_err(|error| download_error(format!("cannot start a worker: {error}")))?;
        }
        let digest = hash_in_order(&swarm, file, hasher.as_mut(), report);
        if let Err(error) = &digest {
            swarm.fail(error.clone());
        }
        digest
    })?;
    let peers_dropped = swarm
        .lock()
        .peers
        .iter()
        .filter(|peer| peer.dropped)
        .count();
    Ok((
        digest,
        Delivered {
            from_origin: swarm.from_origin.load(Ordering::Relaxed),
            from_peers: swarm.from_peers.load(Ordering::Relaxed),
            peers_dropped,
        },
    ))
}

/// The calling thread: hashes the image in order, each piece once it is written, reading it
/// back from the disk.
fn hash_in_order(
    swarm: &Swarm,
    file: &File,
    hasher: &mut dyn sha2::digest::DynDigest,
    report: &mut dyn FnMut(u64),
) -> Result<String, CommandError> {
    let mut buffer = vec![0u8; 1024 * 1024];
    for piece in 0..swarm.plan.count() {
        {
            let mut state = swarm.lock();
            while !state.have[piece] {
                if let Some(error) = &state.error {
                    return Err(error.clone());
                }
                state = swarm
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
        }
        let (offset, len) = swarm.plan.span(piece);
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(buffer.len() as u64) as usize;
            file.read_exact_at(&mut buffer[..n], swarm.held.base + offset + done)
                .map_err(|error| {
                    download_error(format!("cannot read back piece {piece}: {error}"))
                })?;
            if piece == 0 && done == 0 {
                check_raw(&buffer[..n])?;
            }
            hasher.update(&buffer[..n]);
            done += n as u64;
        }
        report(offset + len);
    }
    Ok(hasher
        .finalize_reset()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

/// Peer delivery writes pieces where they fall: only a raw image may be written so.
fn check_raw(first: &[u8]) -> Result<(), CommandError> {
    match super::detect_format(first) {
        "raw" => Ok(()),
        other => Err(CommandError::new(
            "InvalidImage",
            "Image format mismatch",
            format!("peer delivery is for raw images, but this image's content is {other}"),
        )),
    }
}

/// A worker: takes the next piece, fetches it, checks and writes it, until all are held.
fn work(swarm: &Swarm, clients: &Clients, file: &File) {
    // One byte over a piece: `read_to_end` then never grows it to find the end.
    let mut buffer = Vec::with_capacity(swarm.plan.piece_size as usize + 1);
    loop {
        let job = {
            let mut state = swarm.lock();
            loop {
                if state.done() {
                    return;
                }
                if let Some(job) = state.next_job() {
                    break job;
                }
                // Nothing to do: the announcer asks the tracker at once.
                swarm.changed.notify_all();
                state = swarm
                    .changed
                    .wait_timeout(state, Duration::from_millis(200))
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
        };
        let (piece, source) = job;
        let result = fetch_piece(swarm, clients, piece, source, &mut buffer)
            .and_then(|()| write_piece(swarm, file, piece, &buffer));
        finish_job(swarm, piece, source, result);
    }
}

/// Why a piece did not arrive.
#[derive(Debug)]
enum PieceError {
    /// The peer or the conductor failed (unreachable, an error status, too slow).
    Fetch(String),
    /// It arrived with another hash than the manifest's.
    Corrupt,
    /// It could not be written: the deploy fails.
    Write(CommandError),
}

impl std::fmt::Display for PieceError {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PieceError::Fetch(problem) => formatter.write_str(problem),
            PieceError::Corrupt => formatter.write_str("its SHA-256 is not the manifest's"),
            PieceError::Write(error) => formatter.write_str(&error.details),
        }
    }
}

fn fetch_piece(
    swarm: &Swarm,
    clients: &Clients,
    piece: usize,
    source: Source,
    buffer: &mut Vec<u8>,
) -> Result<(), PieceError> {
    use std::io::Read;
    let (offset, len) = swarm.plan.span(piece);
    let request = match source {
        Source::Peer(peer) => {
            let url = swarm.lock().peers[peer].url.clone();
            clients
                .peers
                .get(format!("{url}/v1/peer/{}/pieces/{piece}", swarm.plan.swarm))
                .bearer_auth(&swarm.plan.secret)
        }
        Source::Origin => clients.origin.get(&swarm.origin_url).header(
            reqwest::header::RANGE,
            format!("bytes={offset}-{}", offset + len - 1),
        ),
    };
    let response = request
        .send()
        .map_err(|error| PieceError::Fetch(error.to_string()))?;
    let status = response.status();
    let expected = match source {
        Source::Peer(_) => reqwest::StatusCode::OK,
        Source::Origin => reqwest::StatusCode::PARTIAL_CONTENT,
    };
    if status != expected {
        return Err(PieceError::Fetch(format!("HTTP {status}")));
    }
    buffer.clear();
    response
        .take(len + 1)
        .read_to_end(buffer)
        .map_err(|error| PieceError::Fetch(error.to_string()))?;
    if buffer.len() as u64 != len {
        return Err(PieceError::Corrupt);
    }
    if sha256_hex(buffer) != swarm.plan.pieces[piece] {
        return Err(PieceError::Corrupt);
    }
    let counter = match source {
        Source::Peer(_) => &swarm.from_peers,
        Source::Origin => &swarm.from_origin,
    };
    counter.fetch_add(len, Ordering::Relaxed);
    Ok(())
}

fn write_piece(swarm: &Swarm, file: &File, piece: usize, bytes: &[u8]) -> Result<(), PieceError> {
    let (offset, _) = swarm.plan.span(piece);
    file.write_all_at(bytes, swarm.held.base + offset)
        .map_err(|error| {
            PieceError::Write(CommandError::new(
                "ImageWriteError",
                "Error writing image to device",
                format!("cannot write piece {piece}: {error}"),
            ))
        })
}

/// Records a job's end: the piece held (and served from now on), or put back — a failing
/// peer dropped and the piece sent to the conductor, a failing conductor retried a few times.
fn finish_job(swarm: &Swarm, piece: usize, source: Source, result: Result<(), PieceError>) {
    let mut state = swarm.lock();
    state.in_flight[piece] = false;
    match source {
        Source::Peer(peer) => state.peers[peer].busy -= 1,
        Source::Origin => state.origin_busy -= 1,
    }
    match result {
        Ok(()) => {
            state.have[piece] = true;
            state.held += 1;
            swarm.held.lock()[piece] = true;
        }
        Err(PieceError::Write(error)) => {
            if state.error.is_none() {
                state.error = Some(error);
            }
        }
        Err(problem) => match source {
            Source::Peer(peer) => {
                let peer = &mut state.peers[peer];
                peer.dropped = true;
                tracing::warn!(
                    peer = %peer.id,
                    url = %peer.url,
                    piece,
                    %problem,
                    "a peer failed to give a piece: peer dropped, the piece from the conductor"
                );
                state.retry.push(piece);
            }
            Source::Origin => {
                state.origin_failures[piece] += 1;
                tracing::warn!(piece, %problem, "the conductor failed to give a piece");
                if state.origin_failures[piece] >= ORIGIN_TRIES {
                    let details = format!(
                        "piece {piece} of the image could not be fetched from {} \
                         ({ORIGIN_TRIES} tries; last: {problem})",
                        swarm.origin_url
                    );
                    state.error = Some(download_error(details));
                } else {
                    state.retry.push(piece);
                }
            }
        },
    }
    swarm.changed.notify_all();
}

/// The announcer: tells the tracker what this agent holds and takes its answer, until the
/// image is written; then goes on announcing, as a seeder, until the swarm is retired.
fn start_announcer(swarm: Arc<Swarm>, clients: Arc<Clients>) {
    let spawned = std::thread::Builder::new()
        .name("image-peers".to_owned())
        .spawn(move || {
            let mut failures = 0u32;
            while !swarm.held.retired.load(Ordering::Relaxed) {
                let (seeding, want_origin) = {
                    let state = swarm.lock();
                    if state.error.is_some() {
                        return;
                    }
                    let seeding = state.held == state.have.len();
                    (seeding, WANT_ORIGIN.saturating_sub(state.grants.len()))
                };
                match announce(&swarm, &clients, if seeding { 0 } else { want_origin }) {
                    Ok(()) => failures = 0,
                    Err(problem) => {
                        failures += 1;
                        tracing::warn!(%problem, failures, "the image tracker did not answer");
                        if failures >= 3 && !seeding {
                            let mut state = swarm.lock();
                            if !state.tracker_down {
                                tracing::warn!(
                                    "no tracker: the rest of the image from the conductor"
                                );
                                state.tracker_down = true;
                                swarm.changed.notify_all();
                            }
                        }
                    }
                }
                let state = swarm.lock();
                let interval = if seeding {
                    SEED_INTERVAL
                } else {
                    ANNOUNCE_INTERVAL
                };
                // Woken early when a worker has nothing to do.
                drop(
                    swarm
                        .changed
                        .wait_timeout(state, interval)
                        .unwrap_or_else(PoisonError::into_inner),
                );
            }
        });
    if let Err(error) = spawned {
        tracing::warn!(%error, "cannot start the image announcer: the image from the conductor");
    }
}

fn announce(swarm: &Swarm, clients: &Clients, want_origin: usize) -> Result<(), String> {
    let body = json!({
        "peer": swarm.plan.peer_id,
        "have": swarm.held.ranges(),
        "want_origin": want_origin,
    });
    let response = clients
        .origin
        .post(&swarm.plan.tracker_url)
        .timeout(TRACKER_TIMEOUT)
        .bearer_auth(&swarm.plan.secret)
        .json(&body)
        .send()
        .map_err(|error| error.to_string())?;
    let status = response.status();
    if !status.is_success() {
        let text = response.text().unwrap_or_default();
        return Err(format!("HTTP {status}: {text}"));
    }
    let reply: Reply = response.json().map_err(|error| error.to_string())?;
    let mut state = swarm.lock();
    let own_switch = swarm.plan.switch_id.as_deref();
    for view in reply.peers {
        let near = own_switch.is_some() && view.switch_id.as_deref() == own_switch;
        match state.peers.iter_mut().find(|peer| peer.id == view.peer) {
            Some(peer) => {
                peer.have = view.have;
                peer.url = view.url;
            }
            None => state.peers.push(Peer {
                id: view.peer,
                url: view.url.trim_end_matches('/').to_owned(),
                near,
                have: view.have,
                dropped: false,
                busy: 0,
            }),
        }
    }
    let count = state.have.len();
    for piece in reply.origin.into_iter().filter(|piece| *piece < count) {
        if !state.grants.contains(&piece) {
            state.grants.push(piece);
        }
    }
    swarm.changed.notify_all();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(pieces: usize, peers: Vec<Peer>) -> State {
        State {
            have: vec![false; pieces],
            in_flight: vec![false; pieces],
            origin_failures: vec![0; pieces],
            peers,
            ..State::default()
        }
    }

    fn peer(id: &str, near: bool, have: Vec<[usize; 2]>) -> Peer {
        Peer {
            id: id.into(),
            url: format!("http://{id}"),
            near,
            have,
            dropped: false,
            busy: 0,
        }
    }

    #[test]
    fn the_rarest_piece_comes_from_a_near_peer_first() {
        let mut state = state(
            3,
            vec![
                peer("far", false, vec![[0, 3]]),
                peer("near", true, vec![[0, 2]]),
            ],
        );
        // Piece 2 has one holder, the others two.
        assert_eq!(state.next_job(), Some((2, Source::Peer(0))));
        let (piece, source) = state.next_job().unwrap();
        assert!(piece < 2);
        assert_eq!(source, Source::Peer(1), "the near peer");
        // Nothing granted, nothing else held by a usable peer: wait.
        state.peers[1].busy = PER_PEER;
        state.peers[0].busy = PER_PEER;
        assert_eq!(state.next_job(), None);
    }

    #[test]
    fn pieces_only_dropped_peers_hold_come_from_the_conductor() {
        let mut state = state(3, vec![peer("gone", true, vec![[0, 2]])]);
        state.peers[0].dropped = true;
        assert_eq!(state.next_job(), Some((0, Source::Origin)));
        assert_eq!(state.next_job(), Some((1, Source::Origin)));
        // Nobody holds piece 2: it waits for a grant.
        assert_eq!(state.next_job(), None);
    }

    #[test]
    fn without_peers_pieces_come_from_grants_retries_or_a_lost_tracker() {
        let mut state = state(4, vec![]);
        assert_eq!(state.next_job(), None);
        state.grants = vec![3];
        state.retry = vec![1];
        assert_eq!(state.next_job(), Some((1, Source::Origin)));
        assert_eq!(state.next_job(), Some((3, Source::Origin)));
        assert_eq!(state.next_job(), None);
        state.tracker_down = true;
        assert_eq!(state.next_job(), Some((0, Source::Origin)));
        assert_eq!(state.next_job(), Some((2, Source::Origin)));
        assert_eq!(state.next_job(), None);
    }
}
