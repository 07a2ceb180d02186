//! dnsmasq for the lab's segment: DHCP, router advertisements, TFTP of iPXE for the
//! firmware's PXE client, the UEFI HTTP boot answer and the iPXE chain to HTTP; and
//! `deny-dhcp`/`allow-dhcp`, which make it ignore one machine.
//!
//! The flags are Ferric's own (`ferric_drivers::dhcp`); `ferric server` writes its nodes'
//! hostsdir entries into `DIR/dhcp-hosts/` when started with `--dhcp-hostsdir` pointing there.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::host::{self, HostError};
use crate::layout::{DHCP_RANGE, LabPaths};

#[derive(Debug, Clone)]
pub struct DnsmasqConfig {
    pub namespace: String,
    pub bridge: String,
    pub boot_url: String,
    pub pid_file: PathBuf,
    pub log_file: PathBuf,
    pub lease_file: PathBuf,
    pub hosts_dir: PathBuf,
}

impl DnsmasqConfig {
    pub fn new(paths: &LabPaths, namespace: &str, bridge: &str, boot_url: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            bridge: bridge.to_owned(),
            boot_url: boot_url.to_owned(),
            pid_file: paths.dnsmasq_pid(),
            log_file: paths.dnsmasq_log(),
            lease_file: paths.dnsmasq_leases(),
            hosts_dir: paths.dhcp_hosts(),
        }
    }

    /// The flags: Ferric's network-boot dnsmasq, answering every machine on the segment
    /// and sending router advertisements (the bridge has an IPv6 address).
    pub fn args(&self) -> Vec<String> {
        let (first, last) = DHCP_RANGE;
        ferric_drivers::dhcp::DnsmasqOptions {
            interface: self.bridge.clone(),
            range: format!("{first},{last},255.255.255.0,1h"),
            boot_url: self.boot_url.clone(),
            hosts_dir: self.hosts_dir.clone(),
            lease_file: self.lease_file.clone(),
            log_file: Some(self.log_file.clone()),
            pid_file: Some(self.pid_file.clone()),
            known_hosts_only: false,
            router_advertisements: true,
            // Firmware PXE clients (UEFI machines have no iPXE ROM) get iPXE over TFTP from
            // Debian's `ipxe`; UEFI HTTP boot gets it from Ferric's boot file server, which
            // copies it beside boot.ipxe.
            tftp_root: Some(ferric_drivers::dhcp::IPXE_DIR.into()),
            http_boot_url: Some(http_boot_url(&self.boot_url)),
            loaders: ferric_drivers::dhcp::Loaders::default(),
        }
        .args()
    }
}

/// The UEFI loader's URL on the boot file server that serves `boot_url` (`…/boot.ipxe`).
fn http_boot_url(boot_url: &str) -> String {
    let base = boot_url.rsplit_once('/').map_or(boot_url, |(base, _)| base);
    format!("{base}/{}", ferric_drivers::dhcp::UEFI_LOADER)
}

/// Starts dnsmasq inside the namespace; it daemonises, so this returns once it is up.
pub fn start(config: &DnsmasqConfig) -> Result<u32, HostError> {
    std::fs::create_dir_all(&config.hosts_dir).map_err(|source| HostError::File {
        path: config.hosts_dir.clone(),
        source,
    })?;
    let mut args = vec![
        "netns".to_owned(),
        "exec".into(),
        config.namespace.clone(),
        "dnsmasq".into(),
    ];
    args.extend(config.args());
    host::run("ip", &args)?;
    host::read_pid(&config.pid_file).ok_or_else(|| HostError::Failed {
        command: "dnsmasq".into(),
        stderr: format!("started but wrote no pid to {}", config.pid_file.display()),
    })
}

/// The hostsdir file that makes dnsmasq ignore `mac` (`lab deny-dhcp`).
fn deny_file(hosts_dir: &Path, mac: &str) -> PathBuf {
    hosts_dir.join(format!(
        "lab-deny-{}",
        mac.to_ascii_lowercase().replace(':', "-")
    ))
}

