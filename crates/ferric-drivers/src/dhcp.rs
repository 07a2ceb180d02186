//! dnsmasq for network boot: the flags that make it a DHCP server for iPXE and nothing else.
//!
//! Ferric either starts its own dnsmasq (`ferric server` with `dhcp_interface` set) or writes
//! into the `--dhcp-hostsdir` of one the operator runs; in both cases the `ipxe` boot
//! interface lists a node's MACs in that directory only while the node is in a ramdisk phase.
//! The lab starts one on its private segment with the same flags.

use std::path::PathBuf;

/// What one dnsmasq instance serves.
#[derive(Debug, Clone)]
pub struct DnsmasqOptions {
    /// The interface it binds to (and only it).
    pub interface: String,
    /// `first,last,netmask[,lease]` of the IPv4 pool.
    pub range: String,
    /// The iPXE script DHCP hands to iPXE clients (Ferric's `<boot_http_url>/boot.ipxe`).
    pub boot_url: String,
    pub hosts_dir: PathBuf,
    pub lease_file: PathBuf,
    /// `Some`: log to this file (the process daemonises); `None`: stay in the foreground and
    /// log to stderr, as a child of `ferric server`.
    pub log_file: Option<PathBuf>,
    pub pid_file: Option<PathBuf>,
    /// Answer only hosts listed in the hostsdir (Ferric's nodes in a ramdisk phase); every
    /// other machine on the segment is ignored.
    pub known_hosts_only: bool,
    /// Send IPv6 router advertisements (the interface needs an IPv6 address): without them
    /// iPXE waits ~13 s for IPv6 autoconfiguration.
    pub router_advertisements: bool,
}

impl DnsmasqOptions {
    /// The command-line flags, each of which the lab prototype found to matter.
    pub fn args(&self) -> Vec<String> {
        let interface = &self.interface;
        let mut args: Vec<String> = vec![
            // Ignore /etc/dnsmasq.conf and the host's resolver: this instance is only ours.
            "--conf-file=/dev/null".into(),
            "--no-resolv".into(),
            "--no-hosts".into(),
            // No DNS at all; DHCP only.
            "--port=0".into(),
            "--bind-interfaces".into(),
            format!("--interface={interface}"),
            // Stay root: the state directory may not be readable by the dnsmasq user.
            "--user=root".into(),
            "--group=root".into(),
            format!("--dhcp-leasefile={}", self.lease_file.display()),
            "--log-dhcp".into(),
            // dnsmasq would ping each address ~3 s before offering it.
            "--no-ping".into(),
            "--dhcp-authoritative".into(),
            format!("--dhcp-range={}", self.range),
            // Per-MAC entries, re-read without restarts; the `ipxe` boot interface writes them.
            format!("--dhcp-hostsdir={}", self.hosts_dir.display()),
            // iPXE announces itself with option 175; give it the HTTP script, and set
            // "no ProxyDHCP wait" (encapsulated 175.176 = 1), which saves it 2 s.
            "--dhcp-match=set:ipxe,175".into(),
            "--dhcp-option=tag:ipxe,encap:175,176,1".into(),
            format!("--dhcp-boot=tag:ipxe,{}", self.boot_url),
        ];
        match &self.log_file {
            Some(log) => args.push(format!("--log-facility={}", log.display())),
            None => {
                args.push("--keep-in-foreground".into());
                args.push("--log-facility=-".into());
            }
        }
        if let Some(pid) = &self.pid_file {
            args.push(format!("--pid-file={}", pid.display()));
        }
        if self.known_hosts_only {
            args.push("--dhcp-ignore=tag:!known".into());
        }
        if self.router_advertisements {
            args.push("--enable-ra".into());
            args.push(format!("--dhcp-range=::,constructor:{interface},ra-only"));
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_serve_ipxe_and_only_known_hosts_when_asked() {
        let options = DnsmasqOptions {
            interface: "br0".into(),
            range: "10.0.0.100,10.0.0.199,255.255.255.0,1h".into(),
            boot_url: "http://10.0.0.1:8080/boot.ipxe".into(),
            hosts_dir: "/state/hosts".into(),
            lease_file: "/state/leases".into(),
            log_file: None,
            pid_file: None,
            known_hosts_only: true,
            router_advertisements: false,
        };
        let args = options.args();
        for flag in [
            "--port=0",
            "--interface=br0",
            "--no-ping",
            "--dhcp-hostsdir=/state/hosts",
            "--dhcp-boot=tag:ipxe,http://10.0.0.1:8080/boot.ipxe",
            "--dhcp-ignore=tag:!known",
            "--keep-in-foreground",
        ] {
            assert!(
                args.iter().any(|arg| arg == flag),
                "{flag} missing: {args:?}"
            );
        }
        assert!(!args.iter().any(|arg| arg == "--enable-ra"));
    }
}
