#!/usr/bin/env bash
# Builds a ramdisk that runs the unmodified ironic-python-agent (IPA) from PyPI, from Debian
# packages and PyPI only: a minimal Debian 12 root (mmdebstrap) with the tools IPA calls, the
# Debian kernel and the modules for common server NICs and storage, IPA and its pinned
# dependencies in a venv (/opt/ipa, scripts/ipa-ramdisk/requirements.txt, hashes checked), and
# a small /init (scripts/ipa-ramdisk/init) that brings the network up with DHCP and runs
# `ironic-python-agent`, which reads ipa-api-url= etc. from the kernel command line.
#
# usage: scripts/build-ipa-ramdisk.sh OUTPUT-DIR
#   writes OUTPUT-DIR/ipa.kernel and OUTPUT-DIR/ipa.initramfs (a zstd-compressed newc cpio)
#
# The result is cached under ~/.cache/ferric/ipa-ramdisk/<hash of this script, the init and
# the requirements> (FERRIC_CACHE_DIR moves ~/.cache/ferric): a warm run copies two files.
# A cold run needs root (mmdebstrap --mode=root, chroot), mmdebstrap and zstd
# (`apt-get install mmdebstrap zstd`), a Debian mirror (FERRIC_DEBIAN_MIRROR, default
# http://deb.debian.org/debian) and PyPI (pip's own settings apply: index, proxy, CA).
set -euo pipefail

