//! End-to-end: a lab machine's boot messages read through `ferric node console` and the web
//! UI's terminal (issue 24).
//!
//! Runs only with `--features lab-e2e` (root; `scripts/install-deps.sh --lab`; the agent built
//! beside the `ferric` binary; Debian's chromium and the Playwright venv of
//! `scripts/ui-venv.sh`): `cargo test -p ferric --features lab-e2e --test lab_console`.
//! Like `lab_lifecycle` it is a `harness = false` binary that runs itself again inside the
//! lab's namespace.
//!
//! One machine enrolled with the `ipmi` hardware type and the `ipmitool-socat` console (Serial-
//! over-LAN spoken natively to the lab's RMCP+ BMC, which relays the QEMU machine's serial
//! port). Phases, each timed: `ferric node console N --enable` and `--show` (a `socat` URL);
//! `ferric node console N` attached with stdin not a terminal while the node is inspected,
//! until the firmware's first output and the agent kernel's `Linux version` line have come
//! through the CLI; at the same time the web UI's terminal in headless chromium
//! (`tests/ui/test_ui.py --lab-console`) shows that line and the ramdisk's, and the machine's
//! serial tty echoes what it types (the node has `fast_track`: it stays on after the
//! inspection); the TCP relay `console_info` names gives the same retained output; then
//! `--disable`, which ends the attached CLI (close 1000) and empties `console_info`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use ferric_testkit::lab::{self, Lab, Server, run};
use serde_json::{Value, json};

const NAMESPACE: &str = "ferric-console-e2e";
const API: &str = "http://10.231.0.1:6385";
const PHASE_TIMEOUT: Duration = Duration::from_secs(150);
/// What OVMF writes on the serial console when it starts (its release build prints no
/// banner), SeaBIOS's banner, and iPXE's: the firmware speaking.
const FIRMWARE_LINES: [&str; 3] = ["\x1b[=3h", "SeaBIOS (version", "iPXE"];
/// The agent kernel's first line (`console=ttyS0` is in the kernel parameters).
const KERNEL_LINE: &str = "Linux version";

fn ferric() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferric"))
}

fn main() -> ExitCode {
    lab::main("lab_console", outside, inside)
}

