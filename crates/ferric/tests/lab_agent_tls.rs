//! End-to-end: Ferric's own agent over auto-TLS never puts its agent token on the wire in
//! clear text (issue 22). Captures every frame on the lab's bridge while Ferric cleans a
//! machine through `ferric-agent`, then reads the capture.
//!
//! Runs only with `--features lab-e2e` (root; `scripts/install-deps.sh --lab`, which installs
//! `tcpdump`; the agent built beside the `ferric` binary, or `FERRIC_E2E_AGENT`):
//! `cargo test -p ferric --features lab-e2e --test lab_agent_tls`. Like `lab_vmedia`, a
//! `harness = false` binary that runs itself again inside the lab's namespace.
//!
//! The setup is the one docs/agent.md recommends for tokens that never travel in clear: the
//! API served over HTTPS (`api_tls_cert`/`api_tls_key`, a certificate made by the test for the
//! bridge address), its certificate packed into the ramdisk (`ferric ramdisk build --file`)
//! and named with `ipa-cafile=` in `kernel_append_params`, and `agent_require_tls = true`, so
//! the conductor only calls agents that heartbeat an `https://` callback URL with their
//! auto-TLS certificate. Phases, each timed: enroll and manage; cleaning (boot the agent,
//! lookup, heartbeats, `get_clean_steps`, `erase_devices_metadata`, power off) with `tcpdump`
//! on the bridge and the node's token read from the database while the agent runs. Then the
//! capture must hold: no token anywhere in its bytes, at least one conductor → agent
//! connection to port 9999 and one agent → API connection to 6385, and every connection to
//! those ports opening with a TLS ClientHello. The figures are printed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use ferric_testkit::lab::{self, Client, Lab, Server, enroll_machine};
use serde_json::{Value, json};

const SUITE: &str = "lab_agent_tls";
const NAMESPACE: &str = "ferric-agent-tls-e2e";
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);
/// Where the ramdisk holds the API's certificate (`ipa-cafile=`).
const CA_IN_RAMDISK: &str = "/etc/ferric/api-ca.pem";
const API_PORT: u16 = 6385;
const AGENT_PORT: u16 = 9999;
/// How a plain HTTP request starts.
const HTTP_METHODS: [&[u8]; 4] = [b"GET ", b"POST ", b"PUT ", b"HEAD "];

fn main() -> std::process::ExitCode {
    lab::main(SUITE, outside, inside)
}

/// Makes the API's certificate, builds the ramdisk with it, brings up a one-machine lab, runs
/// the scenario inside the namespace and takes the lab down.
fn outside() -> anyhow::Result<()> {
    ensure!(
        Command::new("tcpdump")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success()),
        "tcpdump is missing: run scripts/install-deps.sh --lab"
    );
    let lab = Lab::new(
        SUITE,
        NAMESPACE,
        "ferric-agent-tls",
        env!("CARGO_BIN_EXE_ferric"),
    );
    let dir = lab.dir.as_path();
    let kept = "capture.pcap, server.log, ferric.db, lab/node-0/console.log";
    lab.outside(kept, || {
        let started = Instant::now();
        let lab_layout = ferric_lab::layout::BRIDGE_ADDRESS;
        let certified = rcgen::generate_simple_self_signed(vec![lab_layout.to_owned()])
            .context("cannot make the API's certificate")?;
        std::fs::write(dir.join("api-cert.pem"), certified.cert.pem())?;
        std::fs::write(dir.join("api-key.pem"), certified.key_pair.serialize_pem())?;
        let mut build = lab.ramdisk_command();
        build.arg("--file").arg(format!(
            "{}:{CA_IN_RAMDISK}",
            dir.join("api-cert.pem").display()
        ));
        lab::run(&mut build, "ferric ramdisk build")?;
        eprintln!(
            "lab_agent_tls: ramdisk (with the API's certificate at {CA_IN_RAMDISK}) ready: {:.1} s",
            started.elapsed().as_secs_f64()
        );
        lab.up(&["--nodes", "1", "--memory", "512"])?;
        lab.run_inside()
    })
}

fn phase(name: &str, started: Instant) {
    lab::phase(SUITE, name, started);
}

