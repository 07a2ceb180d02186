//! dnsmasq for the lab's segment: DHCP, router advertisements and the iPXE chain to HTTP.
//!
//! The flags are Ferric's own (`ferric_drivers::dhcp`); `ferric server` writes its nodes'
//! hostsdir entries into `DIR/dhcp-hosts/` when started with `--dhcp-hostsdir` pointing there.

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
        }
        .args()
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
