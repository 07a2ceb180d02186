//! Downloading an image: a reader thread reads the HTTP body in 1 MiB chunks, a hasher thread
//! hashes them and the caller writes the chunks hashed before to disk, so reading, hashing and
//! writing overlap (on as many CPUs as the machine has: hashing is the dearest step when the
//! CPU is emulated). Bounded channels (and recycled buffers) cap memory at about ten MiB
//! whatever the image size.
//! Each chunk sits at a page-aligned address of its buffer, so the caller can write it with
//! `O_DIRECT` (no copy into the page cache: the cheapest write when the CPU is the limit, as
//! under an emulated CPU).

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use sha2::Digest;

use crate::commands::CommandError;

/// Chunk size of the download and of raw writes.
pub const CHUNK: usize = 1024 * 1024;
/// Chunks in flight between the hasher and the disk.
const IN_FLIGHT: usize = 4;
/// Chunks in flight between the reader and the hasher.
const TO_HASH: usize = 2;
/// The alignment of a chunk's first byte in memory: `O_DIRECT` wants the logical block size
/// (512 or 4096); a page covers both.
pub const ALIGN: usize = 4096;

/// A piece of the image: `len` bytes at a page-aligned `start` of its buffer.
#[derive(Debug, Default)]
pub struct Chunk {
    buffer: Vec<u8>,
    start: usize,
    len: usize,
}

impl Chunk {
    /// An empty chunk with room for [`CHUNK`] bytes at a page-aligned address (the buffer is
    /// one page larger than that; the workspace forbids `unsafe`, so no aligned allocator).
    pub fn aligned() -> Chunk {
        let buffer = vec![0u8; CHUNK + ALIGN];
        let start = (ALIGN - buffer.as_ptr() as usize % ALIGN) % ALIGN;
        Chunk {
            buffer,
            start,
            len: 0,
        }
    }

    /// The chunk's whole room, [`CHUNK`] bytes from a page-aligned address, to fill.
    pub fn room(&mut self) -> &mut [u8] {
        &mut self.buffer[self.start..self.start + CHUNK]
    }

    /// The chunk's bytes from `at` on (a chunk put back after a partial read).
    fn split_from(mut self, at: usize) -> Chunk {
        self.start += at;
        self.len -= at;
        self
    }
}

impl std::ops::Deref for Chunk {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buffer[self.start..self.start + self.len]
    }
}

/// Where the download's time went (docs/benchmarks.md): the reader thread's wall and CPU time
/// reading the HTTP body (waiting for the network, the copies out of the HTTP client), the
/// hasher thread's in hashing.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProducerTimes {
    pub read_wall: Duration,
    pub read_cpu: Duration,
    pub hash_wall: Duration,
    pub hash_cpu: Duration,
}

/// This thread's CPU time so far (zero where the clock is missing).
pub fn thread_cpu() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

/// This process's CPU time so far, all threads (the HTTP client's runtime included).
pub fn process_cpu() -> Duration {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(now.tv_sec).unwrap_or(0),
        u32::try_from(now.tv_nsec).unwrap_or(0),
    )
}

/// A checksum algorithm Ironic may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Md5,
    Sha256,
    Sha512,
}

impl Algorithm {
    pub(crate) fn hasher(self) -> Box<dyn sha2::digest::DynDigest + Send> {
        match self {
            Algorithm::Md5 => Box::new(md5::Md5::new()),
            Algorithm::Sha256 => Box::new(sha2::Sha256::new()),
            Algorithm::Sha512 => Box::new(sha2::Sha512::new()),
        }
    }

    /// By the length of a hex digest: 32 → md5, 64 → sha256, 128 → sha512.
    fn by_length(hex: &str) -> Option<Algorithm> {
        match hex.len() {
            32 => Some(Algorithm::Md5),
            64 => Some(Algorithm::Sha256),
            128 => Some(Algorithm::Sha512),
            _ => None,
        }
    }
}

/// The checksum an image must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub algorithm: Algorithm,
    pub hex: String,
}

fn checksum_error(details: impl Into<String>) -> CommandError {
    CommandError::new(
        "ImageChecksumError",
        "Error verifying image checksum",
        details,
    )
}