fn inside(dir: &Path) -> anyhow::Result<()> {
    let lab = Lab::at(
        SUITE,
        NAMESPACE,
        dir.to_owned(),
        env!("CARGO_BIN_EXE_ferric"),
    );
    let description = lab.description()?;
    let machine = &description["nodes"][0];
    let bridge = description["bridge"]
        .as_str()
        .context("lab.json: no bridge")?;
    let address = description["bridge_address"]
        .as_str()
        .context("lab.json: no bridge_address")?;
    let api = format!("https://{address}:{API_PORT}");
    let capture_file = dir.join("capture.pcap");
    let capture = Server(
        Command::new("tcpdump")
            // -Z root: Debian's tcpdump otherwise drops to its own user, who cannot write here.
            .args(["-i", bridge, "-n", "-s", "0", "-U", "-Z", "root", "-w"])
            .arg(&capture_file)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("tcpdump.log"))?)
            .spawn()
            .context("cannot start tcpdump")?,
    );
    // tcpdump creates the file once it listens.
    let listening = Instant::now();
    while !capture_file.exists() {
        ensure!(
            listening.elapsed() < Duration::from_secs(30),
            "tcpdump did not start capturing; see tcpdump.log"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let certificate = reqwest::Certificate::from_pem(&std::fs::read(dir.join("api-cert.pem"))?)?;
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .add_root_certificate(certificate)
        .build()?;
    let client = Client::with_http(SUITE, &api, http, PHASE_TIMEOUT);
    let mut command = lab.ferric();
    command
        .arg("server")
        .args(["--api-listen", &format!("{address}:{API_PORT}")])
        .args(["--api-url", &api])
        .args(["--boot-http-listen", &format!("{address}:8080")])
        .arg("--boot-http-root")
        .arg(dir.join("boot"))
        .current_dir(dir)
        .env("FERRIC_API_TLS_CERT", dir.join("api-cert.pem"))
        .env("FERRIC_API_TLS_KEY", dir.join("api-key.pem"))
        .env(
            "FERRIC_KERNEL_APPEND_PARAMS",
            format!("console=ttyS0 ipa-cafile={CA_IN_RAMDISK}"),
        )
        .env("FERRIC_AGENT_REQUIRE_TLS", "true")
        .env("FERRIC_DEPLOY_KERNEL", "ferric-agent.kernel")
        .env("FERRIC_DEPLOY_RAMDISK", "ferric-agent.initramfs")
        .env("FERRIC_LOG_LEVEL", "info");
    let server = lab.server(command, &client)?;

    let started = Instant::now();
    let uuid = enroll_machine(&client, machine, json!({"boot_interface": "ipxe"}))?;
    client.put_provision(&uuid, "manage")?;
    wait(|| client.arrived(&uuid, "manageable"))?;
    phase("enroll + manage", started);

    // Cleaning: the agent boots, looks up, heartbeats, runs the clean steps, is powered off.
    // Its token lives in the node's driver_internal_info while it runs; the API masks it, the
    // database has it.
    let runtime = tokio::runtime::Runtime::new()?;
    let store = runtime
        .block_on(ferric_db::Store::open(
            dir.join("ferric.db").to_str().context("path")?,
        ))
        .context("cannot open the server's database")?;
    let ident = ferric_model::resources::Ident::parse(&uuid);
    let mut tokens = BTreeSet::new();
    let mut agent_urls = BTreeSet::new();
    let started = Instant::now();
    client.put_provision(&uuid, "provide")?;
    wait(|| {
        let node = runtime.block_on(store.node_get(&ident))?;
        let internal = &node.driver_internal_info;
        if let Some(token) = internal.get("agent_secret_token").and_then(Value::as_str) {
            tokens.insert(token.to_owned());
        }
        if let Some(url) = internal.get("agent_url").and_then(Value::as_str) {
            agent_urls.insert(url.to_owned());
        }
        client.arrived(&uuid, "available")
    })?;
    phase(
        "cleaning through ferric-agent (tcpdump on the bridge)",
        started,
    );
    drop(server);
    drop(capture);
    runtime.block_on(store.close());

    ensure!(
        !tokens.is_empty(),
        "no agent token seen in the database during cleaning"
    );
    ensure!(
        agent_urls.iter().all(|url| url.starts_with("https://")),
        "the agent heartbeated a plain-HTTP callback URL: {agent_urls:?}"
    );
    let pcap = std::fs::read(&capture_file)
        .with_context(|| format!("cannot read {}", capture_file.display()))?;
    let figures = read_capture(&pcap)?;
    eprintln!(
        "lab_agent_tls: capture: {} frames, {} bytes; agent callback URL(s) {agent_urls:?}",
        figures.frames,
        pcap.len()
    );
    for port in [API_PORT, AGENT_PORT] {
        let Some(flows) = figures.ports.get(&port) else {
            bail!("no TCP connection to port {port} in the capture");
        };
        eprintln!(
            "lab_agent_tls: port {port}: {} connection(s), {} opened with a TLS ClientHello, \
             {} with plain HTTP, {} payload bytes",
            flows.connections, flows.client_hellos, flows.plain_http, flows.payload_bytes
        );
        ensure!(
            flows.connections > 0
                && flows.client_hellos == flows.connections
                && flows.plain_http == 0,
            "not every connection to port {port} was TLS: {flows:?}"
        );
    }
    for token in &tokens {
        let found = count(&pcap, token.as_bytes());
        eprintln!(
            "lab_agent_tls: agent token {}… ({} bytes) found {found} time(s) in the capture",
            token.get(..6).unwrap_or(""),
            token.len()
        );
        ensure!(found == 0, "the agent token travelled in clear text");
    }
    Ok(())
}

/// Polls `step` every half second until it gives a value, for at most [`PHASE_TIMEOUT`].
fn wait<T>(mut step: impl FnMut() -> anyhow::Result<Option<T>>) -> anyhow::Result<T> {
    let started = Instant::now();
    loop {
        if let Some(value) = step()? {
            return Ok(value);
        }
        ensure!(
            started.elapsed() < PHASE_TIMEOUT,
            "nothing happened within {PHASE_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn count(haystack: &[u8], needle: &[u8]) -> usize {
    if needle.is_empty() {
        return 0;
    }
    haystack
        .windows(needle.len())
        .filter(|window| *window == needle)
        .count()
}

/// What the capture shows for the connections to one server port.
#[derive(Debug, Default)]
struct Flows {
    /// Connections whose first client payload was seen.
    connections: usize,
    /// … of which that payload is a TLS handshake record holding a ClientHello.
    client_hellos: usize,
    /// … of which it starts like an HTTP request.
    plain_http: usize,
    /// TCP payload bytes in both directions.
    payload_bytes: usize,
}

struct Figures {
    frames: usize,
    ports: BTreeMap<u16, Flows>,
}

/// Reads a classic pcap file of Ethernet frames (what tcpdump writes): per server port, the
/// first payload the client sent on each TCP connection, and the payload volume.
fn read_capture(pcap: &[u8]) -> anyhow::Result<Figures> {
    let header = pcap.get(..24).context("the capture has no pcap header")?;
    let little = match header[..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => bail!("the capture is not a pcap file"),
    };
    let u32_at = |bytes: &[u8], at: usize| -> Option<u32> {
        let raw: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(raw)
        } else {
            u32::from_be_bytes(raw)
        })
    };
    ensure!(
        u32_at(header, 20) == Some(1),
        "the capture's link type is not Ethernet"
    );
    let mut figures = Figures {
        frames: 0,
        ports: BTreeMap::new(),
    };
    // Connections (client address, client port, server port) whose first payload was read.
    let mut opened = BTreeSet::new();
    let mut at = 24;
    while let Some(length) = u32_at(pcap, at + 8) {
        let start = at + 16;
        let end = start + usize::try_from(length)?;
        // A frame cut off at the end (tcpdump stopped mid-write) is not read.
        let Some(frame) = pcap.get(start..end) else {
            break;
        };
        at = end;
        figures.frames += 1;
        let Some(segment) = tcp_segment(frame) else {
            continue;
        };
        for (server_port, to_server) in [
            (segment.destination_port, true),
            (segment.source_port, false),
        ] {
            if server_port != API_PORT && server_port != AGENT_PORT {
                continue;
            }
            let flows = figures.ports.entry(server_port).or_default();
            flows.payload_bytes += segment.payload.len();
            if to_server
                && !segment.payload.is_empty()
                && opened.insert((segment.source, segment.source_port, server_port))
            {
                flows.connections += 1;
                let payload = segment.payload;
                // A TLS handshake record (22, version 3.x) whose first message is a
                // ClientHello (1).
                if payload.len() > 5 && payload[0] == 22 && payload[1] == 3 && payload[5] == 1 {
                    flows.client_hellos += 1;
                }
                if HTTP_METHODS
                    .iter()
                    .any(|method| payload.starts_with(method))
                {
                    flows.plain_http += 1;
                }
            }
        }
    }
    Ok(figures)
}

struct Segment<'a> {
    source: [u8; 4],
    source_port: u16,
    destination_port: u16,
    payload: &'a [u8],
}

/// The TCP segment in an Ethernet frame carrying IPv4, if it is one.
fn tcp_segment(frame: &[u8]) -> Option<Segment<'_>> {
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let ip = frame.get(14..)?;
    let header_length = usize::from(ip.first()? & 0x0f) * 4;
    let total_length = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    if *ip.get(9)? != 6 {
        return None;
    }
    let source = ip.get(12..16)?.try_into().ok()?;
    let tcp = ip.get(header_length..total_length.min(ip.len()))?;
    let data_offset = usize::from(tcp.get(12)? >> 4) * 4;
    Some(Segment {
        source,
        source_port: u16::from_be_bytes([*tcp.first()?, *tcp.get(1)?]),
        destination_port: u16::from_be_bytes([*tcp.get(2)?, *tcp.get(3)?]),
        payload: tcp.get(data_offset..)?,
    })
}
