//! `ferric-agent-bench`: how fast the agent writes a raw and a qcow2 image to a file-backed
//! disk, next to `dd` writing the same bytes to the same disk with the same durability (one
//! fsync at the end), and the agent's peak RSS. Run it with `cargo xtask bench-agent-write`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use serde_json::{Value, json};
use sha2::Digest;

/// Benchmark the agent's image writes against dd.
#[derive(Debug, Parser)]
#[command(name = "ferric-agent-bench")]
struct Args {
    /// Image size in MiB.
    #[arg(long, default_value_t = 2048)]
    size_mib: u64,
    /// Directory for the image, the disk file and the qcow2 copy (needs ~3× the size free).
    #[arg(long, default_value = "/var/tmp")]
    dir: PathBuf,
    /// The agent binary (default: ferric-agent beside this program).
    #[arg(long)]
    agent: Option<PathBuf>,
}

const MIB: usize = 1024 * 1024;
const TOKEN: &str = "benchmark-token-benchmark-token-benchmark";

/// Kills the agent when the benchmark ends, however it ends.
struct Agent(Child);

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Patterned, incompressible-looking data with one zero MiB in eight (as real images have).
fn make_image(path: &Path, size_mib: u64) -> anyhow::Result<String> {
    use std::io::Write;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut hasher = sha2::Sha256::new();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut block = vec![0u8; MIB];
    for index in 0..size_mib {
        if index % 8 == 3 {
            block.fill(0);
        } else {
            for word in block.chunks_exact_mut(8) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                word.copy_from_slice(&state.to_le_bytes());
            }
        }
        hasher.update(&block);
        file.write_all(&block)?;
    }
    file.flush()?;
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let mut hasher = sha2::Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(hex(&hasher.finalize()))
}

/// A fresh sparse disk of `size` bytes (so every run writes to unallocated blocks).
fn fresh_disk(path: &Path, size: u64) -> anyhow::Result<()> {
    let _ = std::fs::remove_file(path);
    std::fs::File::create(path)?.set_len(size)?;
    rustix::fs::sync();
    Ok(())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Serves `dir` over HTTP on a thread of its own.
fn serve(dir: PathBuf) -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    listener.set_nonblocking(true)?;
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            let app =
                axum::Router::new().fallback_service(tower_http::services::ServeDir::new(dir));
            let _ = axum::serve(listener, app).await;
        });
    });
    Ok(port)
}

fn peak_rss_kib(pid: u32) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmHWM in /proc/PID/status")
}

/// Resets the kernel's peak-RSS counter of `pid` (write "5" to clear_refs).
fn reset_peak_rss(pid: u32) {
    let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
}

fn agent_write(
    http: &reqwest::blocking::Client,
    agent_port: u16,
    url: &str,
    format: &str,
    checksum: &str,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let result: Value = http
        .post(format!("http://127.0.0.1:{agent_port}/v1/commands/"))
        .query(&[("agent_token", TOKEN), ("wait", "true")])
        .json(
            &json!({"name": "standby.prepare_image", "params": {"image_info": {
                "id": format!("bench-{format}"),
                "urls": [url],
                "disk_format": format,
                "os_hash_algo": "sha256",
                "os_hash_value": checksum,
            }}}),
        )
        .send()?
        .json()?;
    let elapsed = started.elapsed();
    if result["command_status"] != "SUCCEEDED" {
        bail!("the agent failed: {result:#}");
    }
    Ok(elapsed)
}

fn dd(image: &Path, disk: &Path) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let status = Command::new("dd")
        .arg(format!("if={}", image.display()))
        .arg(format!("of={}", disk.display()))
        .args(["bs=1M", "conv=fsync,notrunc", "status=none"])
        .status()
        .context("run dd")?;
    if !status.success() {
        bail!("dd failed: {status}");
    }
    Ok(started.elapsed())
}

