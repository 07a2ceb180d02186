//! dnsmasq for network boot: the flags that make it a DHCP server for iPXE and nothing else.
//!
//! Ferric either starts its own dnsmasq (`ferric server` with `dhcp_interface` set) or writes
//! into the `--dhcp-hostsdir` of one the operator runs; in both cases the `ipxe` boot
//! interface lists a node's MACs in that directory only while the node is in a ramdisk phase.
//! The lab starts one on its private segment with the same flags.
//!
//! Three kinds of client get a boot file, told apart by what they send (tags are made
//! mutually exclusive, so no entry depends on dnsmasq's order of preference):
//! - iPXE (option 175, e.g. a NIC's iPXE ROM or the loader below once it runs): the HTTP
//!   URL of `boot.ipxe`;
//! - a firmware's own PXE client (no 175; architecture in option 93): an iPXE loader from
//!   dnsmasq's TFTP server, `snponly.efi` for UEFI x86-64 (7, 9), `undionly.kpxe` for BIOS
//!   (0) — which then asks again as iPXE;
//! - UEFI HTTP boot (vendor class `HTTPClient`, option 60, echoed in the answer as the
//!   UEFI specification requires): the HTTP URL of the same UEFI loader.

use std::path::PathBuf;

/// Where Debian's `ipxe` package installs the iPXE loaders firmware network boot fetches.
pub const IPXE_DIR: &str = "/usr/lib/ipxe";
/// The iPXE loader for UEFI x86-64 clients: it drives the NIC through the firmware's own
/// network driver (SNP), so it works on any NIC the firmware can use, for PXE and HTTP boot.
pub const UEFI_LOADER: &str = "snponly.efi";
/// The iPXE loader for BIOS PXE clients: it uses the NIC's PXE ROM (UNDI).
pub const BIOS_LOADER: &str = "undionly.kpxe";

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
    /// Serve the iPXE loaders ([`UEFI_LOADER`], [`BIOS_LOADER`]) from this directory over
    /// TFTP to firmware PXE clients (native PXE). `None`: only clients that are iPXE already
    /// get a boot file.
    pub tftp_root: Option<PathBuf>,
    /// The HTTP URL of the UEFI loader for UEFI HTTP boot clients. `None`: they get no offer
    /// they can use.
    pub http_boot_url: Option<String>,
    /// The first-stage loaders handed to firmware PXE clients by architecture
    /// (`ipxe_bootfile_name_by_arch`).
    pub loaders: Loaders,
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
        if self.tftp_root.is_some() || self.http_boot_url.is_some() {
            // Option 93, the client's architecture (RFC 4578, IANA): 7 and 9 are UEFI x86-64
            // (firmwares send either), 0 is BIOS.
            args.extend([
                "--dhcp-match=set:efi64,option:client-arch,7".into(),
                "--dhcp-match=set:efi64,option:client-arch,9".into(),
                "--dhcp-match=set:bios,option:client-arch,0".into(),
                "--dhcp-match=set:arm64,option:client-arch,11".into(),
                "--dhcp-vendorclass=set:httpclient,HTTPClient".into(),
            ]);
        }
        if let Some(root) = &self.tftp_root {
            let loaders = &self.loaders;
            args.extend([
                "--enable-tftp".into(),
                format!("--tftp-root={}", root.display()),
                format!(
                    "--dhcp-boot=tag:efi64,tag:!ipxe,tag:!httpclient,{}",
                    loaders.x86_64_uefi
                ),
                format!(
                    "--dhcp-boot=tag:bios,tag:!ipxe,tag:!httpclient,{}",
                    loaders.x86_64_bios
                ),
            ]);
            if let Some(arm64) = &loaders.aarch64_uefi {
                args.push(format!(
                    "--dhcp-boot=tag:arm64,tag:!ipxe,tag:!httpclient,{arm64}"
                ));
            }
        }
        if let Some(url) = &self.http_boot_url {
            args.extend([
                // A UEFI HTTP boot client ignores an offer without option 60 = HTTPClient.
                "--dhcp-option-force=tag:httpclient,tag:!ipxe,option:vendor-class,HTTPClient"
                    .into(),
                format!("--dhcp-boot=tag:httpclient,tag:!ipxe,{url}"),
            ]);
        }
        args
    }
}

