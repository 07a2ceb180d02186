//! The machines of `cargo xtask bench-fleet-deploy` (`fleet_deploy.rs`): each a fixture /sys
//! and /proc as `crates/ferric/tests/agent.rs` makes them, a sparse file as its disk, and a
//! `ferric-agent` process in its namespace; the image they deploy; an agent's peak RSS.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::Context;

use super::rack::{self, AGENT_PORT, API_URL};

/// One machine, by its index in the rack.
#[derive(Debug, Clone)]
pub(super) struct Machine {
    pub(super) index: usize,
    dir: PathBuf,
}

impl Machine {
    /// The fixture under `run_dir/machines/<index>/` and an empty disk of `disk_bytes`.
    pub(super) fn create(run_dir: &Path, index: usize, disk_bytes: u64) -> anyhow::Result<Self> {
        let machine = Self {
            index,
            dir: run_dir.join("machines").join(index.to_string()),
        };
        let nic = machine.dir.join("sys/class/net/eth0");
        let dmi = machine.dir.join("sys/class/dmi/id");
        let proc = machine.dir.join("proc");
        write(
            &nic.join("address"),
            &format!("{}\n", rack::agent_mac(index)),
        )?;
        write(&nic.join("carrier"), "1\n")?;
        write(&nic.join("device/vendor"), "0x1af4\n")?;
        write(&dmi.join("sys_vendor"), "QEMU\n")?;
        write(&dmi.join("product_serial"), &format!("ffb-{index:04}\n"))?;
        write(
            &proc.join("cpuinfo"),
            "processor\t: 0\nmodel name\t: Test CPU\ncpu MHz\t\t: 2400.000\nflags\t\t: sse2\n\n",
        )?;
        write(&proc.join("meminfo"), "MemTotal:        2048000 kB\n")?;
        write(&proc.join("sys/kernel/hostname"), "ramdisk\n")?;
        machine.wipe_disk(disk_bytes)?;
        Ok(machine)
    }

    pub(super) fn disk(&self) -> PathBuf {
        self.dir.join("disk.img")
    }

    /// An empty sparse disk: made at the start and again after each phase, so every phase
    /// writes onto fresh blocks and the run never holds more than one image per machine.
    pub(super) fn wipe_disk(&self, disk_bytes: u64) -> anyhow::Result<()> {
        let disk = self.disk();
        let file = File::create(&disk).with_context(|| format!("create {}", disk.display()))?;
        file.set_len(disk_bytes)?;
        Ok(())
    }

    /// The agent's log: every phase's start appends to it.
    pub(super) fn log(&self, run_dir: &Path) -> PathBuf {
        run_dir.join(format!("agent-{}.log", self.index))
    }

    /// `binary` (ferric-agent) in the machine's namespace. `--dry-power`: it never powers off
    /// or reboots the host; and its network data is a file that does not exist, so it
    /// configures no address either.
    pub(super) fn start_agent(&self, binary: &Path, run_dir: &Path) -> anyhow::Result<Child> {
        let log_path = self.log(run_dir);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .with_context(|| format!("open {}", log_path.display()))?;
        let address = rack::agent_ip(self.index);
        let listen = format!("{address}:{AGENT_PORT}");
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &rack::agent_namespace(self.index)])
            .arg(binary)
            .args(["--api-url", API_URL, "--advertise-host", &address])
            .args(["--listen", &listen, "--dry-power", "--disk"])
            .arg(self.disk())
            .arg("--sys-root")
            .arg(self.dir.join("sys"))
            .arg("--proc-root")
            .arg(self.dir.join("proc"))
            .arg("--network-data")
            .arg(self.dir.join("network_data.json"));
        without_ferric_env(&mut command)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))
    }
}

fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, text).with_context(|| format!("write {}", path.display()))
}

/// `command` without this shell's `FERRIC_*` variables: the bench's settings are all it gets
/// (the agent reads `FERRIC_AGENT_TOKEN` too).
pub(super) fn without_ferric_env(command: &mut Command) -> &mut Command {
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("FERRIC_") {
            command.env_remove(name);
        }
    }
    command
}

/// `bytes` of xorshift output: incompressible, and no block of zeros to skip.
pub(super) fn write_image(path: &Path, bytes: u64) -> anyhow::Result<()> {
    const CHUNK: u64 = 4 << 20;
    let mut file = File::create(path).with_context(|| format!("create {}", path.display()))?;
    let mut chunk = vec![0u8; usize::try_from(CHUNK)?];
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut left = bytes;
    while left > 0 {
        for word in chunk.chunks_exact_mut(8) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            word.copy_from_slice(&state.to_le_bytes());
        }
        let length = left.min(CHUNK);
        file.write_all(&chunk[..usize::try_from(length)?])?;
        left -= length;
    }
    Ok(())
}

pub(super) fn sha256(path: &Path) -> anyhow::Result<String> {
    let text = rack::output("sha256sum", &[&path.to_string_lossy()])?;
    text.split_whitespace()
        .next()
        .map(str::to_owned)
        .context("sha256sum printed nothing")
}

/// User and system CPU time, in clock ticks, from `/proc/<pid>/stat` (fields 14 and 15,
/// counted after the command name, which may hold spaces, in parentheses).
pub(super) fn cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // After the name come field 3 (state) on: utime is field 14, stime field 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// VmHWM (the peak resident set) from `/proc/<pid>/status`, in KiB.
pub(super) fn peak_rss_kib(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_from_proc_stat() {
        let stat = "4242 (ferric agent) S 1 4242 4242 0 -1 4194560 500 0 0 0 250 75 0 0 20 0 9";
        assert_eq!(cpu_ticks(stat), Some(325));
        assert_eq!(cpu_ticks("garbage"), None);
    }

    #[test]
    fn the_peak_rss_is_read_from_proc() {
        let status = "Name:\tferric-agent\nVmPeak:\t  9000 kB\nVmHWM:\t   12345 kB\n";
        assert_eq!(peak_rss_kib(status), Some(12_345));
        assert_eq!(peak_rss_kib("Name:\tzombie\n"), None);
    }

    #[test]
    fn the_image_is_incompressible_and_exactly_sized() {
        let dir = std::env::temp_dir().join(format!("ffb-image-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("image");
        let size = (5 << 20) + 4096;
        write_image(&path, size).expect("image");
        let data = std::fs::read(&path).expect("read");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(data.len() as u64, size);
        assert!(data[..4096].iter().any(|&byte| byte != 0));
        let chunk = 4 << 20;
        assert_ne!(data[..4096], data[chunk..chunk + 4096]);
    }
}