/// Makes dnsmasq ignore every DHCP request from `mac` (a `MAC,ignore` host entry), for
/// DHCP-less tests: the machine then gets no lease and no boot file. Returns whether the
/// entry is new. dnsmasq reads new hostsdir files by itself; the SIGHUP makes it certain.
pub fn deny(config: &DnsmasqConfig, mac: &str) -> Result<bool, HostError> {
    std::fs::create_dir_all(&config.hosts_dir).map_err(|source| HostError::File {
        path: config.hosts_dir.clone(),
        source,
    })?;
    let path = deny_file(&config.hosts_dir, mac);
    let new = !path.exists();
    let entry = format!("{},ignore\n", mac.to_ascii_lowercase());
    std::fs::write(&path, entry).map_err(|source| HostError::File { path, source })?;
    reload(config)?;
    Ok(new)
}

/// Undoes [`deny`]: removes the entry and has dnsmasq re-read its hostsdir (a removed file
/// is forgotten only on SIGHUP). Returns whether there was an entry.
pub fn allow(config: &DnsmasqConfig, mac: &str) -> Result<bool, HostError> {
    let path = deny_file(&config.hosts_dir, mac);
    let existed = match std::fs::remove_file(&path) {
        Ok(()) => true,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
        Err(source) => return Err(HostError::File { path, source }),
    };
    reload(config)?;
    Ok(existed)
}

/// The MACs [`deny`] lists now.
pub fn denied(config: &DnsmasqConfig) -> Vec<String> {
    let mut macs: Vec<String> = std::fs::read_dir(&config.hosts_dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            name.strip_prefix("lab-deny-")
                .map(|mac| mac.replace('-', ":"))
        })
        .collect();
    macs.sort();
    macs
}

/// SIGHUP: dnsmasq re-reads its hostsdir, forgetting entries of removed files.
fn reload(config: &DnsmasqConfig) -> Result<(), HostError> {
    let pid = host::read_pid(&config.pid_file)
        .filter(|pid| host::pid_alive(*pid))
        .ok_or_else(|| HostError::Failed {
            command: "dnsmasq".into(),
            stderr: format!(
                "the lab's dnsmasq is not running (no live pid in {}); `lab down` then `lab up`",
                config.pid_file.display()
            ),
        })?;
    host::run("kill", ["-HUP", &pid.to_string()]).map(|_| ())
}

/// Stops the dnsmasq recorded in the pid file, if it runs.
pub fn stop(config: &DnsmasqConfig) -> bool {
    let stopped = host::read_pid(&config.pid_file)
        .is_some_and(|pid| host::terminate(pid, Duration::from_secs(3)));
    let _ = std::fs::remove_file(&config.pid_file);
    stopped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_from_lab_facts_are_all_there() {
        let paths = LabPaths {
            dir: PathBuf::from("/lab"),
        };
        let args =
            DnsmasqConfig::new(&paths, "ns", "br0", "http://10.231.0.1:8080/boot.ipxe").args();
        for expected in [
            "--port=0",
            "--bind-interfaces",
            "--interface=br0",
            "--no-ping",
            "--dhcp-hostsdir=/lab/dhcp-hosts",
            "--log-dhcp",
            "--enable-ra",
            "--dhcp-range=::,constructor:br0,ra-only",
            "--dhcp-match=set:ipxe,175",
            "--dhcp-option=tag:ipxe,encap:175,176,1",
            "--dhcp-boot=tag:ipxe,http://10.231.0.1:8080/boot.ipxe",
            "--tftp-root=/usr/lib/ipxe",
            "--dhcp-boot=tag:efi64,tag:!ipxe,tag:!httpclient,snponly.efi",
            "--dhcp-boot=tag:httpclient,tag:!ipxe,http://10.231.0.1:8080/snponly.efi",
        ] {
            assert!(args.iter().any(|arg| arg == expected), "missing {expected}");
        }
    }

    #[test]
    fn deny_writes_an_ignore_entry_and_allow_removes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = LabPaths {
            dir: dir.path().to_owned(),
        };
        let config = DnsmasqConfig::new(&paths, "ns", "br0", "http://x/boot.ipxe");
        // Not running: the entry is written, and the error says what to do.
        let error = deny(&config, "52:54:00:FE:1A:01").unwrap_err();
        assert!(error.to_string().contains("lab down"), "{error}");
        let entry = std::fs::read_to_string(config.hosts_dir.join("lab-deny-52-54-00-fe-1a-01"))
            .expect("entry written");
        assert_eq!(entry, "52:54:00:fe:1a:01,ignore\n");
        assert_eq!(denied(&config), ["52:54:00:fe:1a:01"]);
        assert!(allow(&config, "52:54:00:fe:1a:01").is_err());
        assert!(denied(&config).is_empty());
    }
}
