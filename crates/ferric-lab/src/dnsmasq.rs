//! dnsmasq for the lab's segment: DHCP, router advertisements and the iPXE chain to HTTP.
//!
//! Kept to this one module because Ferric's boot service will take over managing dnsmasq
//! (hostsdir entries, the PXE filter); then `lab up` calls that instead of [`start`].

use std::path::PathBuf;
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

    /// The flags, each of which lab-facts found to matter (see the comments for why).
    pub fn args(&self) -> Vec<String> {
        let (first, last) = DHCP_RANGE;
        let bridge = &self.bridge;
        vec![
            // Ignore /etc/dnsmasq.conf and the host's resolver: this instance is only the lab's.
            "--conf-file=/dev/null".into(),
            "--no-resolv".into(),
            "--no-hosts".into(),
            // No DNS at all; DHCP only.
            "--port=0".into(),
            "--bind-interfaces".into(),
            format!("--interface={bridge}"),
            // Stay root: the state directory may not be readable by the dnsmasq user.
            "--user=root".into(),
            "--group=root".into(),
            format!("--pid-file={}", self.pid_file.display()),
            format!("--log-facility={}", self.log_file.display()),
            format!("--dhcp-leasefile={}", self.lease_file.display()),
            "--log-dhcp".into(),
            // dnsmasq would ping each address ~3 s before offering it.
            "--no-ping".into(),
            "--dhcp-authoritative".into(),
            format!("--dhcp-range={first},{last},255.255.255.0,1h"),
            // Per-MAC entries, re-read without restarts; Ferric will write them.
            format!("--dhcp-hostsdir={}", self.hosts_dir.display()),
            // Router advertisements stop iPXE's ~13 s wait for IPv6 autoconfiguration.
            "--enable-ra".into(),
            format!("--dhcp-range=::,constructor:{bridge},ra-only"),
            // iPXE announces itself with option 175; give it the HTTP script, and set
            // "no ProxyDHCP wait" (encapsulated 175.176 = 1), which saves it 2 s.
            "--dhcp-match=set:ipxe,175".into(),
            "--dhcp-option=tag:ipxe,encap:175,176,1".into(),
            format!("--dhcp-boot=tag:ipxe,{}", self.boot_url),
        ]
    }
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
        ] {
            assert!(args.iter().any(|arg| arg == expected), "missing {expected}");
        }
    }
}