/// The first-stage iPXE loaders DHCP hands firmware PXE clients, by the architecture they
/// announce in DHCP option 93 (`boot_arch::loaders` reads them from the settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaders {
    /// x86_64 UEFI (option 93 = 7 or 9).
    pub x86_64_uefi: String,
    /// x86 legacy BIOS (option 93 = 0).
    pub x86_64_bios: String,
    /// ARM64 UEFI (option 93 = 11), when the site has one.
    pub aarch64_uefi: Option<String>,
}

impl Default for Loaders {
    fn default() -> Self {
        Self {
            x86_64_uefi: UEFI_LOADER.to_owned(),
            x86_64_bios: BIOS_LOADER.to_owned(),
            aarch64_uefi: None,
        }
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
            tftp_root: None,
            http_boot_url: None,
            loaders: Loaders::default(),
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
        assert!(
            !args
                .iter()
                .any(|arg| arg.contains("tftp") || arg.contains("HTTPClient"))
        );
    }

    #[test]
    fn firmware_clients_get_ipxe_by_architecture_and_http_clients_a_url() {
        let options = DnsmasqOptions {
            interface: "br0".into(),
            range: "10.0.0.100,10.0.0.199,255.255.255.0,1h".into(),
            boot_url: "http://10.0.0.1:8080/boot.ipxe".into(),
            hosts_dir: "/state/hosts".into(),
            lease_file: "/state/leases".into(),
            log_file: None,
            pid_file: None,
            known_hosts_only: false,
            router_advertisements: true,
            tftp_root: Some(IPXE_DIR.into()),
            http_boot_url: Some("http://10.0.0.1:8080/snponly.efi".into()),
            loaders: Loaders::default(),
        };
        let args = options.args();
        for flag in [
            "--dhcp-boot=tag:ipxe,http://10.0.0.1:8080/boot.ipxe",
            "--enable-tftp",
            "--tftp-root=/usr/lib/ipxe",
            "--dhcp-match=set:efi64,option:client-arch,7",
            "--dhcp-match=set:bios,option:client-arch,0",
            "--dhcp-boot=tag:efi64,tag:!ipxe,tag:!httpclient,snponly.efi",
            "--dhcp-boot=tag:bios,tag:!ipxe,tag:!httpclient,undionly.kpxe",
            "--dhcp-vendorclass=set:httpclient,HTTPClient",
            "--dhcp-option-force=tag:httpclient,tag:!ipxe,option:vendor-class,HTTPClient",
            "--dhcp-boot=tag:httpclient,tag:!ipxe,http://10.0.0.1:8080/snponly.efi",
        ] {
            assert!(
                args.iter().any(|arg| arg == flag),
                "{flag} missing: {args:?}"
            );
        }
        assert!(
            !args
                .iter()
                .any(|arg| arg.starts_with("--dhcp-boot=tag:arm64"))
        );

        // ARM64 UEFI clients (option 93 = 11) get the site's arm64 loader.
        let by_arch =
            crate::boot_arch::parse_map("ipxe_bootfile_name_by_arch", "aarch64:snp-arm64.efi")
                .unwrap();
        let options = DnsmasqOptions {
            loaders: crate::boot_arch::loaders(&by_arch).unwrap(),
            ..options
        };
        let args = options.args();
        for flag in [
            "--dhcp-match=set:arm64,option:client-arch,11",
            "--dhcp-boot=tag:arm64,tag:!ipxe,tag:!httpclient,snp-arm64.efi",
            "--dhcp-boot=tag:efi64,tag:!ipxe,tag:!httpclient,snponly.efi",
        ] {
            assert!(
                args.iter().any(|arg| arg == flag),
                "{flag} missing: {args:?}"
            );
        }
    }
}