log() { printf 'build-ipa-ramdisk: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

self="$(realpath "${BASH_SOURCE[0]}")"
here="$(dirname "$self")"
data="$here/ipa-ramdisk"

# Kernel modules packed (with every module they depend on): virtio, common server NICs and
# storage controllers, software RAID and device mapper, the file systems IPA reads or writes
# (config drives, EFI partitions, ISO images), IPMI (BMC address), VLANs, ACPI.
MODULES=(
  virtio_pci virtio_net virtio_blk virtio_scsi
  e1000 e1000e igb ixgbe i40e ice mlx5_core bnxt_en tg3
  ahci ata_piix nvme megaraid_sas mpt3sas smartpqi sd_mod sr_mod sg
  raid0 raid1 raid10 raid456 dm_mod dm_multipath
  ext4 crc32c_generic vfat nls_cp437 nls_iso8859-1 nls_utf8 isofs loop
  ipmi_si ipmi_devintf 8021q button evdev
)

# Debian packages: Python for IPA, udev and the tools IPA runs (disk, RAID, firmware and
# hardware inventory, network), and the kernel.
PACKAGES=(
  python3 python3-venv ca-certificates
  mount udev kmod iproute2 isc-dhcp-client procps psmisc file bsdextrautils
  fdisk parted gdisk e2fsprogs dosfstools mdadm qemu-utils efibootmgr
  dmidecode lshw hdparm nvme-cli ipmitool smartmontools pciutils
  linux-image-amd64
)

# --- hook run by mmdebstrap inside the build (`--customize ROOT WHEELS`) ------------------
customize() {
  local root=$1 wheels=$2
  # IPA in a venv, only from the wheels downloaded (hash-checked) before the build.
  chroot "$root" python3 -m venv /opt/ipa
  mkdir -p "$root/tmp/wheels"
  cp "$wheels"/*.whl "$root/tmp/wheels/"
  cp "$data/requirements.txt" "$root/tmp/requirements.txt"
  # The host's pip settings (index, find-links) mean nothing inside the root.
  env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root chroot "$root" /opt/ipa/bin/pip install --quiet --disable-pip-version-check --no-index \
    --find-links /tmp/wheels --require-hashes --no-deps --only-binary=:all: \
    -r /tmp/requirements.txt
  chroot "$root" /opt/ipa/bin/pip uninstall --quiet --yes pip setuptools
  rm -rf "$root/tmp/wheels" "$root/tmp/requirements.txt" "$root/usr/share/python-wheels"
  chroot "$root" /opt/ipa/bin/python3 -c 'import ironic_python_agent.agent'

  # The kernel goes beside the root; only the modules named above stay in it.
  local kver
  kver=$(ls "$root/lib/modules")
  [ "$(echo "$kver" | wc -w)" = 1 ] || die "expected one kernel in the root, found: $kver"
  cp "$root/boot/vmlinuz-$kver" "$root/../ipa.kernel"
  local keep="$root/../modules.keep"
  : >"$keep"
  for module in "${MODULES[@]}"; do
    chroot "$root" modprobe --set-version "$kver" --show-depends "$module" >"$root/../modules.one" 2>&1 ||
      die "kernel $kver has no module $module: $(cat "$root/../modules.one")"
    awk '$1 == "insmod" { print $2 }' "$root/../modules.one" >>"$keep"
  done
  find "$root/lib/modules/$kver/kernel" -name '*.ko*' | sed "s|^$root||" | sort >"$root/../modules.all"
  sort -u "$keep" | comm -23 "$root/../modules.all" - | sed "s|^|$root|" | xargs -r rm -f
  find "$root/lib/modules/$kver/kernel" -depth -type d -empty -delete
  chroot "$root" depmod "$kver"
  rm -rf "$root/boot"/* "$root/../modules.one" "$root/../modules.all"

  # The ramdisk's /init; poweroff and reboot for IPA's standby.power_off / run_image (there is
  # no systemd to ask: the kernel is asked directly, after a sync).
  install -m 0755 "$data/init" "$root/init"
  for command in poweroff:o reboot:b; do
    printf '#!/bin/sh\n# %s for the IPA ramdisk (no init system to ask).\nsync\necho %s >/proc/sysrq-trigger\n' \
      "${command%%:*}" "${command##*:}" >"$root/usr/local/sbin/${command%%:*}"
    chmod 0755 "$root/usr/local/sbin/${command%%:*}"
  done
  printf 'ipa-ramdisk\n' >"$root/etc/hostname"
  printf '127.0.0.1 localhost\n::1 localhost\n' >"$root/etc/hosts"
  : >"$root/etc/machine-id"
  local version
  version=$(chroot "$root" /opt/ipa/bin/python3 -c \
    'import importlib.metadata as m; print(m.version("ironic-python-agent"))')
  printf 'ironic-python-agent %s\nkernel %s\n' "$version" "$kver" >"$root/etc/ipa-ramdisk-release"
  rm -rf "$root/var/cache/apt"/* "$root/var/lib/apt/lists"/* "$root/var/log"/*
}

if [ "${1:-}" = "--customize" ]; then
  customize "$2" "$3"
  exit 0
fi

output=${1:?usage: scripts/build-ipa-ramdisk.sh OUTPUT-DIR}
started=$(date +%s%N)
key=$(cat "$self" "$data/init" "$data/requirements.txt" | sha256sum | cut -c1-16)
cache_root="${FERRIC_CACHE_DIR:-$HOME/.cache/ferric}/ipa-ramdisk"
cache="$cache_root/$key"
mkdir -p "$cache_root" "$output"
exec {lock}>"$cache_root/.lock"
flock "$lock"

if [ ! -s "$cache/ipa.initramfs" ] || [ ! -s "$cache/ipa.kernel" ]; then
  [ "$(id -u)" = 0 ] || die "building the ramdisk needs root (mmdebstrap --mode=root, chroot); the cache $cache is empty"
  for tool in mmdebstrap zstd cpio; do
    command -v "$tool" >/dev/null || die "$tool is missing: apt-get install mmdebstrap zstd cpio"
  done
  log "building $cache (a few minutes)"
  work="$cache_root/build.$$"
  rm -rf "$work"
  mkdir -p "$work"
  trap 'rm -rf "$work"' EXIT

  # The wheels, checked against the hashes, downloaded once into a cache of their own.
  wheels="$cache_root/wheels"
  python=/usr/bin/python3
  "$python" -m pip --version >/dev/null 2>&1 || die "pip for $python is missing: apt-get install python3-pip"
  "$python" -m pip download --quiet --disable-pip-version-check --require-hashes --no-deps \
    --only-binary=:all: -r "$data/requirements.txt" -d "$wheels" ||
    die "cannot download ironic-python-agent's wheels from PyPI (see pip's error above)"

  mirror="${FERRIC_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
  security="${FERRIC_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
  # No documentation, manual pages or translations; no initramfs for the kernel (this is one).
  INITRD=No mmdebstrap --mode=root --variant=essential --quiet \
    --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --customize-hook="\"$self\" --customize \"\$1\" \"$wheels\"" \
    bookworm "$work/root" \
    "deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
    "deb $security bookworm-security main" ||
    die "mmdebstrap failed (above); is $mirror reachable?"

  mv "$work/ipa.kernel" "$work/ipa.kernel.tmp"
  [ -e "$work/root/dev/console" ] || mknod -m 600 "$work/root/dev/console" c 5 1
  (cd "$work/root" && find . -mindepth 1 -not -path './proc/*' -not -path './sys/*' |
    LC_ALL=C sort | cpio --quiet -o -H newc -R 0:0) |
    zstd --quiet -T0 -12 >"$work/ipa.initramfs"
  du -sm --apparent-size "$work/root" | cut -f1 >"$work/unpacked-mib"
  cp "$work/root/etc/ipa-ramdisk-release" "$work/release"
  mv "$work/ipa.kernel.tmp" "$work/ipa.kernel"
  # Only this key stays in the cache (each build is a few hundred MiB of work tree).
  find "$cache_root" -mindepth 1 -maxdepth 1 -type d -not -name wheels -not -name "build.$$" \
    -exec rm -rf {} +
  mkdir -p "$cache"
  mv "$work/ipa.kernel" "$work/ipa.initramfs" "$work/unpacked-mib" "$work/release" "$cache/"
  rm -rf "$work"
  trap - EXIT
  how="built"
else
  how="taken from the cache"
fi

cp "$cache/ipa.kernel" "$output/ipa.kernel"
cp "$cache/ipa.initramfs" "$output/ipa.initramfs"
mib() { echo "$(( ($(stat -c %s "$1") + 524287) / 1048576 ))"; }
seconds=$(( ($(date +%s%N) - started) / 1000000 ))
release=$(tr '\n' ' ' <"$cache/release")
echo "kernel     $output/ipa.kernel ($(mib "$output/ipa.kernel") MiB)"
echo "initramfs  $output/ipa.initramfs ($(mib "$output/ipa.initramfs") MiB zstd, $(cat "$cache/unpacked-mib") MiB unpacked)"
echo "contents   ${release% }"
echo "$how in $((seconds / 1000)).$(( (seconds % 1000) / 100 )) s (cache $cache)"
