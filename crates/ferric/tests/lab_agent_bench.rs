//! Benchmark, not a test: the agent's image write against `dd` on the same virtual disk of a
//! lab machine (issue 26). Run by `cargo xtask bench-agent-lab` (xtask/src/agentlab.rs, which
//! builds the agent and passes the settings below); never part of CI, but built and linted
//! with the lab suites (`--features lab-e2e`; `test = false` keeps it out of `cargo test`).
//!
//! One lab machine (UEFI, virtio disks of 4 GiB, `FERRIC_BENCH_MEMORY` MiB) enrolled over
//! Redfish with fast track, `properties.root_device = /dev/vda` and `ferric.shell=1` on the
//! ramdisk's kernel command line (a root shell on the serial console beside the agent). Then:
//! 1. manage + inspect: the agent stays up (fast track);
//! 2. `dd` typed into that shell through the machine's serial port (`console.sock`, QEMU's
//!    socket back-end; the answers read from `console.log`), each writing
//!    `FERRIC_BENCH_SIZE_MIB` MiB to `/dev/vda`: from `/dev/zero` with `oflag=direct`, from
//!    `/dev/zero` buffered with `conv=fsync` (what the agent does: buffered writes, one flush
//!    at the end), and the raw image itself fetched by busybox `wget` into `dd conv=fsync`
//!    (the network + disk path with no checksum);
//! 3. provide (no automated clean) and deploy the raw image (random bytes, so nothing is
//!    sparse or compressible) through the running agent; undeploy; deploy the same bytes as
//!    qcow2 (`qemu-img convert`, every cluster allocated), which boots the ramdisk again.
//!
//! The agent's figures are its own: the `image written and verified` line it logs on the
//! console carries `seconds` (first image request to the final flush), `mib_per_s` and
//! `peak_rss_kib` (its VmHWM, reset when the write starts). Prints one table.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use ferric_testkit::lab::{self, API, Client, Lab, enroll_machine, run};
use serde_json::{Value, json};

const SUITE: &str = "lab_agent_bench";
const NAMESPACE: &str = "ferric-agent-bench";
/// The disk both `dd` and the agent write (the node's root device hint).
const DISK: &str = "/dev/vda";
const MACHINE: &str = "node-0";

fn main() -> ExitCode {
    lab::main(SUITE, outside, inside)
}

/// The benchmark's settings, from the environment `cargo xtask bench-agent-lab` sets.
struct Settings {
    size_mib: u64,
    memory_mib: u64,
}

fn settings() -> anyhow::Result<Settings> {
    let number = |name: &str, default: u64| -> anyhow::Result<u64> {
        match std::env::var(name) {
            Ok(text) => text
                .parse()
                .with_context(|| format!("{name}={text:?} is not a number")),
            Err(_) => Ok(default),
        }
    };
    let settings = Settings {
        size_mib: number("FERRIC_BENCH_SIZE_MIB", 1024)?,
        memory_mib: number("FERRIC_BENCH_MEMORY", 1024)?,
    };
    // The disk is 4 GiB; the qcow2 image adds its tables.
    ensure!(
        (16..=3072).contains(&settings.size_mib),
        "FERRIC_BENCH_SIZE_MIB must be 16..=3072 (the lab's disks are 4 GiB)"
    );
    Ok(settings)
}

fn lab_at(dir: &Path) -> Lab {
    Lab::at(
        SUITE,
        NAMESPACE,
        dir.to_path_buf(),
        env!("CARGO_BIN_EXE_ferric"),
    )
}

/// Builds the ramdisk and the images, brings up a one-machine lab and runs the benchmark
/// inside its namespace.
fn outside() -> anyhow::Result<()> {
    check_parsers()?;
    let settings = settings()?;
    let lab = Lab::new(
        SUITE,
        NAMESPACE,
        "ferric-agent-bench",
        env!("CARGO_BIN_EXE_ferric"),
    );
    lab.outside("server.log, lab/node-0/console.log, lab/bmc.log", || {
        let started = Instant::now();
        lab.build_ramdisk()?;
        lab.phase("ramdisk", started);
        let started = Instant::now();
        build_images(&lab.dir, settings.size_mib)?;
        lab.phase("images (random raw + qcow2)", started);
        let memory = settings.memory_mib.to_string();
        lab.up(&["--nodes", "1", "--memory", &memory])?;
        lab.run_inside()
    })
}