/// Works out the expected checksum: `os_hash_algo` + `os_hash_value` first, else `checksum`
/// (a digest, or a URL of a checksums file), the algorithm by length; md5 only when allowed.
pub fn expected_checksum(
    http: &reqwest::blocking::Client,
    image_url: &str,
    os_hash_algo: Option<&str>,
    os_hash_value: Option<&str>,
    checksum: Option<&str>,
    md5_allowed: bool,
) -> Result<Expected, CommandError> {
    let expected = match (os_hash_algo, os_hash_value) {
        (Some(algo), Some(value)) if !value.is_empty() => {
            let algorithm = match algo.to_ascii_lowercase().as_str() {
                "sha256" => Algorithm::Sha256,
                "sha512" => Algorithm::Sha512,
                "md5" => Algorithm::Md5,
                other => {
                    return Err(checksum_error(format!(
                        "unsupported os_hash_algo {other:?}: use sha256 or sha512"
                    )));
                }
            };
            Expected {
                algorithm,
                hex: value.trim().to_ascii_lowercase(),
            }
        }
        _ => {
            let Some(checksum) = checksum.filter(|c| !c.is_empty()) else {
                return Err(checksum_error(
                    "image_info has no checksum: give os_hash_algo and os_hash_value (or checksum)",
                ));
            };
            let hex = if checksum.starts_with("http://") || checksum.starts_with("https://") {
                checksum_from_file(http, checksum, image_url)?
            } else {
                checksum.trim().to_ascii_lowercase()
            };
            let algorithm = Algorithm::by_length(&hex).ok_or_else(|| {
                checksum_error(format!(
                    "checksum {hex:?} is not a hex md5, sha256 or sha512 digest"
                ))
            })?;
            Expected { algorithm, hex }
        }
    };
    if !expected.hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(checksum_error(format!(
            "checksum {:?} is not hexadecimal",
            expected.hex
        )));
    }
    if expected.algorithm == Algorithm::Md5 && !md5_allowed {
        return Err(checksum_error(
            "md5 checksums are disabled: give a sha256 or sha512 checksum (or enable agent_md5_checksum_enable)",
        ));
    }
    Ok(expected)
}

/// Reads a checksums file (`<digest>  <file name>` lines, or one bare digest) and picks the
/// line of the image's file name.
fn checksum_from_file(
    http: &reqwest::blocking::Client,
    url: &str,
    image_url: &str,
) -> Result<String, CommandError> {
    let text = http
        .get(url)
        .send()
        .and_then(|response| response.error_for_status())
        .and_then(|response| response.text())
        .map_err(|error| checksum_error(format!("cannot read checksum file {url}: {error}")))?;
    let file_name = image_url.rsplit('/').next().unwrap_or(image_url);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if let [only] = lines.as_slice()
        && !only.contains(char::is_whitespace)
    {
        return Ok(only.to_ascii_lowercase());
    }
    lines
        .iter()
        .find_map(|line| {
            let mut words = line.split_whitespace();
            let digest = words.next()?;
            let name = words.next()?.trim_start_matches('*');
            (name == file_name || name.ends_with(&format!("/{file_name}")))
                .then(|| digest.to_ascii_lowercase())
        })
        .ok_or_else(|| checksum_error(format!("checksum file {url} has no line for {file_name}")))
}

/// The HTTP client for images: no overall timeout (images take minutes), but a connect one.
/// It trusts the system's roots plus `ca_file` (`ipa-cafile`: IPA verifies image servers with
/// the same CA options as the API) and sends `authorization` with every request; reqwest
/// drops that header when a download is redirected to another host.
pub fn http_client(
    ca_file: Option<&std::path::Path>,
    authorization: Option<&str>,
) -> Result<reqwest::blocking::Client, CommandError> {
    let mut builder = reqwest::blocking::Client::builder()
        .timeout(None)
        .connect_timeout(Duration::from_secs(30));
    if let Some(path) = ca_file {
        let pem = std::fs::read(path).map_err(|error| {
            CommandError::internal(format!(
                "cannot read the CA file {}: {error}",
                path.display()
            ))
        })?;
        for certificate in reqwest::Certificate::from_pem_bundle(&pem).map_err(|error| {
            CommandError::internal(format!(
                "the CA file {} is not PEM: {error}",
                path.display()
            ))
        })? {
            builder = builder.add_root_certificate(certificate);
        }
    }
    if let Some(authorization) = authorization {
        let mut value = reqwest::header::HeaderValue::from_str(authorization).map_err(|_| {
            CommandError::invalid_params(
                "image_info.image_request_authorization is not a valid header value",
            )
        })?;
        value.set_sensitive(true);
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::AUTHORIZATION, value);
        builder = builder.default_headers(headers);
    }
    builder
        .build()
        .map_err(|error| CommandError::internal(format!("cannot build an HTTP client: {error}")))
}

