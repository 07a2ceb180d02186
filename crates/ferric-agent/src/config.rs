//! The agent's settings: flags merged with what the kernel command line says (`ipa-api-url=`,
//! `ferric.api_url=`, `ipa-agent-token=`, `ipa-advertise-host=`, `BOOTIF=`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// How power actions (`standby.power_off`, `standby.run_image`) are carried out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerMode {
    /// Really power off / reboot the machine (inside the ramdisk).
    Real,
    /// Log what would happen and do nothing: the agent runs on a developer's machine or in a
    /// test, where powering off the host would be a disaster.
    Dry,
}

/// Everything the agent needs to run; built by `main` from flags and `/proc/cmdline`, and by
/// tests directly.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Bare Metal API base URLs (without `/v1`), tried in order.
    pub api_urls: Vec<String>,
    /// Where the agent's own REST API listens (port 9999 by default).
    pub listen: SocketAddr,
    /// The host put into the callback URL; by default the local address that routes to the API.
    pub advertise_host: Option<String>,
    /// Disks to use instead of the block devices found in `/sys/block` (files or devices).
    pub disks: Vec<PathBuf>,
    /// Root of the proc filesystem (`/proc`), injectable for tests.
    pub proc_root: PathBuf,
    /// Root of sysfs (`/sys`), injectable for tests.
    pub sys_root: PathBuf,
    /// Whether power actions are real.
    pub power: PowerMode,
    /// Skip lookup and heartbeats: serve the command API only (benchmarks, manual use).
    pub standalone: bool,
    /// A token given in advance (`ipa-agent-token=`, virtual-media boots and standalone mode).
    pub agent_token: Option<String>,
    /// The node's UUID when known in advance (`ipa-node-uuid=`), sent with the lookup.
    pub node_uuid: Option<String>,
    /// MAC the machine PXE-booted from (`BOOTIF=`), reported in the inventory.
    pub pxe_mac: Option<String>,
    /// Give up the lookup after this long (the ramdisk's init restarts the agent).
    pub lookup_timeout: Duration,
    /// Accept md5 image checksums (Ironic's `agent_md5_checksum_enable` also turns this on).
    pub allow_md5: bool,
    /// Where to post the hardware inventory at start-up (`ipa-inspection-callback-url=`):
    /// Ferric's `/v1/continue_inspection` or an inspection service's `/v1/continue`.
    pub inspection_callback_url: Option<String>,
    /// The mdadm program that builds software RAID (`mdadm` on the PATH by default).
    pub mdadm: PathBuf,
    /// Listen for LLDP this long on every NIC when the inventory is collected
    /// (`ipa-collect-lldp=1`, `ipa-lldp-timeout=`); `None`: do not (IPA's default).
    pub lldp_timeout: Option<Duration>,
    /// Auto-TLS (IPA's `enable_auto_tls`): serve the API over HTTPS with a certificate made at
    /// start and sent in heartbeats, when the Bare Metal API knows `agent_verify_ca` (1.68).
    pub auto_tls: bool,
    /// Where `rescue.finalize_rescue` writes the rescue password and the `/etc/.rescued`
    /// marker (`/` in the ramdisk; tests point it elsewhere).
    pub rescue_root: PathBuf,
    /// PEM certificates (IPA's `cafile`, `ipa-cafile=`) trusted, besides the system's roots,
    /// for an `https://` Bare Metal API: a site CA or the API's self-signed certificate packed
    /// into the ramdisk (`ferric ramdisk build --file`).
    pub api_ca_file: Option<PathBuf>,
    /// Do not verify the Bare Metal API's certificate (IPA's `insecure`, `ipa-insecure=1`):
    /// the traffic is still encrypted, but anyone on the path can pose as the API.
    pub api_insecure: bool,
}

impl AgentConfig {
    /// Defaults for a ramdisk: port 9999 on every address, the real `/proc` and `/sys`.
    pub fn new(api_urls: Vec<String>) -> AgentConfig {
        AgentConfig {
            api_urls,
            listen: SocketAddr::from(([0, 0, 0, 0], 9999)),
            advertise_host: None,
            disks: Vec::new(),
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            power: PowerMode::Dry,
            standalone: false,
            agent_token: None,
            node_uuid: None,
            pxe_mac: None,
            lookup_timeout: Duration::from_secs(600),
            allow_md5: false,
            inspection_callback_url: None,
            mdadm: PathBuf::from("mdadm"),
            lldp_timeout: None,
            auto_tls: true,
            rescue_root: PathBuf::from("/"),
            api_ca_file: None,
            api_insecure: false,
        }
    }
}

/// The agent's settings found on the kernel command line.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct KernelArgs {
    /// `ipa-api-url=` or `ferric.api_url=` (comma-separated lists allowed).
    pub api_urls: Vec<String>,
    /// `ipa-agent-token=`.
    pub agent_token: Option<String>,
    /// `ipa-advertise-host=`.
    pub advertise_host: Option<String>,
    /// `ipa-node-uuid=`.
    pub node_uuid: Option<String>,
    /// `BOOTIF=01-aa-bb-cc-dd-ee-ff` as a MAC address.
    pub pxe_mac: Option<String>,
    /// `ipa-inspection-callback-url=`.
    pub inspection_callback_url: Option<String>,
    /// `ipa-collect-lldp=1` (also `true`, `yes`): report LLDP in the inventory.
    pub collect_lldp: bool,
    /// `ipa-lldp-timeout=` in seconds (IPA's default, 30, otherwise).
    pub lldp_timeout: Option<Duration>,
    /// `ipa-enable-auto-tls=` (IPA's switch; true unless it says false/0).
    pub auto_tls: bool,
    /// `ipa-cafile=`: a PEM file in the ramdisk trusted for the API's certificate.
    pub api_ca_file: Option<PathBuf>,
    /// `ipa-insecure=1` (also `true`, `yes`): do not verify the API's certificate.
    pub api_insecure: bool,
}