/// `boot/images/bench.raw` (`size_mib` MiB of pseudo-random bytes: nothing sparse, nothing
/// compressible) and `bench.qcow2` of the same bytes, each with its `.sha256` beside it.
fn build_images(dir: &Path, size_mib: u64) -> anyhow::Result<()> {
    let images = dir.join("boot/images");
    let raw = images.join("bench.raw");
    {
        let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&raw)?);
        // xorshift64*: fast, and incompressible enough for HTTP and qcow2.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15 ^ u64::from(std::process::id());
        let mut block = vec![0u8; 1 << 20];
        for _ in 0..size_mib {
            for word in block.chunks_exact_mut(8) {
                state ^= state >> 12;
                state ^= state << 25;
                state ^= state >> 27;
                word.copy_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
            }
            out.write_all(&block)?;
        }
        out.flush()?;
    }
    let qcow2 = images.join("bench.qcow2");
    run(
        Command::new("qemu-img")
            .args(["convert", "-f", "raw", "-O", "qcow2"])
            .arg(&raw)
            .arg(&qcow2),
        "qemu-img convert",
    )?;
    for image in [&raw, &qcow2] {
        let sum = run(Command::new("sha256sum").arg(image), "sha256sum")?;
        let digest = sum.split_whitespace().next().context("sha256sum")?;
        std::fs::write(format!("{}.sha256", image.display()), digest)?;
    }
    Ok(())
}

fn digest(dir: &Path, name: &str) -> anyhow::Result<String> {
    let path = dir.join("boot/images").join(format!("{name}.sha256"));
    Ok(std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?
        .trim()
        .to_owned())
}

fn image_info(dir: &Path, name: &str, format: &str) -> anyhow::Result<Value> {
    Ok(json!({
        "image_source": name,
        "image_disk_format": format,
        "image_os_hash_algo": "sha256",
        "image_os_hash_value": digest(dir, name)?,
    }))
}

/// One measured write: what wrote, bytes, seconds.
struct Figure {
    what: String,
    bytes: u64,
    seconds: f64,
    peak_rss_kib: Option<u64>,
}

impl Figure {
    fn mib_per_s(&self) -> f64 {
        self.bytes as f64 / 1_048_576.0 / self.seconds.max(1e-9)
    }
}

