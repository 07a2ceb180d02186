//! Downloading an image: a producer thread reads the HTTP body in 1 MiB chunks and hashes
//! them while the caller writes the previous chunks to disk, so hashing and writing overlap.
//! A bounded channel (and recycled buffers) caps memory at a few MiB whatever the image size.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::Digest;

use crate::commands::CommandError;

/// Chunk size of the download and of raw writes.
pub const CHUNK: usize = 1024 * 1024;
/// Chunks in flight between the download and the disk.
const IN_FLIGHT: usize = 4;

/// A checksum algorithm Ironic may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Md5,
    Sha256,
    Sha512,
}

impl Algorithm {
    fn hasher(self) -> Box<dyn sha2::digest::DynDigest + Send> {
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
pub fn http_client() -> Result<reqwest::blocking::Client, CommandError> {
    reqwest::blocking::Client::builder()
        .timeout(None)
        .connect_timeout(Duration::from_secs(30))
        .build()
        .map_err(|error| CommandError::internal(format!("cannot build an HTTP client: {error}")))
}

/// A download in progress.
#[derive(Debug)]
pub struct Download {
    pub url: String,
    /// `Content-Length`, when the server sent one.
    pub content_length: Option<u64>,
    /// Bytes received so far (shared with the producer thread).
    pub downloaded: Arc<AtomicU64>,
    chunks: Receiver<Vec<u8>>,
    recycle: SyncSender<Vec<u8>>,
    producer: Option<JoinHandle<io::Result<String>>>,
    current: Vec<u8>,
    at: usize,
}

fn download_error(details: impl Into<String>) -> CommandError {
    CommandError::new("ImageDownloadError", "Error downloading image", details)
}

impl Download {
    /// Opens the first URL that answers 200 and starts the producer thread.
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
            let (chunk_sender, chunks) = sync_channel::<Vec<u8>>(IN_FLIGHT);
            let (recycle, spare) = sync_channel::<Vec<u8>>(IN_FLIGHT + 2);
            let downloaded = Arc::new(AtomicU64::new(0));
            let counter = downloaded.clone();
            let producer = std::thread::Builder::new()
                .name("image-download".to_owned())
                .spawn(move || produce(response, algorithm, chunk_sender, spare, counter))
                .map_err(|error| download_error(format!("cannot start the download: {error}")))?;
            return Ok(Download {
                url: url.clone(),
                content_length,
                downloaded,
                chunks,
                recycle,
                producer: Some(producer),
                current: Vec::new(),
                at: 0,
            });
        }
        Err(download_error(format!(
            "no image URL could be downloaded: {}",
            failures.join("; ")
        )))
    }

    /// The next chunk, or `None` at the end (or when the producer failed: see `finish`).
    pub fn next_chunk(&mut self) -> Option<Vec<u8>> {
        if self.at < self.current.len() {
            let rest = self.current.split_off(self.at);
            self.at = 0;
            self.current.clear();
            return Some(rest);
        }
        self.chunks.recv().ok()
    }

    /// Puts a chunk taken with `next_chunk` back in front of the stream.
    pub fn push_back(&mut self, chunk: Vec<u8>) {
        self.current = chunk;
        self.at = 0;
    }

    /// Hands a buffer back to the producer to fill again.
    pub fn recycle(&self, mut buffer: Vec<u8>) {
        buffer.clear();
        let _ = self.recycle.try_send(buffer);
    }

    /// Waits for the producer: the hex digest of everything downloaded, or the read error.
    pub fn finish(mut self) -> Result<String, CommandError> {
        // Drain what the consumer left, so the producer is never blocked on a full channel.
        while self.chunks.recv().is_ok() {}
        let producer = self.producer.take();
        match producer.map(JoinHandle::join) {
            Some(Ok(Ok(digest))) => Ok(digest),
            Some(Ok(Err(error))) => Err(download_error(format!(
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
            if old.capacity() > 0 {
                self.recycle(old);
            }
            self.at = 0;
        }
        let n = buf.len().min(self.current.len() - self.at);
        buf[..n].copy_from_slice(&self.current[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

fn produce(
    mut response: reqwest::blocking::Response,
    algorithm: Algorithm,
    chunks: SyncSender<Vec<u8>>,
    spare: Receiver<Vec<u8>>,
    downloaded: Arc<AtomicU64>,
) -> io::Result<String> {
    let mut hasher = algorithm.hasher();
    loop {
        let mut buffer = spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(CHUNK));
        buffer.resize(CHUNK, 0);
        let mut filled = 0;
        while filled < CHUNK {
            match response.read(&mut buffer[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
        buffer.truncate(filled);
        if filled == 0 {
            break;
        }
        hasher.update(&buffer);
        downloaded.fetch_add(filled as u64, Ordering::Relaxed);
        if chunks.send(buffer).is_err() {
            // The consumer gave up (an error on its side); it reports that error.
            break;
        }
        if filled < CHUNK {
            break;
        }
    }
    let digest = hasher.finalize();
    Ok(digest.iter().map(|byte| format!("{byte:02x}")).collect())
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