/// A download in progress.
#[derive(Debug)]
pub struct Download {
    pub url: String,
    /// `Content-Length`, when the server sent one.
    pub content_length: Option<u64>,
    /// Bytes received so far (shared with the reader thread).
    pub downloaded: Arc<AtomicU64>,
    chunks: Receiver<Chunk>,
    recycle: SyncSender<Chunk>,
    producer: Option<JoinHandle<io::Result<ProducerTimes>>>,
    hasher: Option<JoinHandle<(String, ProducerTimes)>>,
    current: Chunk,
    at: usize,
}

fn download_error(details: impl Into<String>) -> CommandError {
    CommandError::new("ImageDownloadError", "Error downloading image", details)
}

impl Download {
    /// Opens the first URL that answers 200 and starts the reader and hasher threads.
    pub fn start(
        http: &reqwest::blocking::Client,
        urls: &[String],
        algorithm: Algorithm,
    ) -> Result<Download, CommandError> {
        let mut failures = Vec::new();
        for url in urls {
            let response = match http.get(url).send() {
                Ok(response) if response.status().is_success() => response,
                Ok(response) => {
                    failures.push(format!("{url}: HTTP {}", response.status()));
                    continue;
                }
                Err(error) => {
                    failures.push(format!("{url}: {error}"));
                    continue;
                }
            };
            let content_length = response.content_length();
            let (read_sender, read_chunks) = sync_channel::<Chunk>(TO_HASH);
            let (chunk_sender, chunks) = sync_channel::<Chunk>(IN_FLIGHT);
            let (recycle, spare) = sync_channel::<Chunk>(TO_HASH + IN_FLIGHT + 3);
            let downloaded = Arc::new(AtomicU64::new(0));
            let counter = downloaded.clone();
            let producer = std::thread::Builder::new()
                .name("image-download".to_owned())
                .spawn(move || produce(response, read_sender, spare, counter))
                .map_err(|error| download_error(format!("cannot start the download: {error}")))?;
            // Should this fail, the reader stops at its first chunk (nobody receives it).
            let hasher = std::thread::Builder::new()
                .name("image-hash".to_owned())
                .spawn(move || hash_chunks(algorithm, read_chunks, chunk_sender))
                .map_err(|error| download_error(format!("cannot start the download: {error}")))?;
            return Ok(Download {
                url: url.clone(),
                content_length,
                downloaded,
                chunks,
                recycle,
                producer: Some(producer),
                hasher: Some(hasher),
                current: Chunk::default(),
                at: 0,
            });
        }
        Err(download_error(format!(
            "no image URL could be downloaded: {}",
            failures.join("; ")
        )))
    }

    /// The next chunk, or `None` at the end (or when the producer failed: see `finish`).
    pub fn next_chunk(&mut self) -> Option<Chunk> {
        if self.at < self.current.len() {
            let rest = std::mem::take(&mut self.current).split_from(self.at);
            self.at = 0;
            return Some(rest);
        }
        self.chunks.recv().ok()
    }

    /// Puts a chunk taken with `next_chunk` back in front of the stream.
    pub fn push_back(&mut self, chunk: Chunk) {
        self.current = chunk;
        self.at = 0;
    }

    /// Hands a buffer back to the producer to fill again.
    pub fn recycle(&self, chunk: Chunk) {
        if chunk.buffer.len() == CHUNK + ALIGN {
            let _ = self.recycle.try_send(chunk);
        }
    }

    /// Waits for the reader and the hasher: the hex digest of everything downloaded and
    /// where their time went, or the read error.
    pub fn finish(mut self) -> Result<(String, ProducerTimes), CommandError> {
        // Drain what the consumer left, so neither thread is blocked on a full channel.
        while self.chunks.recv().is_ok() {}
        let hashed = self.hasher.take().map(JoinHandle::join);
        let read = self.producer.take().map(JoinHandle::join);
        match (read, hashed) {
            (Some(Ok(Ok(read))), Some(Ok((digest, hashed)))) => Ok((
                digest,
                ProducerTimes {
                    read_wall: read.read_wall,
                    read_cpu: read.read_cpu,
                    ..hashed
                },
            )),
            (Some(Ok(Err(error))), _) => Err(download_error(format!(
                "reading {} failed: {error}",
                self.url
            ))),
            _ => Err(download_error("the download thread stopped unexpectedly")),
        }
    }
}

