//! The PXE filter (`reference/ironic.md` §5.1, dnsmasq driver): dnsmasq `--dhcp-hostsdir`
//! entries so that only machines under introspection — and, with discovery on, unknown
//! machines — get the discovery boot.
//!
//! Ferric shares one dnsmasq between inspection and the `ipxe` boot interface, which lists a
//! node's MACs (`ferric-<mac>` files) while the node is in a ramdisk phase. The filter owns
//! only its own files (`inspector-<mac>`, and `inspector-unknown` for discovery):
//! - a MAC under introspection: `<mac>,set:ferric` (known, so answered even with
//!   `--dhcp-ignore=tag:!known`);
//! - discovery on: `inspector-unknown` with the wildcard `*:*:*:*:*:*,set:ferric` (every
//!   machine is known), and `<mac>,ignore` for MACs of enrolled ports not under introspection
//!   and not in a ramdisk phase of their own (no `ferric-<mac>` file), so only unknown
//!   machines and the introspected ones boot. dnsmasq prefers an exact MAC over a wildcard.
//!
//! A sync computes the wanted files, writes what differs and removes the filter's files
//! nobody wants; it is idempotent and runs at start, at each introspection start and end,
//! and periodically.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::mac::normalize_mac;

const PREFIX: &str = "inspector-";
const UNKNOWN_FILE: &str = "inspector-unknown";

/// `52:54:00:ab:cd:ef` → `52-54-00-ab-cd-ef`, as the `ipxe` boot interface names its files.
fn hexhyp(mac: &str) -> String {
    mac.to_ascii_lowercase().replace(':', "-")
}

/// What the filter should allow right now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterState {
    /// MACs of nodes under introspection.
    pub allowed: BTreeSet<String>,
    /// MACs of every enrolled port.
    pub known: BTreeSet<String>,
    /// Unknown machines get the discovery boot.
    pub discovery: bool,
}

/// The filter's files, by name, with their contents. Only MAC addresses make entries: a name
/// with `/` or a value with a newline would write outside the hostsdir or add dnsmasq
/// options, and the addresses come from ports and inspection data.
pub fn wanted_files(state: &FilterState, hostsdir: &Path) -> BTreeMap<String, String> {
    let macs = |set: &BTreeSet<String>| -> BTreeSet<String> {
        set.iter().filter_map(|mac| normalize_mac(mac)).collect()
    };
    let (allowed, known) = (macs(&state.allowed), macs(&state.known));
    let mut files = BTreeMap::new();
    for mac in &allowed {
        files.insert(
            format!("{PREFIX}{}", hexhyp(mac)),
            format!("{mac},set:ferric\n"),
        );
    }
    if state.discovery {
        files.insert(
            UNKNOWN_FILE.to_owned(),
            "*:*:*:*:*:*,set:ferric\n".to_owned(),
        );
        for mac in known.difference(&allowed) {
            let in_ramdisk_phase = hostsdir.join(format!("ferric-{}", hexhyp(mac))).exists();
            if !in_ramdisk_phase {
                files.insert(
                    format!("{PREFIX}{}", hexhyp(mac)),
                    format!("{mac},ignore\n"),
                );
            }
        }
    }
    files
}

/// What one sync changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    pub written: usize,
    pub removed: usize,
}

/// Brings `hostsdir` in line with `state`.
pub fn sync(state: &FilterState, hostsdir: &Path) -> std::io::Result<SyncReport> {
    std::fs::create_dir_all(hostsdir)?;
    let wanted = wanted_files(state, hostsdir);
    let mut report = SyncReport::default();
    for entry in std::fs::read_dir(hostsdir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(PREFIX) && !wanted.contains_key(&name) {
            std::fs::remove_file(entry.path())?;
            report.removed += 1;
        }
    }
    for (name, contents) in &wanted {
        let path: PathBuf = hostsdir.join(name);
        let current = std::fs::read_to_string(&path).ok();
        if current.as_deref() != Some(contents.as_str()) {
            let temporary = hostsdir.join(format!(".{name}.tmp"));
            std::fs::write(&temporary, contents)?;
            std::fs::rename(&temporary, &path)?;
            report.written += 1;
        }
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(macs: &[&str]) -> BTreeSet<String> {
        macs.iter().map(|mac| (*mac).to_owned()).collect()
    }

    /// Found by the `pxe_inputs` fuzz target: a port address that is not a MAC named a file
    /// outside the hostsdir (`inspector-../x`) and could add lines to it.
    #[test]
    fn strings_that_are_not_macs_make_no_entries() {
        let state = FilterState {
            allowed: set(&[
                "../../etc/x",
                "52:54:00:00:00:01\nset:evil",
                "52-54-00-00-00-0A",
            ]),
            known: set(&["{\"a\": \"b/c\"}", "52:54:00:00:00:02"]),
            discovery: true,
        };
        let files = wanted_files(&state, Path::new("/nonexistent"));
        let names: Vec<&str> = files.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "inspector-52-54-00-00-00-02",
                "inspector-52-54-00-00-00-0a",
                "inspector-unknown"
            ]
        );
        assert_eq!(
            files["inspector-52-54-00-00-00-0a"],
            "52:54:00:00:00:0a,set:ferric\n"
        );
    }

    #[test]
    fn only_introspected_macs_without_discovery() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = FilterState {
            allowed: set(&["52:54:00:00:00:01"]),
            known: set(&["52:54:00:00:00:01", "52:54:00:00:00:02"]),
            discovery: false,
        };
        let report = sync(&state, dir.path()).expect("sync");
        assert_eq!(
            report,
            SyncReport {
                written: 1,
                removed: 0
            }
        );
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .expect("read")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, vec!["inspector-52-54-00-00-00-01".to_owned()]);
        // Idempotent.
        assert_eq!(
            sync(&state, dir.path()).expect("sync"),
            SyncReport::default()
        );
        // The introspection ended: its file goes, other owners' files stay.
        std::fs::write(dir.path().join("ferric-52-54-00-00-00-09"), "x").expect("write");
        let report = sync(&FilterState::default(), dir.path()).expect("sync");
        assert_eq!(
            report,
            SyncReport {
                written: 0,
                removed: 1
            }
        );
        assert!(dir.path().join("ferric-52-54-00-00-00-09").exists());
    }

    #[test]
    fn discovery_allows_unknown_and_denies_idle_known_macs() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("ferric-52-54-00-00-00-03"), "x").expect("write");
        let state = FilterState {
            allowed: set(&["52:54:00:00:00:01"]),
            known: set(&[
                "52:54:00:00:00:01",
                "52:54:00:00:00:02",
                "52:54:00:00:00:03",
            ]),
            discovery: true,
        };
        let files = wanted_files(&state, dir.path());
        assert_eq!(files["inspector-unknown"], "*:*:*:*:*:*,set:ferric\n");
        assert_eq!(
            files["inspector-52-54-00-00-00-01"],
            "52:54:00:00:00:01,set:ferric\n"
        );
        assert_eq!(
            files["inspector-52-54-00-00-00-02"],
            "52:54:00:00:00:02,ignore\n"
        );
        // Deploying elsewhere: left to the boot interface.
        assert!(!files.contains_key("inspector-52-54-00-00-00-03"));
    }
}
