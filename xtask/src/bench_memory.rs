//! The memory side of `cargo xtask bench-api` (issue 26): the server's resident memory read
//! from `/proc/<pid>/status` (split into anonymous and file-backed pages, since the binary's
//! own code is ~16 MB of file-backed RSS that no allocator setting can shrink) and a sampler of
//! its peak. The fleet cycle `bench-api` runs before its last idle figure is bench-compare's
//! (`compare::fleet_of`).
//!
//! Theory of operation: plain threads with their own keep-alive connection (`ureq`), as in
//! `bench.rs`. Every figure is printed as it is measured; nothing here asserts a size, since
//! resident memory depends on the machine, the allocator and the load.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use anyhow::Context;

/// The resident memory of one process, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Rss {
    /// `VmRSS`, bytes.
    pub(crate) total: u64,
    /// `RssAnon`, bytes: the heap, stacks and caches.
    pub(crate) anon: u64,
    /// `RssFile`, bytes: mostly the binary's own code.
    pub(crate) file: u64,
}

impl Rss {
    pub(crate) fn of(pid: u32) -> anyhow::Result<Self> {
        let path = format!("/proc/{pid}/status");
        let status =
            std::fs::read_to_string(&path).with_context(|| format!("cannot read {path}"))?;
        Ok(Self::parse(&status))
    }

    fn parse(status: &str) -> Self {
        let field = |name: &str| -> u64 {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name))
                .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
                .map_or(0, |kib: u64| kib * 1024)
        };
        Self {
            total: field("VmRSS:"),
            anon: field("RssAnon:"),
            file: field("RssFile:"),
        }
    }

    /// Prints `RSS <what>: 63.2 MB (anon 45.1, file 18.0)`.
    pub(crate) fn print(&self, what: &str) {
        println!(
            "  RSS {what}: {:.1} MB (anon {:.1}, file {:.1})",
            mb(self.total),
            mb(self.anon),
            mb(self.file)
        );
    }
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// Waits `seconds` with the server left alone, then prints its RSS as `idle <what>`.
pub(crate) fn idle(pid: u32, seconds: u64, what: &str) -> anyhow::Result<Rss> {
    thread::sleep(Duration::from_secs(seconds));
    let rss = Rss::of(pid)?;
    rss.print(&format!("idle {what} ({seconds} s after)"));
    Ok(rss)
}

/// Samples a process's resident memory every 100 ms and keeps the peak.
pub(crate) struct PeakSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<thread::JoinHandle<()>>,
}

impl PeakSampler {
    pub(crate) fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(rss) = Rss::of(pid) {
                        peak.fetch_max(rss.total, Ordering::Relaxed);
                    }
                    thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Self {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    /// The peak so far, in bytes.
    pub(crate) fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for PeakSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_resident_memory_from_proc_status() {
        let status = "Name:\tferric\nVmRSS:\t   65432 kB\nRssAnon:\t   40000 kB\n\
                      RssFile:\t   25000 kB\nRssShmem:\t     432 kB\n";
        let rss = Rss::parse(status);
        assert_eq!(rss.total, 65_432 * 1024);
        assert_eq!(rss.anon, 40_000 * 1024);
        assert_eq!(rss.file, 25_000 * 1024);
        assert_eq!(Rss::parse("Name:\tx\n"), Rss::default());
        // Our own process has resident memory.
        assert!(Rss::of(std::process::id()).unwrap().total > 0);
    }
}
