//! The rack of `cargo xtask bench-fleet-deploy` (`fleet_deploy.rs`): network namespaces joined
//! by one bridge, each link a veth pair shaped by `tc tbf` at both ends, the bench's own
//! unshaped link to the conductor, the bytes the conductor sent, and the removal of all of it
//! (a killed run's too: everything is named `ffb-*`).

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// What every namespace of the bench, and its link on the host, is named after.
const PREFIX: &str = "ffb-";
/// The switch's namespace, holding the bridge; also the ports' `switch_info`.
pub(super) const SWITCH: &str = "ffb-sw";
const BRIDGE: &str = "br0";
pub(super) const CONDUCTOR: &str = "ffb-c";
const CONDUCTOR_IP: &str = "10.231.0.1";
pub(super) const API_LISTEN: &str = "10.231.0.1:6385";
pub(super) const API_URL: &str = "http://10.231.0.1:6385";
pub(super) const BOOT_LISTEN: &str = "10.231.0.1:8080";
pub(super) const BOOT_URL: &str = "http://10.231.0.1:8080";
/// The image, under the boot file server's root.
pub(super) const IMAGE_URL: &str = "http://10.231.0.1:8080/images/fleet.img";
pub(super) const AGENT_PORT: u16 = 9999;
/// The bench's own link into the conductor's namespace: the host's end and its address, the
/// conductor's end and its address (the host's gateway to the conductor).
const HOST_LINK: &str = "ffb-h";
const HOST_LINK_ADDR: &str = "10.232.0.2/30";
const CONDUCTOR_LINK: &str = "mgmt";
const CONDUCTOR_LINK_IP: &str = "10.232.0.1";