/// The benchmark, run inside the lab's namespace.
fn inside(dir: &Path) -> anyhow::Result<()> {
    let settings = settings()?;
    let lab = lab_at(dir);
    // A 1 GiB write under TCG can take minutes.
    let client = Client::new(
        SUITE,
        API,
        Duration::from_secs(60),
        Duration::from_secs(1200),
    )?;
    let mut command = lab.server_command();
    command
        .env("FERRIC_DHCP_HOSTSDIR", dir.join("lab/dhcp-hosts"))
        .env("FERRIC_AUTOMATED_CLEAN", "false")
        .env("FERRIC_CHECK_PROVISION_STATE_INTERVAL", "5");
    let _server = lab.server(command, &client)?;
    let machines = lab.machines()?;
    let machine = machines.first().context("no machine")?;
    let uuid = enroll_machine(
        &client,
        machine,
        json!({
            "inspect_interface": "agent",
            "driver_info": {"fast_track": true, "kernel_append_params": "ferric.shell=1"},
            "properties": {"root_device": {"name": DISK}},
            "instance_info": image_info(dir, "bench.raw", "raw")?,
        }),
    )?;

    let started = Instant::now();
    client.provision(&uuid, json!({"target": "manage"}))?;
    client.wait_for(&uuid, "manageable")?;
    client.provision(&uuid, json!({"target": "inspect"}))?;
    client.wait_for(&uuid, "manageable")?;
    client.wait_for_heartbeat(&uuid, None)?;
    lab.phase("manage + inspect (the agent stays up)", started);

    let console = Console::connect(&lab)?;
    console.wait_for_shell()?;
    let size = settings.size_mib;
    let bytes = size << 20;
    let mut figures = Vec::new();
    let image_url = "http://10.231.0.1:8080/images/bench.raw";
    for (what, command) in [
        (
            "dd /dev/zero, oflag=direct",
            format!("dd if=/dev/zero of={DISK} bs=1M count={size} oflag=direct"),
        ),
        (
            "dd /dev/zero, buffered + conv=fsync",
            format!("dd if=/dev/zero of={DISK} bs=1M count={size} conv=fsync"),
        ),
        (
            "wget image | dd conv=fsync",
            format!("wget -q -O - {image_url} | dd of={DISK} bs=1M iflag=fullblock conv=fsync"),
        ),
        (
            "wget image | dd oflag=direct",
            format!("wget -q -O - {image_url} | dd of={DISK} bs=1M iflag=fullblock oflag=direct"),
        ),
    ] {
        let started = Instant::now();
        let (written, seconds) = console.dd(&command)?;
        ensure!(
            written == bytes,
            "{what}: dd wrote {written} bytes, not {bytes}"
        );
        lab.phase(what, started);
        figures.push(Figure {
            what: what.to_owned(),
            bytes: written,
            seconds,
            peak_rss_kib: None,
        });
    }

    // The hash the agent computes, by busybox in the same guest: the download piped into
    // `sha256sum` (no disk), its digest checked.
    let started = Instant::now();
    let (sum, seconds) = console.timed(&format!("wget -q -O - {image_url} | sha256sum"))?;
    ensure!(
        sum.contains(&digest(dir, "bench.raw")?),
        "wget | sha256sum printed no digest of bench.raw: {sum:?}"
    );
    lab.phase("wget image | sha256sum", started);
    figures.push(Figure {
        what: "wget image | sha256sum (no disk)".to_owned(),
        bytes,
        seconds,
        peak_rss_kib: None,
    });

    // The raw image through the agent that is up (fast track: no reboot).
    let started = Instant::now();
    client.provision(&uuid, json!({"target": "provide"}))?;
    client.wait_for(&uuid, "available")?;
    let from = lab::file_len(&lab.console(MACHINE));
    client.provision(&uuid, json!({"target": "active"}))?;
    client.wait_for(&uuid, "active")?;
    lab.phase("deploy raw (fast track)", started);
    figures.push(agent_figure(&lab, from, "agent, raw image")?);
    let split = agent_split(&lab, from);

    // The qcow2 image: undeploy (no cleaning), then a deploy that boots the ramdisk again.
    let started = Instant::now();
    client.provision(&uuid, json!({"target": "deleted"}))?;
    client.wait_for(&uuid, "available")?;
    let patch: Vec<Value> = image_info(dir, "bench.qcow2", "qcow2")?
        .as_object()
        .context("image_info")?
        .iter()
        .map(|(key, value)| {
            json!({"op": "add", "path": format!("/instance_info/{key}"), "value": value})
        })
        .collect();
    client.patch(&uuid, Value::Array(patch))?;
    let from = lab::file_len(&lab.console(MACHINE));
    client.provision(&uuid, json!({"target": "active"}))?;
    client.wait_for(&uuid, "active")?;
    lab.phase("undeploy + deploy qcow2", started);
    figures.push(agent_figure(&lab, from, "agent, qcow2 image")?);

    print_table(dir, &settings, &figures)?;
    println!("agent, raw image, where the time went (seconds): {split}");
    Ok(())
}

/// The agent's `image write split` line after byte `from` of the console: its fields, or
/// what is missing.
fn agent_split(lab: &Lab, from: usize) -> String {
    let text = lab.console_since(MACHINE, from);
    let Some(line) = text.lines().find(|line| line.contains("image write split")) else {
        return "no 'image write split' line on the console".to_owned();
    };
    [
        "read_wall",
        "read_cpu",
        "hash_wall",
        "hash_cpu",
        "wait_wall",
        "disk_wall",
        "disk_cpu",
        "sync_wall",
        "process_cpu",
        "direct_bytes",
    ]
    .iter()
    .map(|name| format!("{name}={}", log_field(line, name).unwrap_or("?")))
    .collect::<Vec<_>>()
    .join(" ")
}

/// The agent's `image written and verified` line after byte `from` of the console.
fn agent_figure(lab: &Lab, from: usize, what: &str) -> anyhow::Result<Figure> {
    let text = lab.console_since(MACHINE, from);
    let line = text
        .lines()
        .find(|line| line.contains("image written and verified"))
        .with_context(|| format!("{what}: no 'image written and verified' on the console"))?;
    let field = |name: &str| -> anyhow::Result<f64> {
        let value = log_field(line, name).with_context(|| format!("no {name}= in {line:?}"))?;
        value
            .parse()
            .with_context(|| format!("{name}={value:?} in {line:?}"))
    };
    Ok(Figure {
        what: what.to_owned(),
        bytes: field("bytes")? as u64,
        seconds: field("seconds")?,
        peak_rss_kib: Some(field("peak_rss_kib")? as u64),
    })
}

/// `name=value` (or `name="value"`) in a tracing line.
fn log_field<'l>(line: &'l str, name: &str) -> Option<&'l str> {
    let key = format!("{name}=");
    let start = line
        .match_indices(&key)
        .find(|(at, _)| *at == 0 || line.as_bytes()[at - 1] == b' ')?
        .0
        + key.len();
    let rest = &line[start..];
    let value = rest.split_whitespace().next()?;
    Some(value.trim_matches('"'))
}

