//! The initramfs itself: a newc cpio archive written entry by entry (the `cpio` crate does the
//! format), and the `/init` and DHCP scripts it starts with.

use std::collections::BTreeSet;
use std::io::{self, Write};

use super::hardware::HARDWARE_FILE;
use super::modules::MODULE_DIR;

/// A newc archive being written: regular files, directories, device nodes.
pub(super) struct Archive<W: Write> {
    pub(super) out: Option<W>,
    pub(super) inode: u32,
    pub(super) directories: BTreeSet<String>,
    pub(super) unpacked: u64,
}

impl<W: Write> Archive<W> {
    pub(super) fn entry(
        &mut self,
        name: &str,
        mode: u32,
        data: &[u8],
        rdev: (u32, u32),
    ) -> io::Result<()> {
        self.inode += 1;
        let out = self
            .out
            .take()
            .ok_or_else(|| io::Error::other("archive already finished"))?;
        let mut writer = cpio::newc::Builder::new(name)
            .ino(self.inode)
            .mode(mode)
            .nlink(if mode & 0o170000 == 0o040000 { 2 } else { 1 })
            .rdev_major(rdev.0)
            .rdev_minor(rdev.1)
            .write(out, data.len() as u32);
        writer.write_all(data)?;
        self.out = Some(writer.finish()?);
        self.unpacked += data.len() as u64;
        Ok(())
    }

    pub(super) fn directory(&mut self, path: &str) -> io::Result<()> {
        let mut prefix = String::new();
        for part in path.split('/').filter(|part| !part.is_empty()) {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if self.directories.insert(prefix.clone()) {
                let name = prefix.clone();
                self.entry(&name, 0o040755, &[], (0, 0))?;
            }
        }
        Ok(())
    }

    pub(super) fn file(&mut self, path: &str, mode: u32, data: &[u8]) -> io::Result<()> {
        let path = path.trim_start_matches('/');
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.directory(parent)?;
        }
        self.entry(path, 0o100000 | mode, data, (0, 0))
    }

    pub(super) fn finish(mut self) -> io::Result<W> {
        let out = self
            .out
            .take()
            .ok_or_else(|| io::Error::other("archive already finished"))?;
        cpio::newc::trailer(out)
    }
}

/// The `/init` script.
pub(super) fn init_script() -> String {
    format!(
        r#"#!/bin/sh
# /init of the Ferric agent ramdisk, written by `ferric ramdisk build`.
/bin/busybox mount -t proc proc /proc
/bin/busybox mount -t sysfs sysfs /sys
/bin/busybox mount -t devtmpfs devtmpfs /dev
/bin/busybox --install -s
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
exec </dev/console >/dev/console 2>&1
mkdir -p /tmp /run /var/log
read uptime _ < /proc/uptime
echo "ferric ramdisk: loading modules (${{uptime}} s after the kernel started)"
loaded=" "
# insmod, in dependency order, the modules in $wanted not loaded yet.
load_wanted() {{
  for module in $(cat /etc/modules.order); do
    case "$wanted" in *" $module "*) ;; *) continue ;; esac
    case "$loaded" in *" $module "*) continue ;; esac
    loaded="$loaded$module "
    # A driver whose hardware is absent may still load; ipmi_si does not on a machine without a BMC.
    insmod "/{MODULE_DIR}/$module.ko" 2>/dev/null || echo "ferric ramdisk: insmod $module failed (no such hardware?)"
  done
}}
if grep -q 'ferric.modules=all' /proc/cmdline || [ ! -e /{HARDWARE_FILE} ]; then
  # Every packed driver, whatever the hardware (for a machine whose device was not matched).
  wanted=" $(tr '\n' ' ' < /etc/modules.order) "
  load_wanted
else
  # Only the drivers a device's modalias asks for (and the modules no device asks for).
  # Loading a bus driver adds devices (virtio_pci makes the virtio NICs and disks): scan
  # again until a round loads nothing new.
  . /{HARDWARE_FILE}
  for round in 1 2 3 4; do
    before=$loaded
    wanted=" $always"
    for alias in $(cat /sys/bus/pci/devices/*/modalias /sys/bus/virtio/devices/*/modalias \
        /sys/bus/acpi/devices/*/modalias /sys/bus/platform/devices/*/modalias 2>/dev/null); do
      hardware_modules "$alias"
    done
    wanted="$wanted "
    load_wanted
    [ "$loaded" = "$before" ] && break
  done
fi
read uptime _ < /proc/uptime
echo "ferric ramdisk: loaded${{loaded% }} (${{uptime}} s; ferric.modules=all loads every driver)"
# DHCP first: the leases come while the arrays assemble (ferric-agent waits for a route).
echo "ferric ramdisk: bringing up the network"
ip link set lo up
for path in /sys/class/net/*; do
  name=${{path##*/}}
  [ "$name" = lo ] && continue
  # NICs the node's network_data (virtual media, no DHCP) names get static addresses from
  # ferric-agent instead.
  grep -qi "$(cat "$path/address")" /etc/ferric/network_data.json 2>/dev/null && continue
  ip link set "$name" up
  udhcpc -i "$name" -s /usr/share/udhcpc/default.script -t 20 -T 2 -b -S &
done
# Software RAID built by an earlier ramdisk (the `raid.*` steps) comes back as it was.
if command -v mdadm >/dev/null; then
  mkdir -p /run/mdadm /etc/mdadm
  mdadm --assemble --scan --run 2>&1 | sed 's/^/ferric ramdisk: /'
fi
# The ACPI power button (soft power off): button + evdev are loaded; acpid runs poweroff.
mkdir -p /etc/acpi/PWRF
printf '#!/bin/sh\npoweroff -f\n' > /etc/acpi/PWRF/00000080
chmod 755 /etc/acpi/PWRF/00000080
acpid -c /etc/acpi 2>/dev/null
grep -qE 'ipa-api-url=|ferric.api_url=' /proc/cmdline ||
  echo "ferric ramdisk: no ipa-api-url= or ferric.api_url= on the kernel command line"
# ferric.shell=1 on the kernel command line: a root shell on the console beside the agent
# (debugging, and the lab's benchmark that runs dd in the ramdisk; docs/agent.md). Off by
# default: whoever reaches the serial console gets root.
if grep -qE '(^| )ferric.shell=1( |$)' /proc/cmdline; then
  echo "ferric ramdisk: a root shell on the console (ferric.shell=1)"
  ( while true; do setsid sh -i </dev/console >/dev/console 2>&1; sleep 1; done ) &
fi
while true; do
  echo "ferric ramdisk: starting ferric-agent"
  /bin/ferric-agent 2>&1 | tee -a /var/log/ferric-agent.log
  echo "ferric ramdisk: ferric-agent stopped; restarting in 5 s"
  sleep 5
done
"#
    )
}

pub(super) const UDHCPC_SCRIPT: &str = r#"#!/bin/sh
# udhcpc event handler of the Ferric agent ramdisk.
case "$1" in
  deconfig)
    ip -4 addr flush dev "$interface"
    ip link set "$interface" up
    ;;
  bound|renew)
    ip -4 addr flush dev "$interface"
    ip addr add "$ip/${mask:-24}" dev "$interface"
    for gateway in $router; do
      ip route add default via "$gateway" dev "$interface" 2>/dev/null
      break
    done
    : > /etc/resolv.conf
    for server in $dns; do echo "nameserver $server" >> /etc/resolv.conf; done
    echo "ferric ramdisk: $interface has $ip/${mask:-24}"
    ;;
esac
"#;