fn rate(bytes: u64, time: Duration) -> f64 {
    bytes as f64 / MIB as f64 / time.as_secs_f64()
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let work = tempfile::Builder::new()
        .prefix("ferric-agent-bench-")
        .tempdir_in(&args.dir)
        .with_context(|| format!("cannot make a directory in {}", args.dir.display()))?;
    let images = work.path().join("images");
    std::fs::create_dir(&images)?;
    let raw = images.join("image.raw");
    let qcow2 = images.join("image.qcow2");
    let disk = work.path().join("disk.img");
    let bytes = args.size_mib * MIB as u64;
    // At least 4 GiB, so the agent picks it as root disk without hints.
    let disk_size = (bytes + 256 * MIB as u64).max(4 << 30);

    eprintln!(
        "bench: making a {} MiB image in {}",
        args.size_mib,
        work.path().display()
    );
    let raw_sha = make_image(&raw, args.size_mib)?;
    let status = Command::new("qemu-img")
        .args(["convert", "-q", "-f", "raw", "-O", "qcow2"])
        .arg(&raw)
        .arg(&qcow2)
        .status()
        .context("qemu-img (install qemu-utils)")?;
    if !status.success() {
        bail!("qemu-img convert failed");
    }
    let qcow2_sha = sha256_file(&qcow2)?;
    let qcow2_bytes = std::fs::metadata(&qcow2)?.len();

    let agent_path = match args.agent {
        Some(path) => path,
        None => std::env::current_exe()?
            .parent()
            .context("no directory")?
            .join("ferric-agent"),
    };
    let server_port = serve(images.clone())?;
    let agent_port = free_port()?;
    let child = Command::new(&agent_path)
        .args(["--standalone", "--dry-power", "--agent-token", TOKEN])
        .args(["--listen", &format!("127.0.0.1:{agent_port}")])
        .arg("--disk")
        .arg(&disk)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .with_context(|| format!("start {}", agent_path.display()))?;
    let agent = Agent(child);
    let pid = agent.0.id();
    let http = reqwest::blocking::Client::builder().timeout(None).build()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while http
        .get(format!("http://127.0.0.1:{agent_port}/v1/status"))
        .send()
        .is_err()
    {
        if Instant::now() > deadline {
            bail!("the agent did not start");
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    let url = |name: &str| format!("http://127.0.0.1:{server_port}/{name}");
    // Warm the page cache for the image files, so neither side pays for reading them.
    sha256_file(&raw)?;

    let mut rows = Vec::new();
    for round in 0..2 {
        fresh_disk(&disk, disk_size)?;
        let dd_raw = dd(&raw, &disk)?;
        fresh_disk(&disk, disk_size)?;
        reset_peak_rss(pid);
        let agent_raw = agent_write(&http, agent_port, &url("image.raw"), "raw", &raw_sha)?;
        let raw_rss = peak_rss_kib(pid)?;
        fresh_disk(&disk, disk_size)?;
        reset_peak_rss(pid);
        let agent_qcow2 = agent_write(&http, agent_port, &url("image.qcow2"), "qcow2", &qcow2_sha)?;
        let qcow2_rss = peak_rss_kib(pid)?;
        if round == 1 {
            // The disk holds the image followed by zeros: check the image part.
            let mut hasher = sha2::Sha256::new();
            std::io::copy(
                &mut std::io::Read::take(std::fs::File::open(&disk)?, bytes),
                &mut hasher,
            )?;
            if hex(&hasher.finalize()) != raw_sha {
                bail!("the disk does not hold the image after the qcow2 write");
            }
        }
        rows.push((dd_raw, agent_raw, raw_rss, agent_qcow2, qcow2_rss));
    }
    drop(agent);

    println!(
        "ferric-agent write benchmark: {} MiB image (qcow2 file {:.0} MiB), file-backed disk, fsync at the end",
        args.size_mib,
        qcow2_bytes as f64 / MIB as f64
    );
    println!(
        "round  dd raw MiB/s  agent raw MiB/s  raw/dd  agent qcow2 MiB/s  qcow2/dd  peak RSS raw  peak RSS qcow2"
    );
    for (round, (dd_raw, agent_raw, raw_rss, agent_qcow2, qcow2_rss)) in rows.iter().enumerate() {
        let dd_rate = rate(bytes, *dd_raw);
        let raw_rate = rate(bytes, *agent_raw);
        let qcow2_rate = rate(bytes, *agent_qcow2);
        println!(
            "{:>5}  {:>12.0}  {:>15.0}  {:>5.0}%  {:>17.0}  {:>7.0}%  {:>9.1} MiB  {:>11.1} MiB",
            round + 1,
            dd_rate,
            raw_rate,
            100.0 * raw_rate / dd_rate,
            qcow2_rate,
            100.0 * qcow2_rate / dd_rate,
            *raw_rss as f64 / 1024.0,
            *qcow2_rss as f64 / 1024.0,
        );
    }
    Ok(())
}
