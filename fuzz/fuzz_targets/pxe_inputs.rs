//! Network boot inputs: a node's `driver_info` boot settings (`deploy_kernel`,
//! `deploy_ramdisk`, `kernel_append_params`) and port MACs rendered into its iPXE script and
//! dnsmasq hostsdir entries, and the PXE filter's entries for MACs under introspection.
//! Invariant: whatever an API client or a ramdisk wrote, the script has exactly its fixed lines (nothing
//! injected), and every file name stays inside its directory with one-line contents.
#![no_main]

use std::collections::BTreeSet;
use std::path::Path;

use ferric_drivers::BootSettings;
use ferric_drivers::ipxe::IpxeBoot;
use ferric_inspector::mac::normalize_mac;
use ferric_inspector::pxe_filter::{FilterState, wanted_files};
use ferric_model::ProvisionState;
use ferric_model::resources::{Node, Port};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use uuid::Uuid;

/// The lines of the ramdisk script `IpxeBoot` writes.
const SCRIPT_LINES: usize = 9;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.split('\u{0}');
    let written = parts.next().unwrap_or_default();
    // Port addresses are MACs: the API and inspection normalize them before they are stored.
    let mac = normalize_mac(written).unwrap_or_else(|| "52:54:00:00:00:01".to_owned());
    let mac = mac.as_str();
    let driver_info = parts.next().unwrap_or_default();

    let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::Deploying);
    if let Ok(Value::Object(info)) = serde_json::from_str(driver_info) {
        node.driver_info = info;
    }
    let settings = BootSettings {
        http_url: Some("http://10.0.0.1:8080".to_owned()),
        api_url: Some("http://10.0.0.1:6385".to_owned()),
        ..BootSettings::default()
    };
    let port = Port::new(Uuid::nil(), node.uuid, mac);
    let boot = IpxeBoot::new(settings, &[port]);
    if let Ok(script) = boot.ramdisk_script(&node, mac) {
        assert_eq!(script.lines().count(), SCRIPT_LINES, "{script}");
        assert!(!script.contains('\r'), "{script}");
    }

    // The filter is handed any strings: it must not write what is not a MAC.
    let macs: BTreeSet<String> = parts
        .map(str::to_owned)
        .chain([written.to_owned()])
        .collect();
    let state = FilterState {
        allowed: macs.iter().take(2).cloned().collect(),
        known: macs,
        discovery: true,
    };
    for (name, contents) in wanted_files(&state, Path::new("/nonexistent-hostsdir")) {
        assert!(
            !name.contains('/') && name != "." && name != "..",
            "{name:?}"
        );
        assert_eq!(contents.lines().count(), 1, "{contents:?}");
    }
});