/// The machine's serial console: typing through `console.sock`, reading `console.log`.
struct Console<'l> {
    lab: &'l Lab,
    /// One connection for the whole run: QEMU takes from the socket only what the UART's
    /// FIFO has room for and drops the rest when the client goes away.
    socket: std::os::unix::net::UnixStream,
}

impl<'l> Console<'l> {
    fn log_len(&self) -> usize {
        lab::file_len(&self.lab.console(MACHINE))
    }

    fn connect(lab: &'l Lab) -> anyhow::Result<Self> {
        let path = lab.console(MACHINE).with_file_name("console.sock");
        let socket = std::os::unix::net::UnixStream::connect(&path)
            .with_context(|| format!("cannot connect to {}", path.display()))?;
        // QEMU also sends the guest's output to the connected client; unread, it fills the
        // socket and stalls the serial port (and every writer to the console). Drain it: the
        // output is read from console.log.
        let mut drain = socket.try_clone()?;
        std::thread::spawn(move || std::io::copy(&mut drain, &mut std::io::sink()));
        Ok(Self { lab, socket })
    }

    /// Types Ctrl-U (the shell drops what is pending on the line), `line` and Enter.
    fn type_line(&self, line: &str) -> anyhow::Result<()> {
        let mut socket = &self.socket;
        socket.write_all(format!("\x15{line}\n").as_bytes())?;
        socket.flush()?;
        Ok(())
    }

