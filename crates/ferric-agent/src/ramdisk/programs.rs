//! The programs and data files the agent calls inside the ramdisk, found on the build host,
//! and the shared libraries the programs link.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A host file the agent needs in the ramdisk.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    /// The name `--tool NAME=PATH` and `--without NAME` use.
    pub name: &'static str,
    /// Where the agent finds it in the ramdisk; programs go on the PATH.
    pub packed_as: &'static str,
    /// Where Debian puts it (merged /usr: `/sbin` is `/usr/sbin`).
    pub host_path: &'static str,
    /// The Debian package that ships it.
    pub package: &'static str,
    /// What the agent does without it.
    pub purpose: &'static str,
}

/// Everything the agent calls, with the Debian package each comes from.
pub const TOOLS: &[Tool] = &[
    Tool {
        name: "nvme",
        packed_as: "usr/sbin/nvme",
        host_path: "/usr/sbin/nvme",
        package: "nvme-cli",
        purpose: "NVMe secure erase with nvme format",
    },
    Tool {
        name: "hdparm",
        packed_as: "usr/sbin/hdparm",
        host_path: "/usr/sbin/hdparm",
        package: "hdparm",
        purpose: "ATA secure erase",
    },
    Tool {
        name: "ipmitool",
        packed_as: "usr/bin/ipmitool",
        host_path: "/usr/bin/ipmitool",
        package: "ipmitool",
        purpose: "the BMC address in the inventory",
    },
    Tool {
        name: "mdadm",
        packed_as: "usr/sbin/mdadm",
        host_path: "/usr/sbin/mdadm",
        package: "mdadm",
        purpose: "software RAID (the raid.* steps)",
    },
    Tool {
        name: "ca-certificates",
        packed_as: "etc/ssl/certs/ca-certificates.crt",
        host_path: "/etc/ssl/certs/ca-certificates.crt",
        package: "ca-certificates",
        purpose: "images from HTTPS URLs signed by public CAs",
    },
];

/// Whether an ELF file has no program interpreter (is statically linked).
pub fn is_static_elf(bytes: &[u8]) -> bool {
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    if !bytes.starts_with(b"\x7fELF") || bytes.get(4) != Some(&2) {
        return false;
    }
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    (0..u64::from(phnum)).all(|index| {
        let at = (phoff + index * u64::from(phentsize)) as usize;
        // PT_INTERP = 3
        bytes.get(at..at + 4) != Some(&3u32.to_le_bytes())
    })
}

/// The shared libraries `ldd` lists for `binary` (none for a static or non-ELF file).
pub fn shared_libraries(binary: &Path) -> Vec<PathBuf> {
    let Ok(output) = Command::new("ldd").arg(binary).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| {
            let before_address = line.split(" (0x").next()?;
            let path = before_address.rsplit("=> ").next()?.trim();
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// Adds the libraries of `binary` that `libraries` does not hold yet.
pub fn add_libraries(libraries: &mut Vec<PathBuf>, binary: &Path) {
    for library in shared_libraries(binary) {
        if !libraries.contains(&library) {
            libraries.push(library);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_a_distinct_name_and_place() {
        let names: std::collections::BTreeSet<_> = TOOLS.iter().map(|tool| tool.name).collect();
        let places: std::collections::BTreeSet<_> =
            TOOLS.iter().map(|tool| tool.packed_as).collect();
        assert_eq!(names.len(), TOOLS.len());
        assert_eq!(places.len(), TOOLS.len());
        assert!(TOOLS.iter().all(|tool| !tool.packed_as.starts_with('/')));
    }

    #[test]
    fn a_header_without_program_headers_is_static() {
        let mut elf = vec![0u8; 64];
        elf[..4].copy_from_slice(b"\x7fELF");
        elf[4] = 2;
        assert!(is_static_elf(&elf));
        assert!(!is_static_elf(b"#!/bin/sh"));
    }
}
