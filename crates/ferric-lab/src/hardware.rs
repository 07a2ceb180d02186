//! What a lab machine is made of (`lab up --hardware`): QEMU's idealised virtio devices, or
//! the NIC and disk controllers of a real server — an Intel e1000e NIC, one NVMe disk and one
//! disk behind a Broadcom MegaRAID SAS controller (`megasas-gen2`), which need the drivers,
//! NVMe secure erase and SCSI disk handling a ramdisk must have for real machines.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A machine's devices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Hardware {
    /// virtio-net NIC and virtio-blk disks (`/dev/vda`, `/dev/vdb`): fast, QEMU only.
    #[default]
    Virtio,
    /// An e1000e NIC, an NVMe disk (`/dev/nvme0n1`) and a disk on a MegaRAID SAS controller
    /// (`/dev/sda`): the drivers of real servers.
    Server,
}

impl Hardware {
    pub fn name(self) -> &'static str {
        match self {
            Hardware::Virtio => "virtio",
            Hardware::Server => "server",
        }
    }

    /// The QEMU `-device` model of the NIC.
    pub fn nic_model(self) -> &'static str {
        match self {
            Hardware::Virtio => "virtio-net-pci",
            Hardware::Server => "e1000e",
        }
    }

    /// The NIC's `-device` properties besides its netdev and MAC. Under UEFI a virtio NIC
    /// carries no option ROM (`romfile=`), so OVMF's own virtio-net driver, PXE and HTTP boot
    /// run; an e1000e keeps QEMU's ROM, because OVMF has no driver for it — the ROM stands in
    /// for the UEFI driver a real server NIC carries in its flash. Legacy: no `romfile=` at
    /// all (naming QEMU's default ROM explicitly made SeaBIOS skip it: QEMU 7.2, SeaBIOS 1.16.2).
    pub fn nic_rom(self, uefi: bool) -> &'static str {
        match (self, uefi) {
            (Hardware::Virtio, true) => ",romfile=",
            _ => "",
        }
    }

    /// `-drive` / `-device` arguments for `disks` (the first is the one the machine boots
    /// from; `boot` is appended to its device, e.g. `,bootindex=1` under UEFI). Every disk gets
    /// a serial number, so root device hints can tell them apart.
    pub fn disk_arguments(self, disks: &[PathBuf], boot: &str) -> Vec<String> {
        let mut arguments = Vec::new();
        for (index, disk) in disks.iter().enumerate() {
            arguments.push("-drive".to_owned());
            arguments.push(format!(
                "file={},if=none,id=disk{index},format=raw",
                disk.display()
            ));
            let device = match (self, index) {
                (Hardware::Virtio, _) => {
                    format!("virtio-blk-pci,drive=disk{index},serial=ferric-disk{index}")
                }
                (Hardware::Server, 0) => {
                    format!("nvme,drive=disk{index},serial=ferric-disk{index}")
                }
                (Hardware::Server, _) => {
                    // One controller for every further disk.
                    if index == 1 {
                        arguments.push("-device".to_owned());
                        arguments.push("megasas-gen2,id=raid0".to_owned());
                    }
                    format!("scsi-hd,drive=disk{index},bus=raid0.0,serial=ferric-disk{index}")
                }
            };
            arguments.push("-device".to_owned());
            arguments.push(if index == 0 { device + boot } else { device });
        }
        arguments
    }
}

/// The qdev id of the SCSI controller that presents the RAID volumes the BMC built.
pub const VOLUME_CONTROLLER: &str = "raidvol";

/// `-drive` / `-device` arguments for the volumes the BMC's RAID controller presents, each
/// with its backing file: one SCSI disk per volume with the volume's serial and NAA WWN (so a
/// root device hint can name it), `boot` appended to the first. The controller the guest sees
/// is a virtio-scsi HBA on every kind of machine: OVMF has no MegaRAID driver, and the volume
/// must be bootable under UEFI as a RAID controller's virtual disk is on a server.
pub fn volume_arguments(
    volumes: &[(PathBuf, crate::machine::VolumeDisk)],
    boot: &str,
) -> Vec<String> {
    if volumes.is_empty() {
        return Vec::new();
    }
    let mut arguments = vec![
        "-device".to_owned(),
        format!("virtio-scsi-pci,id={VOLUME_CONTROLLER}"),
    ];
    for (index, (file, volume)) in volumes.iter().enumerate() {
        arguments.push("-drive".to_owned());
        arguments.push(format!(
            "file={},if=none,id=volume{},format=raw",
            file.display(),
            volume.id
        ));
        arguments.push("-device".to_owned());
        arguments.push(format!(
            "scsi-hd,drive=volume{id},bus={VOLUME_CONTROLLER}.0,serial={serial},wwn={wwn:#018x}{boot}",
            id = volume.id,
            serial = volume.serial,
            wwn = volume.wwn,
            boot = if index == 0 { boot } else { "" },
        ));
    }
    arguments
}

/// `--hardware` of `lab up`: one kind per machine, the last repeated for the rest
/// (`server` makes every machine a server; `virtio,virtio,server` only the third onwards).
pub fn per_machine(kinds: &[Hardware], index: usize) -> Hardware {
    kinds
        .get(index)
        .or_else(|| kinds.last())
        .copied()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_has_an_nvme_disk_and_a_megaraid_disk() {
        let disks = [PathBuf::from("/lab/d0.img"), PathBuf::from("/lab/d1.img")];
        let arguments = Hardware::Server
            .disk_arguments(&disks, ",bootindex=1")
            .join(" ");
        assert_eq!(
            arguments,
            "-drive file=/lab/d0.img,if=none,id=disk0,format=raw \
             -device nvme,drive=disk0,serial=ferric-disk0,bootindex=1 \
             -drive file=/lab/d1.img,if=none,id=disk1,format=raw \
             -device megasas-gen2,id=raid0 \
             -device scsi-hd,drive=disk1,bus=raid0.0,serial=ferric-disk1"
        );
        assert_eq!(Hardware::Server.nic_model(), "e1000e");
        let virtio = Hardware::Virtio.disk_arguments(&disks, "").join(" ");
        assert!(virtio.contains("virtio-blk-pci,drive=disk1,serial=ferric-disk1"));
    }

    #[test]
    fn volumes_are_scsi_disks_with_their_wwn() {
        let volume = crate::machine::VolumeDisk {
            id: 1,
            bytes: 2 << 30,
            serial: "ferric-volume1".into(),
            wwn: 0x5000_0abc_de00_0001,
        };
        let arguments = volume_arguments(
            &[(PathBuf::from("/lab/volume1.img"), volume)],
            ",bootindex=1",
        )
        .join(" ");
        assert_eq!(
            arguments,
            "-device virtio-scsi-pci,id=raidvol \
             -drive file=/lab/volume1.img,if=none,id=volume1,format=raw \
             -device scsi-hd,drive=volume1,bus=raidvol.0,serial=ferric-volume1,\
             wwn=0x50000abcde000001,bootindex=1"
        );
        assert!(volume_arguments(&[], ",bootindex=1").is_empty());
    }

    #[test]
    fn the_last_kind_repeats() {
        let kinds = [Hardware::Virtio, Hardware::Server];
        assert_eq!(per_machine(&kinds, 0), Hardware::Virtio);
        assert_eq!(per_machine(&kinds, 1), Hardware::Server);
        assert_eq!(per_machine(&kinds, 5), Hardware::Server);
        assert_eq!(per_machine(&[], 0), Hardware::Virtio);
    }
}