    /// Waits until `done` holds for the console after byte `from` (`what` names it in the
    /// error); the console after `from` then.
    fn wait(
        &self,
        from: usize,
        what: &str,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> anyhow::Result<String> {
        let started = Instant::now();
        loop {
            let seen = self.lab.console_since(MACHINE, from);
            if done(&seen) {
                return Ok(seen);
            }
            ensure!(
                started.elapsed() < timeout,
                "{what} did not appear on the console within {timeout:?}; see {}",
                self.lab.console(MACHINE).display()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The ramdisk's shell (`ferric.shell=1`) answers: `echo` of an arithmetic expansion, so
    /// the echoed keystrokes are not taken for the answer.
    fn wait_for_shell(&self) -> anyhow::Result<()> {
        let started = Instant::now();
        loop {
            let from = self.log_len();
            self.type_line("echo shell-$((6*7))-ready")?;
            if self
                .wait(
                    from,
                    "the shell's answer",
                    Duration::from_secs(10),
                    |seen| seen.contains("shell-42-ready"),
                )
                .is_ok()
            {
                return Ok(());
            }
            if started.elapsed() > Duration::from_secs(120) {
                bail!("no shell on the ramdisk's console (ferric.shell=1)");
            }
        }
    }

    /// Runs `command` in the shell: its output and the seconds it took, by the machine's
    /// `/proc/uptime` before and after (the answer line is `dd-status-S-done-A-B-end`).
    fn timed(&self, command: &str) -> anyhow::Result<(String, f64)> {
        let from = self.log_len();
        self.type_line(&format!(
            "a=$(cut -d' ' -f1 /proc/uptime); {command} 2>&1; s=$?; \
             b=$(cut -d' ' -f1 /proc/uptime); echo dd-status-$s-done-$a-$b-end"
        ))?;
        // The echoed keystrokes read `dd-status-$s-…`; the answer has the figures.
        let seen = self.wait(
            from,
            "the command's end",
            Duration::from_secs(1200),
            |seen| dd_answer(seen).is_some(),
        )?;
        let (status, seconds) = dd_answer(&seen).context("the command's answer")?;
        ensure!(status == 0, "{command} failed: {seen}");
        Ok((seen, seconds))
    }

    /// Runs a `dd` pipeline in the shell; the bytes it wrote (its `N+0 records out` of 1 MiB:
    /// Debian's busybox prints no summary line) and the seconds it took, by the machine's
    /// `/proc/uptime` before and after.
    fn dd(&self, command: &str) -> anyhow::Result<(u64, f64)> {
        let (seen, seconds) = self.timed(command)?;
        let bytes = seen
            .lines()
            .find_map(records_out)
            .with_context(|| format!("no full `records out` line from dd in {seen:?}"))?;
        Ok((bytes, seconds))
    }
}

/// The shell's `dd-status-S-done-A-B-end` answer: the exit status and B − A seconds.
fn dd_answer(seen: &str) -> Option<(u32, f64)> {
    seen.match_indices("dd-status-").find_map(|(at, key)| {
        let rest = &seen[at + key.len()..];
        let answer = rest.split("-end").next()?;
        let mut parts = answer.split('-');
        let status = parts.next()?.parse().ok()?;
        (parts.next()? == "done").then_some(())?;
        let start: f64 = parts.next()?.parse().ok()?;
        let end: f64 = parts.next()?.parse().ok()?;
        Some((status, end - start))
    })
}

/// dd's `N+0 records out` with 1 MiB records: N MiB in bytes (a partial record: `None`).
fn records_out(line: &str) -> Option<u64> {
    let counts = line.trim().strip_suffix(" records out")?;
    let (full, partial) = counts.split_once('+')?;
    (partial == "0").then_some(())?;
    full.parse::<u64>().ok().map(|mib| mib << 20)
}

fn print_table(dir: &Path, settings: &Settings, figures: &[Figure]) -> anyhow::Result<()> {
    let raw = std::fs::metadata(dir.join("boot/images/bench.raw"))?.len();
    let qcow2 = std::fs::metadata(dir.join("boot/images/bench.qcow2"))?.len();
    // The disk's speed: the faster of dd's two ways of writing zeros.
    let dd = figures
        .iter()
        .filter(|figure| figure.what.starts_with("dd /dev/zero"))
        .map(Figure::mib_per_s)
        .fold(0.0_f64, f64::max);
    // The same bytes over the same path: the faster of the two `wget | dd` runs.
    let wget_dd = figures
        .iter()
        .filter(|figure| figure.what.starts_with("wget image | dd"))
        .map(Figure::mib_per_s)
        .fold(0.0_f64, f64::max);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let accel = std::env::var("FERRIC_LAB_ACCEL").unwrap_or_else(|_| "tcg".into());
    let cpus = std::env::var("FERRIC_LAB_CPUS").unwrap_or_else(|_| "1".into());
    println!();
    println!(
        "agent write vs dd on {DISK} of one lab machine ({} MiB RAM, {cpus} vCPU, accel \
         {accel}); images: raw {:.0} MiB, qcow2 {:.0} MiB",
        settings.memory_mib,
        raw as f64 / 1_048_576.0,
        qcow2 as f64 / 1_048_576.0
    );
    println!(
        "| {:<36} | {:>9} | {:>8} | {:>8} | {:>7} | {:>9} | {:>13} |",
        "writer", "MiB", "s", "MiB/s", "% of dd", "% wget|dd", "peak RSS MiB"
    );
    println!(
        "|{:-<38}|{:->11}|{:->10}|{:->10}|{:->9}|{:->11}|{:->15}|",
        "", "", "", "", "", "", ""
    );
    for figure in figures {
        println!(
            "| {:<36} | {:>9.0} | {:>8.2} | {:>8.1} | {:>6.1}% | {:>8.1}% | {:>13} |",
            figure.what,
            figure.bytes as f64 / 1_048_576.0,
            figure.seconds,
            figure.mib_per_s(),
            100.0 * figure.mib_per_s() / dd.max(1e-9),
            100.0 * figure.mib_per_s() / wget_dd.max(1e-9),
            figure.peak_rss_kib.map_or_else(
                || "-".to_owned(),
                |kib| format!("{:.1}", kib as f64 / 1024.0)
            ),
        );
    }
    println!("load average at the end: {}", load.trim());
    Ok(())
}

/// The parsers, checked before the lab starts (this binary has no test harness).
fn check_parsers() -> anyhow::Result<()> {
    ensure!(records_out("1024+0 records out\r") == Some(1 << 30));
    ensure!(records_out("1023+1 records out").is_none());
    ensure!(dd_answer("echo dd-status-$s-done-$a-$b-end\r\n").is_none());
    ensure!(
        dd_answer("echo dd-status-$s-d\r\r\none-$a-$b-end\r\ndd-status-1-done-10.50-12.75-end\r\n")
            == Some((1, 2.25))
    );
    let line = "2026-11-25T12:00:00Z  INFO ferric_agent::image: image written and verified \
                image=x device=/dev/vda format=raw bytes=1073741824 seconds=10.500 \
                mib_per_s=97.5 peak_rss_kib=7340";
    ensure!(log_field(line, "bytes") == Some("1073741824"));
    ensure!(log_field(line, "seconds") == Some("10.500"));
    ensure!(log_field(line, "peak_rss_kib") == Some("7340"));
    Ok(())
}