/// Runs `program`; its stdout, or an error carrying its stderr.
pub(super) fn output(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {program}"))?;
    if !output.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `ip` with the words of `line` (names and addresses only, so no word holds a space).
fn ip(line: &str) -> anyhow::Result<()> {
    output("ip", &line.split_whitespace().collect::<Vec<_>>()).map(drop)
}

pub(super) fn agent_namespace(index: usize) -> String {
    format!("{PREFIX}a{index}")
}

pub(super) fn agent_ip(index: usize) -> String {
    format!("10.231.{}.{}", 1 + index / 200, 10 + index % 200)
}

pub(super) fn agent_mac(index: usize) -> String {
    format!("52:54:00:fb:{:02x}:{:02x}", index / 256, index % 256)
}

/// `tc tbf`'s bucket in bytes: 10 ms at the link's rate, at least 1 MiB (a 64 KiB GSO packet
/// must fit, and a smaller bucket cannot reach the rate between two timer ticks).
fn tbf_burst(link_mbit: u64) -> u64 {
    (link_mbit * 1_000_000 / 8 / 100).max(1 << 20)
}

/// The switch, the conductor's and every machine's link to it, and the bench's own link.
pub(super) fn create(machines: usize, link_mbit: u64) -> anyhow::Result<()> {
    add_namespace(SWITCH)?;
    ip(&format!("-n {SWITCH} link add {BRIDGE} type bridge"))?;
    ip(&format!("-n {SWITCH} link set {BRIDGE} up"))?;
    let conductor = format!("{CONDUCTOR_IP}/16");
    cable(CONDUCTOR, "sc", &conductor, link_mbit)?;
    for index in 0..machines {
        let (namespace, port) = (agent_namespace(index), format!("s{index}"));
        cable(
            &namespace,
            &port,
            &format!("{}/16", agent_ip(index)),
            link_mbit,
        )?;
    }
    host_link()
}

fn add_namespace(name: &str) -> anyhow::Result<()> {
    ip(&format!("netns add {name}"))?;
    ip(&format!("-n {name} link set lo up"))
}

/// A new namespace whose `eth0` (with `address`) is cabled to the switch's `port`; both ends
/// shaped, so both directions are.
fn cable(namespace: &str, port: &str, address: &str, link_mbit: u64) -> anyhow::Result<()> {
    add_namespace(namespace)?;
    ip(&format!(
        "-n {SWITCH} link add {port} type veth peer name eth0 netns {namespace}"
    ))?;
    ip(&format!("-n {SWITCH} link set {port} master {BRIDGE} up"))?;
    ip(&format!("-n {namespace} addr add {address} dev eth0"))?;
    ip(&format!("-n {namespace} link set eth0 up"))?;
    shape(SWITCH, port, link_mbit)?;
    shape(namespace, "eth0", link_mbit)
}

fn shape(namespace: &str, device: &str, link_mbit: u64) -> anyhow::Result<()> {
    let line = format!(
        "-n {namespace} qdisc add dev {device} root tbf rate {link_mbit}mbit burst {} \
         latency 50ms",
        tbf_burst(link_mbit)
    );
    output("tc", &line.split_whitespace().collect::<Vec<_>>()).map(drop)
}

/// The host reaches the API through a veth of its own into the conductor's namespace, routed
/// to the conductor's address alone.
fn host_link() -> anyhow::Result<()> {
    ip(&format!(
        "link add {HOST_LINK} type veth peer name {CONDUCTOR_LINK} netns {CONDUCTOR}"
    ))?;
    ip(&format!("addr add {HOST_LINK_ADDR} dev {HOST_LINK}"))?;
    ip(&format!("link set {HOST_LINK} up"))?;
    ip(&format!(
        "-n {CONDUCTOR} addr add {CONDUCTOR_LINK_IP}/30 dev {CONDUCTOR_LINK}"
    ))?;
    ip(&format!("-n {CONDUCTOR} link set {CONDUCTOR_LINK} up"))?;
    ip(&format!(
        "route add {CONDUCTOR_IP}/32 via {CONDUCTOR_LINK_IP} dev {HOST_LINK}"
    ))
}

/// Removes every `ffb-*` namespace with whatever still runs in it, and the host's link: this
/// run's at the end, a killed run's at the start.
pub(super) fn remove() {
    if Path::new("/sys/class/net").join(HOST_LINK).exists() {
        let _ = ip(&format!("link delete {HOST_LINK}"));
    }
    let listing = output("ip", &["netns", "list"]).unwrap_or_default();
    for namespace in bench_namespaces(&listing) {
        let pids = output("ip", &["netns", "pids", &namespace]).unwrap_or_default();
        for pid in pids.split_whitespace() {
            let _ = output("kill", &["-KILL", pid]);
        }
        let _ = ip(&format!("netns delete {namespace}"));
    }
}

/// The bench's namespaces in `ip netns list`'s answer (`name (id: 3)` lines).
fn bench_namespaces(listing: &str) -> Vec<String> {
    listing
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.starts_with(PREFIX))
        .map(str::to_owned)
        .collect()
}

/// Bytes the conductor's link to the switch has sent since it was made (its `/sys` is the
/// namespace's under `ip netns exec`).
pub(super) fn conductor_tx_bytes() -> anyhow::Result<u64> {
    let file = "/sys/class/net/eth0/statistics/tx_bytes";
    let text = output("ip", &["netns", "exec", CONDUCTOR, "cat", file])?;
    text.trim()
        .parse()
        .with_context(|| format!("the conductor's tx_bytes: {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machines_have_addresses_of_their_own() {
        assert_eq!(agent_ip(0), "10.231.1.10");
        assert_eq!(agent_ip(63), "10.231.1.73");
        assert_eq!(agent_ip(200), "10.231.2.10");
        assert_eq!(agent_mac(0), "52:54:00:fb:00:00");
        assert_eq!(agent_mac(63), "52:54:00:fb:00:3f");
        assert_eq!(agent_namespace(7), "ffb-a7");
    }

    #[test]
    fn the_bucket_holds_10_ms_and_at_least_a_mib() {
        assert_eq!(tbf_burst(1000), 1_250_000);
        assert_eq!(tbf_burst(100), 1 << 20);
        assert_eq!(tbf_burst(10_000), 12_500_000);
    }

    #[test]
    fn only_the_benchs_namespaces_are_removed() {
        assert_eq!(
            bench_namespaces("ffb-a1 (id: 3)\nferric-chaos-1-0\nffb-sw (id: 1)\n"),
            ["ffb-a1", "ffb-sw"]
        );
    }
}