impl KernelArgs {
    /// How long to listen for LLDP: `None` unless `ipa-collect-lldp=1`.
    pub fn lldp(&self) -> Option<Duration> {
        self.collect_lldp
            .then(|| self.lldp_timeout.unwrap_or(DEFAULT_LLDP_TIMEOUT))
    }
}

/// IPA's `lldp_timeout`.
pub const DEFAULT_LLDP_TIMEOUT: Duration = Duration::from_secs(30);

impl KernelArgs {
    /// Parses a kernel command line (the content of `/proc/cmdline`).
    pub fn parse(cmdline: &str) -> KernelArgs {
        let mut args = KernelArgs {
            auto_tls: true,
            ..KernelArgs::default()
        };
        for word in cmdline.split_whitespace() {
            let Some((key, value)) = word.split_once('=') else {
                continue;
            };
            let value = value.trim_matches('"');
            match key {
                "ipa-api-url" | "ferric.api_url" => args.api_urls.extend(
                    value
                        .split(',')
                        .filter(|url| !url.is_empty())
                        .map(|url| url.trim_end_matches('/').to_owned()),
                ),
                "ipa-agent-token" | "ferric.agent_token" => {
                    args.agent_token = Some(value.to_owned())
                }
                "ipa-advertise-host" => args.advertise_host = Some(value.to_owned()),
                "ipa-node-uuid" => args.node_uuid = Some(value.to_owned()),
                "ipa-inspection-callback-url" => {
                    args.inspection_callback_url = Some(value.to_owned())
                }
                "BOOTIF" => args.pxe_mac = bootif_mac(value),
                "ipa-collect-lldp" => args.collect_lldp = is_true(value),
                "ipa-cafile" if !value.is_empty() => args.api_ca_file = Some(PathBuf::from(value)),
                "ipa-insecure" => args.api_insecure = is_true(value),
                "ipa-lldp-timeout" => {
                    args.lldp_timeout = value
                        .parse::<f64>()
                        .ok()
                        .filter(|seconds| seconds.is_finite() && *seconds >= 0.0)
                        .map(Duration::from_secs_f64)
                }
                "ipa-enable-auto-tls" => {
                    args.auto_tls = !matches!(
                        value.to_ascii_lowercase().as_str(),
                        "0" | "false" | "no" | "off"
                    );
                }
                _ => {}
            }
        }
        args
    }
}

/// A kernel-argument boolean as IPA reads it: `1`, `true`, `yes`, `on` (any case).
fn is_true(value: &str) -> bool {
    matches!(
        value.to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

/// `01-52-54-00-12-34-56` (PXELINUX/iPXE form, hardware type first) → `52:54:00:12:34:56`.
fn bootif_mac(value: &str) -> Option<String> {
    let parts: Vec<&str> = value.split(['-', ':']).collect();
    let octets = match parts.len() {
        7 => &parts[1..],
        6 => &parts[..],
        _ => return None,
    };
    if octets
        .iter()
        .all(|octet| octet.len() == 2 && octet.chars().all(|c| c.is_ascii_hexdigit()))
    {
        Some(octets.join(":").to_ascii_lowercase())
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_args_name_the_api_token_and_boot_mac() {
        let args = KernelArgs::parse(
            "console=ttyS0 ipa-api-url=http://10.0.0.1:6385/ ferric.api_url=http://b:6385 \
             ipa-agent-token=abc BOOTIF=01-52-54-00-AA-bb-01 quiet",
        );
        assert_eq!(
            args.api_urls,
            vec![
                "http://10.0.0.1:6385".to_owned(),
                "http://b:6385".to_owned()
            ]
        );
        assert_eq!(args.agent_token.as_deref(), Some("abc"));
        assert_eq!(args.pxe_mac.as_deref(), Some("52:54:00:aa:bb:01"));
    }

    #[test]
    fn lldp_is_collected_only_when_asked() {
        assert_eq!(KernelArgs::parse("quiet").lldp(), None);
        assert_eq!(
            KernelArgs::parse("ipa-collect-lldp=1").lldp(),
            Some(DEFAULT_LLDP_TIMEOUT)
        );
        assert_eq!(
            KernelArgs::parse("ipa-collect-lldp=True ipa-lldp-timeout=7.5").lldp(),
            Some(Duration::from_millis(7500))
        );
        assert_eq!(
            KernelArgs::parse("ipa-collect-lldp=0 ipa-lldp-timeout=5").lldp(),
            None
        );
    }

    #[test]
    fn api_certificate_settings_come_from_ipa_arguments() {
        let args = KernelArgs::parse("ipa-cafile=/etc/ferric/api-ca.pem ipa-insecure=True");
        assert_eq!(
            args.api_ca_file.as_deref(),
            Some(std::path::Path::new("/etc/ferric/api-ca.pem"))
        );
        assert!(args.api_insecure);
        let plain = KernelArgs::parse("ipa-cafile= ipa-insecure=0");
        assert_eq!(plain.api_ca_file, None);
        assert!(!plain.api_insecure);
    }

    #[test]
    fn malformed_bootif_is_ignored() {
        assert_eq!(KernelArgs::parse("BOOTIF=zz").pxe_mac, None);
        assert_eq!(KernelArgs::parse("BOOTIF=01-52-54-00-aa").pxe_mac, None);
    }
}