/// Builds the ramdisk, brings up a one-machine lab, runs the scenario inside the namespace
/// and takes the lab down (`ferric_testkit::lab`).
fn outside() -> anyhow::Result<()> {
    let lab = Lab::new(
        "lab_console",
        NAMESPACE,
        "ferric-console",
        env!("CARGO_BIN_EXE_ferric"),
    );
    let kept = "server.log, browser.log, lab/node-0/console.log, lab/bmc.log";
    lab.outside(kept, || {
        let started = Instant::now();
        lab.build_ramdisk()?;
        eprintln!(
            "lab_console: ramdisk ready: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        lab.up(&["--nodes", "1", "--memory", "512"])?;
        lab.run_inside()
    })
}

fn phase(name: &str, started: Instant) {
    eprintln!(
        "lab_console: phase {name}: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// `ferric node console …` (or any client command) against the lab's server.
fn cli(args: &[&str]) -> anyhow::Result<String> {
    run(
        ferric().env("FERRIC_URL", API).args(args),
        &format!("ferric {}", args.join(" ")),
    )
}

fn api(method: reqwest::Method, path: &str, body: Option<Value>) -> anyhow::Result<(u16, Value)> {
    let client = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    let mut request = client
        .request(method.clone(), format!("{API}{path}"))
        .header("X-OpenStack-Ironic-API-Version", "1.110");
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().with_context(|| format!("{method} {path}"))?;
    let status = response.status().as_u16();
    let text = response.text()?;
    Ok((
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    ))
}

/// Reads `source` on a thread, handing each chunk over; the channel closes at its end.
fn reader(mut source: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(length) = source.read(&mut buffer) {
            if length == 0 || sender.send(buffer[..length].to_vec()).is_err() {
                return;
            }
        }
    });
    receiver
}

/// Collects what `chunks` delivers until `done` holds for it; the text so far either way.
fn collect_until(
    chunks: &mpsc::Receiver<Vec<u8>>,
    text: &mut String,
    what: &str,
    done: impl Fn(&str) -> bool,
) -> anyhow::Result<()> {
    let started = Instant::now();
    while !done(text) {
        let left = PHASE_TIMEOUT.saturating_sub(started.elapsed());
        ensure!(
            !left.is_zero(),
            "{what} did not come within {PHASE_TIMEOUT:?}"
        );
        match chunks.recv_timeout(left) {
            Ok(chunk) => text.push_str(&String::from_utf8_lossy(&chunk)),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("the stream ended before {what}"),
        }
    }
    Ok(())
}

fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("lab/lab.json"))?)?;
    let machine = &lab["nodes"][0];
    let log = std::fs::File::create(dir.join("server.log"))?;
    let _server = Server(
        ferric()
            .arg("server")
            .args(["--api-listen", "10.231.0.1:6385", "--api-url", API])
            .args(["--boot-http-listen", "10.231.0.1:8080", "--boot-http-root"])
            .arg(dir.join("boot"))
            .current_dir(dir)
            .env("FERRIC_DHCP_HOSTSDIR", dir.join("lab/dhcp-hosts"))
            .env("FERRIC_DEPLOY_KERNEL", "ferric-agent.kernel")
            .env("FERRIC_DEPLOY_RAMDISK", "ferric-agent.initramfs")
            .env("FERRIC_LOG_LEVEL", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .context("cannot start ferric server")?,
    );
    let up = Instant::now();
    while api(reqwest::Method::GET, "/v1", None).is_err() {
        ensure!(
            up.elapsed() < Duration::from_secs(120),
            "ferric server did not start; see server.log"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, created) = api(
        reqwest::Method::POST,
        "/v1/nodes",
        Some(json!({
            "name": "console-0",
            "driver": "ipmi",
            "console_interface": "ipmitool-socat",
            "inspect_interface": "agent",
            "driver_info": {
                "ipmi_address": machine["ipmi_address"],
                "ipmi_port": machine["ipmi_port"],
                "ipmi_username": machine["ipmi_username"],
                "ipmi_password": machine["ipmi_password"],
                // The machine stays on with its agent after the inspection, so that the
                // browser's keystrokes have a serial tty to echo them (docs/deploy.md).
                "fast_track": true,
            },
        })),
    )?;
    ensure!(status == 201, "enrolling the node: {status} {created}");
    let (status, port) = api(
        reqwest::Method::POST,
        "/v1/ports",
        Some(json!({"node_uuid": created["uuid"], "address": machine["mac"]})),
    )?;
    ensure!(status == 201, "creating its port: {status} {port}");

    let started = Instant::now();
    cli(&["node", "console", "console-0", "--enable"])?;
    let shown = cli(&["node", "console", "console-0", "--show", "-f", "json"])?;
    let shown: Value = serde_json::from_str(&shown).context("--show -f json")?;
    ensure!(
        shown["console_enabled"] == true && shown["console_info"]["type"] == "socat",
        "console not enabled: {shown}"
    );
    let relay = shown["console_info"]["url"]
        .as_str()
        .and_then(|url| url.strip_prefix("tcp://"))
        .context("no tcp:// console URL")?
        .to_owned();
    phase("enable", started);

    // Attached with stdin not a terminal, as a script would be, before the machine starts.
    let started = Instant::now();
    let mut attached = ferric()
        .env("FERRIC_URL", API)
        .args(["node", "console", "console-0", "--timeout", "300"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot attach ferric node console")?;
    let output = reader(attached.stdout.take().context("no stdout")?);
    let errors = attached.stderr.take().context("no stderr")?;
    let attached = Server(attached);
    let browser = browser_terminal(dir)?;
    cli(&["node", "manage", "console-0", "--wait", "120"])?;
    let (status, body) = api(
        reqwest::Method::PUT,
        &format!(
            "/v1/nodes/{}/states/provision",
            created["uuid"].as_str().unwrap_or("")
        ),
        Some(json!({"target": "inspect"})),
    )?;
    ensure!(status == 202, "inspect: {status} {body}");
    let mut text = String::new();
    collect_until(&output, &mut text, "the firmware's output", |text| {
        FIRMWARE_LINES.iter().any(|line| text.contains(line))
    })
    .with_context(|| format!("through ferric node console; got {text:?}"))?;
    phase("firmware output through ferric node console", started);
    collect_until(&output, &mut text, "the kernel's first line", |text| {
        text.contains(KERNEL_LINE)
    })
    .with_context(|| format!("through ferric node console; got {} bytes", text.len()))?;
    phase("kernel output through ferric node console", started);
    let kernel = text
        .lines()
        .find(|line| line.contains(KERNEL_LINE))
        .unwrap_or_default();
    eprintln!("lab_console: read through the CLI: {}", kernel.trim());

    // The TCP relay (Ironic's socat console) gives a late viewer the same retained output.
    let started = Instant::now();
    let stream = std::net::TcpStream::connect(&relay).with_context(|| format!("relay {relay}"))?;
    let relayed = reader(stream);
    let mut late = String::new();
    collect_until(&relayed, &mut late, "the retained kernel line", |late| {
        late.contains(KERNEL_LINE)
    })?;
    phase("the same output from the TCP relay", started);

    browser_finished(browser)?;

    // Disabling ends the attached CLI (close 1000: a normal end) and the console_info.
    let started = Instant::now();
    cli(&["node", "console", "console-0", "--disable"])?;
    let mut attached = attached;
    let ended = Instant::now();
    let status = loop {
        if let Some(status) = attached.0.try_wait()? {
            break status;
        }
        ensure!(
            ended.elapsed() < PHASE_TIMEOUT,
            "ferric node console still attached after --disable"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let mut stderr = String::new();
    let mut errors = errors;
    errors.read_to_string(&mut stderr)?;
    ensure!(
        status.success(),
        "ferric node console ended with {status}: {stderr}"
    );
    let shown = cli(&["node", "console", "console-0", "--show", "-f", "json"])?;
    let shown: Value = serde_json::from_str(&shown)?;
    ensure!(
        shown["console_enabled"] == false && shown["console_info"].is_null(),
        "still enabled after --disable: {shown}"
    );
    phase("disable", started);
    Ok(())
}

/// What the browser types into the machine's console, to see it echoed back.
const TYPED: &str = "ferric-ui-keystrokes";

/// The web UI's half, started beside `ferric node console` before the machine powers on:
/// `tests/ui/test_ui.py --lab-console` in headless chromium opens the node's page, opens the
/// terminal on the console WebSocket, waits until the agent kernel's first line and then the
/// ramdisk's own output are in the terminal, types [`TYPED`] and waits for the machine's
/// serial tty to echo it (QEMU's serial port takes input from the lab BMC's SOL).
fn browser_terminal(dir: &Path) -> anyhow::Result<(Server, Instant, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = Command::new("bash")
        .arg(root.join("scripts/ui-venv.sh"))
        .stderr(Stdio::inherit())
        .output()
        .context("cannot run scripts/ui-venv.sh (the Playwright virtualenv)")?;
    ensure!(
        venv.status.success(),
        "scripts/ui-venv.sh failed ({})",
        venv.status
    );
    let python = PathBuf::from(String::from_utf8_lossy(&venv.stdout).trim()).join("bin/python");
    let chromium = std::env::var("FERRIC_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    ensure!(
        Path::new(&chromium).exists(),
        "no browser at {chromium}: install Debian's chromium (scripts/install-deps.sh)"
    );
    let log_path = dir.join("browser.log");
    let log = std::fs::File::create(&log_path)?;
    let child = Command::new(python)
        .arg(root.join("tests/ui/test_ui.py"))
        .args([
            "--endpoint",
            API,
            "--chromium",
            &chromium,
            "--lab-console",
            "console-0",
        ])
        .args([
            "--expect",
            KERNEL_LINE,
            "--expect",
            "ferric ramdisk:",
            "--type",
            TYPED,
        ])
        // The terminal's screenshot (lab-console.png): beside the logs, or where
        // FERRIC_E2E_SCREENSHOTS says (docs/ui.md's is taken with it).
        .arg("--screenshots")
        .arg(std::env::var_os("FERRIC_E2E_SCREENSHOTS").map_or_else(|| dir.into(), PathBuf::from))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("cannot start tests/ui/test_ui.py --lab-console")?;
    Ok((Server(child), Instant::now(), log_path))
}

/// Waits for the browser's run to end; it must have passed.
fn browser_finished((mut browser, started, log): (Server, Instant, PathBuf)) -> anyhow::Result<()> {
    let waiting = Instant::now();
    let status = loop {
        if let Some(status) = browser.0.try_wait()? {
            break status;
        }
        ensure!(
            waiting.elapsed() < PHASE_TIMEOUT,
            "the browser's terminal had not shown the boot messages and the echo within \
             {PHASE_TIMEOUT:?} of the CLI; see browser.log"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    // browser.log is among the logs the harness prints the end of when the suite fails.
    ensure!(
        status.success(),
        "the browser's terminal failed ({status}) {:.1} s after it started; see browser.log and \
         lab-console.png",
        started.elapsed().as_secs_f64()
    );
    // Its own timings: when each text showed up in the terminal.
    for line in std::fs::read_to_string(&log)?.lines() {
        if line.starts_with("lab console:") {
            eprintln!("lab_console: browser: {line}");
        }
    }
    phase(
        "the kernel's line and a keystroke's echo in the web UI's terminal",
        started,
    );
    Ok(())
}