impl Read for Download {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.at >= self.current.len() {
            let Ok(chunk) = self.chunks.recv() else {
                return Ok(0);
            };
            let old = std::mem::replace(&mut self.current, chunk);
            self.recycle(old);
            self.at = 0;
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// The reader thread: the HTTP body into aligned chunks, to the hasher.
fn produce(
    mut response: reqwest::blocking::Response,
    chunks: SyncSender<Chunk>,
    spare: Receiver<Chunk>,
    downloaded: Arc<AtomicU64>,
) -> io::Result<ProducerTimes> {
    let mut times = ProducerTimes::default();
    loop {
        let mut chunk = spare.try_recv().unwrap_or_else(|_| Chunk::aligned());
        let (wall, cpu) = (Instant::now(), thread_cpu());
        let room = chunk.room();
        let mut filled = 0;
        while filled < CHUNK {
            match room.get_mut(filled..).map(|rest| response.read(rest)) {
                Some(Ok(0)) | None => break,
                Some(Ok(n)) => filled += n,
                Some(Err(error)) if error.kind() == io::ErrorKind::Interrupted => {}
                Some(Err(error)) => return Err(error),
            }
        }
        chunk.len = filled;
        times.read_wall += wall.elapsed();
        times.read_cpu += thread_cpu().saturating_sub(cpu);
        if filled == 0 {
            break;
        }
        downloaded.fetch_add(filled as u64, Ordering::Relaxed);
        if chunks.send(chunk).is_err() {
            // The consumer gave up (an error on its side); it reports that error.
            break;
        }
        if filled < CHUNK {
            break;
        }
    }
    Ok(times)
}

/// The hasher thread: every chunk the reader sends, in order, then on to the writer; the hex
/// digest when the reader is done.
fn hash_chunks(
    algorithm: Algorithm,
    read: Receiver<Chunk>,
    hashed: SyncSender<Chunk>,
) -> (String, ProducerTimes) {
    let mut hasher = algorithm.hasher();
    let mut times = ProducerTimes::default();
    for chunk in read.iter() {
        let (wall, cpu) = (Instant::now(), thread_cpu());
        hasher.update(&chunk);
        times.hash_wall += wall.elapsed();
        times.hash_cpu += thread_cpu().saturating_sub(cpu);
        if hashed.send(chunk).is_err() {
            // The consumer gave up; dropping `read` stops the reader.
            break;
        }
    }
    let digest = hasher.finalize();
    (
        digest.iter().map(|byte| format!("{byte:02x}")).collect(),
        times,
    )
}

/// Reads `[offset, offset + len)` of `url` with an HTTP range request.
pub fn fetch_range(
    http: &reqwest::blocking::Client,
    url: &str,
    offset: u64,
    len: u64,
) -> io::Result<Vec<u8>> {
    let response = http
        .get(url)
        .header(
            reqwest::header::RANGE,
            format!("bytes={offset}-{}", offset + len - 1),
        )
        .send()
        .map_err(io::Error::other)?;
    if response.status() != reqwest::StatusCode::PARTIAL_CONTENT {
        return Err(io::Error::other(format!(
            "{url} answered {} to a range request; this qcow2 layout needs a server with range support",
            response.status()
        )));
    }
    let mut body = Vec::with_capacity(len as usize);
    response.take(len).read_to_end(&mut body)?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_are_page_aligned_and_split_in_place() {
        let mut chunk = Chunk::aligned();
        assert_eq!(chunk.room().as_ptr() as usize % ALIGN, 0);
        assert_eq!(chunk.room().len(), CHUNK);
        chunk.room()[..5].copy_from_slice(b"hello");
        chunk.len = 5;
        assert_eq!(&*chunk, b"hello");
        let rest = chunk.split_from(2);
        assert_eq!(&*rest, b"llo");
        assert!(Chunk::default().is_empty());
    }

    #[test]
    fn algorithms_follow_ironics_rules() {
        let http = reqwest::blocking::Client::new();
        let sha = "a".repeat(64);
        let picked = expected_checksum(
            &http,
            "u",
            Some("sha512"),
            Some(&"B".repeat(128)),
            None,
            false,
        )
        .expect("os_hash");
        assert_eq!(picked.algorithm, Algorithm::Sha512);
        assert_eq!(picked.hex, "b".repeat(128));
        let legacy = expected_checksum(&http, "u", None, None, Some(&sha), false).expect("legacy");
        assert_eq!(legacy.algorithm, Algorithm::Sha256);
        let md5 = "c".repeat(32);
        assert!(expected_checksum(&http, "u", None, None, Some(&md5), false).is_err());
        assert!(expected_checksum(&http, "u", None, None, Some(&md5), true).is_ok());
        assert!(expected_checksum(&http, "u", None, None, None, true).is_err());
        assert!(expected_checksum(&http, "u", Some("crc32"), Some("00"), None, true).is_err());
        assert!(expected_checksum(&http, "u", None, None, Some(&"z".repeat(64)), true).is_err());
    }
}
