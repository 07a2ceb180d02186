#!/usr/bin/env bash
# Installs and starts what Ferric's tests need, on a Debian machine where we are root.
# Idempotent and quiet: when everything is already there it prints nothing and takes a second.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }

apt_install() {
  log "installing Debian packages: $*"
  if [ -z "${FERRIC_APT_UPDATED:-}" ]; then
    apt-get update -qq >/dev/null
    export FERRIC_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- PostgreSQL: the second storage backend, tested on every run -------------------------
fresh_postgres=""
if ! command -v pg_ctlcluster >/dev/null 2>&1 || ! command -v pg_isready >/dev/null 2>&1; then
  apt_install postgresql postgresql-client
  fresh_postgres=1
fi

if ! pg_isready -q -h 127.0.0.1 -p 5432; then
  for version in $(ls /etc/postgresql 2>/dev/null); do
    if [ -n "$fresh_postgres" ]; then
      # A cluster we just installed: let local test clients in without a password, as on the
      # project's machines. Never done to a cluster we found already configured.
      hba="/etc/postgresql/$version/main/pg_hba.conf"
      grep -q '^host all all 127.0.0.1/32 trust' "$hba" ||
        sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
    fi
    log "starting PostgreSQL $version"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 || true
  done
  for _ in $(seq 1 30); do
    pg_isready -q -h 127.0.0.1 -p 5432 && break
    sleep 1
  done
  pg_isready -q -h 127.0.0.1 -p 5432 || { log "PostgreSQL did not come up on 127.0.0.1:5432"; exit 1; }
fi

# --- the test runner ---------------------------------------------------------------------
if ! cargo nextest --version >/dev/null 2>&1; then
  log "installing cargo-nextest"
  cargo install --locked --quiet cargo-nextest
fi

# --- cargo-deny: `cargo xtask lint` checks licenses, duplicates and sources (deny.toml) -----
# 0.20.2 builds with the machine's Rust (it needs 1.88 or newer).
if ! cargo deny --version 2>/dev/null | grep -q '^cargo-deny 0\.20\.2$'; then
  log "installing cargo-deny 0.20.2"
  cargo install --locked --quiet cargo-deny@0.20.2
fi

# --- tools the conductor calls: genisoimage renders config drives given as JSON -------------
if ! command -v genisoimage >/dev/null 2>&1; then
  apt_install genisoimage
fi

# --- the OpenSSH client: the ironic-networking interface reaches switches with the system's ssh
# (its unit tests run it against an address nobody answers on) --------------------------------
if ! command -v ssh >/dev/null 2>&1; then
  apt_install openssh-client
fi

# --- docker-registry: crates/ferric/tests/oci.rs pushes a disk image into a real OCI registry
# (the CNCF distribution registry, with htpasswd auth and TLS) and deploys it from oci:// -----
if ! command -v docker-registry >/dev/null 2>&1; then
  apt_install docker-registry
fi

# --- libfaketime: the clock-skew test runs conductors with their clocks minutes off ----------
# --- virtual-media ISOs: the conductor builds them with grub-mkrescue (xorriso, mtools, the
# BIOS and UEFI GRUB modules); the default tests validate and build them, not only the lab.
if ! command -v grub-mkrescue >/dev/null 2>&1 || ! command -v xorriso >/dev/null 2>&1 ||
  ! command -v mformat >/dev/null 2>&1 || [ ! -d /usr/lib/grub/x86_64-efi ] ||
  [ ! -d /usr/lib/grub/i386-pc ]; then
  apt_install grub-common grub-pc-bin grub-efi-amd64-bin xorriso mtools
fi

if ! command -v faketime >/dev/null 2>&1; then
  apt_install faketime
fi

# --- nftables: `cargo xtask chaos` cuts a conductor off the database with a firewall rule in
# the conductor's own network namespace ------------------------------------------------------
if ! command -v nft >/dev/null 2>&1; then
  apt_install nftables
fi

# --- e2fsprogs: the agent's partition-image tests build ext4 root filesystems with mkfs.ext4 -d
if ! command -v mkfs.ext4 >/dev/null 2>&1; then
  apt_install e2fsprogs
fi

# --- BMC emulators for the redfish and ipmi driver tests ----------------------------------
# OpenIPMI's ipmi_sim (an IPMI 2.0 BMC simulator) and ipmitool (an independent IPMI client the
# tests read the simulator back with), from Debian; sushy-tools' Redfish emulator and pyghmi's
# fakebmc (cipher suite 3 only) from PyPI in a venv of their own, their dependencies pinned in
# tests/bmc-emulators/requirements.txt.
bmc_missing=()
command -v ipmi_sim >/dev/null 2>&1 || bmc_missing+=(openipmi)
command -v ipmitool >/dev/null 2>&1 || bmc_missing+=(ipmitool)
if [ "${#bmc_missing[@]}" -gt 0 ]; then
  apt_install "${bmc_missing[@]}"
fi
bmc_requirements="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/bmc-emulators/requirements.txt"
bmc_venv="${HOME}/.cache/ferric/bmc-venv"
bmc_stamp="$(sha256sum "$bmc_requirements" | cut -d' ' -f1) $(python3 --version 2>&1)"
if [ ! -x "$bmc_venv/bin/sushy-emulator" ] || [ "$(cat "$bmc_venv/.ferric-stamp" 2>/dev/null)" != "$bmc_stamp" ]; then
  python3 -m venv --help >/dev/null 2>&1 || apt_install python3-venv
  log "creating $bmc_venv (sushy-tools, pyghmi)"
  rm -rf "$bmc_venv"
  mkdir -p "$(dirname "$bmc_venv")"
  python3 -m venv "$bmc_venv"
  "$bmc_venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$bmc_requirements"
  "$bmc_venv/bin/sushy-emulator" --help >/dev/null
  "$bmc_venv/bin/python" -c "import pyghmi.cmd.fakebmc"
  echo "$bmc_stamp" >"$bmc_venv/.ferric-stamp"
fi

# --- python-ironic-inspector-client for crates/ferric/tests/inspector_client.rs ------------
# A pinned venv under $HOME/.cache/ferric (quick when it exists); needs python3-venv.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  apt_install python3-venv
fi
"$(dirname "${BASH_SOURCE[0]}")/inspector-client-venv.sh" >/dev/null

# --- OpenStack Keystone for crates/ferric/tests/keystone.rs and `cargo xtask keystone|tempest` --
# Keystone from PyPI in a pinned venv (scripts/keystone.sh; tests/keystone/requirements.txt);
# its database is on the local MariaDB (Keystone on SQLite fails under load with "database is
# locked"), reached as root without a password on 127.0.0.1:3306, as on the project's machines.
if ! (exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null; then
  fresh_mariadb=""
  if ! command -v mariadbd >/dev/null 2>&1; then
    apt_install mariadb-server
    fresh_mariadb=1
  fi
  log "starting MariaDB"
  service mariadb start >/dev/null 2>&1 || (setsid mariadbd-safe >/dev/null 2>&1 &)
  for _ in $(seq 1 30); do
    (exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null && break
    sleep 1
  done
  (exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null || { log "MariaDB did not come up on 127.0.0.1:3306"; exit 1; }
  if [ -n "$fresh_mariadb" ]; then
    # A server we just installed: let local test clients in as root over TCP without a
    # password. Never done to a server we found already configured.
    mariadb -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('')" >/dev/null
  fi
fi
"$(dirname "${BASH_SOURCE[0]}")/keystone.sh" install >/dev/null
# Glance (scripts/glance.sh; tests/glance/requirements.txt) for crates/ferric/tests/glance.rs:
# behind that Keystone, its database on the same MariaDB.
"$(dirname "${BASH_SOURCE[0]}")/glance.sh" install >/dev/null

# --- OpenStack Placement and Nova for `cargo xtask openstack` (issue 38) ---------------------
# From PyPI in a pinned venv (scripts/openstack.sh; tests/openstack/requirements.txt), on the
# MariaDB above and a local RabbitMQ (guest/guest, which RabbitMQ lets in from localhost only).
if ! (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null; then
  if ! command -v rabbitmq-server >/dev/null 2>&1; then
    apt_install rabbitmq-server
  fi
  log "starting RabbitMQ"
  service rabbitmq-server start >/dev/null 2>&1 || (setsid rabbitmq-server >/dev/null 2>&1 &)
  for _ in $(seq 1 60); do
    (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null && break
    sleep 1
  done
  (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null || { log "RabbitMQ did not come up on 127.0.0.1:5672"; exit 1; }
fi
"$(dirname "${BASH_SOURCE[0]}")/openstack.sh" install >/dev/null

# --- OpenStack Ironic for crates/ferric/tests/import_ironic.rs (and the client goldens) ------
# Ironic 39 from PyPI in a pinned venv (scripts/ironic-standalone.sh install;
# tests/clients/ironic-requirements.txt): the reference `ferric import ironic` reads. Its
# MariaDB runs need PyMySQL, which the script adds to the venv on first use.
"$(dirname "${BASH_SOURCE[0]}")/ironic-standalone.sh" install >/dev/null

# --- the web UI's browser test (`cargo xtask ui-test`): Debian's chromium and Playwright ------
# Playwright (PyPI, pinned in tests/ui/requirements.txt) drives this chromium by its executable
# path; it never downloads a browser of its own. The venv is quick when it exists.
if ! command -v chromium >/dev/null 2>&1; then
  apt_install chromium
fi
"$(dirname "${BASH_SOURCE[0]}")/ui-venv.sh" >/dev/null

# --- the virtual lab (only with --lab): QEMU under TCG, iPXE ROMs, dnsmasq, qemu-img ----------
# Needed by `ferric lab up` and the `lab-e2e` tests, not by the default test run. qemu-utils must
# come from the same release as qemu-system-x86: a backported qemu-utils blocks the install
# ("held broken packages"), so both are named together.
if [ "${1:-}" = "--lab" ]; then
  lab_missing=()
  # Also: the host kernel and busybox for the agent ramdisk (`ferric ramdisk build`), and
  # syslinux/mtools/dosfstools/fdisk to build the bootable test image of the end-to-end suite
  # without mounts; mdadm, nvme-cli, hdparm, ipmitool and ca-certificates go into the ramdisk
  # for software RAID, NVMe and ATA secure erase, the BMC address and HTTPS image URLs. UEFI
  # machines: ovmf (their firmware), ipxe (the loaders dnsmasq serves to firmware PXE and HTTP
  # boot) and syslinux-efi (the test image boots under UEFI too). GRUB (BIOS and UEFI images)
  # and xorriso for the virtual-media ISOs (`grub-mkrescue`). mmdebstrap, zstd, cpio and pip
  # build the ironic-python-agent ramdisk of lab_ipa (scripts/build-ipa-ramdisk.sh). tcpdump
  # captures the lab bridge's traffic in lab_agent_tls (no agent token in clear text).
  # shim-signed and grub-efi-amd64-signed: the signed boot loaders of secure-boot ISOs (a node
  # with capability secure_boot:true; `lab up --firmware secure-boot`). openvswitch-switch and
  # openssh-server: the switch the ironic-networking interface drives in lab_switch_ovs (an
  # ovsdb-server, ovs-vswitchd and sshd the test runs itself, no service).
  for package in qemu-system-x86 qemu-utils ipxe-qemu dnsmasq-base iproute2 \
    linux-image-amd64 busybox-static syslinux syslinux-common mtools dosfstools fdisk mdadm \
    nvme-cli hdparm ipmitool ca-certificates \
    ovmf ipxe syslinux-efi grub-common grub-pc-bin grub-efi-amd64-bin xorriso \
    mmdebstrap zstd cpio python3-pip tcpdump shim-signed grub-efi-amd64-signed \
    openvswitch-switch openssh-server; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' ||
      lab_missing+=("$package")
  done
  if [ "${#lab_missing[@]}" -gt 0 ]; then
    apt_install "${lab_missing[@]}"
  fi
fi

if [ "${1:-}" = "--lab-kernel" ]; then
  # --- another kernel for the lab's agent ramdisk (only with --lab-kernel) -------------------
  # `cargo xtask e2e` boots the ramdisk on it when FERRIC_LAB_KERNEL_DIR is set (else on the
  # host's kernel): bookworm's 6.12 (linux-image-6.12-amd64, signed, from bookworm-security),
  # unpacked here, not installed, so the host's own kernel and boot loader stay as they are. Its ZSTD-compressed
  # image decompresses ~2 s sooner under TCG than bookworm's XZ-compressed 6.1, but whole lab
  # boots measured no faster (its initramfs is larger; docs/lab.md), so it is not the default.
  # It has every server NIC and HBA driver the ramdisk packs. depmod writes the modules.dep and
  # modules.alias the package leaves to its postinst.
  lab_kernel_dir="${FERRIC_LAB_KERNEL_DIR:-$HOME/.cache/ferric/lab-kernel}"
  if [ ! -e "$lab_kernel_dir/.complete" ]; then
    [ -n "${FERRIC_APT_UPDATED:-}" ] || { apt-get update -qq >/dev/null; export FERRIC_APT_UPDATED=1; }
    image=$(apt-cache depends linux-image-6.12-amd64 |
      awk '$1 == "Depends:" && $2 ~ /^linux-image-6\.12\./ { print $2; exit }')
    [ -n "$image" ] || { log "no linux-image-6.12-amd64 in apt's lists (bookworm-security)"; exit 1; }
    log "unpacking $image into $lab_kernel_dir (the lab ramdisk's kernel)"
    download=$(mktemp -d)
    (cd "$download" && apt-get download -qq "$image" >/dev/null 2>&1)
    rm -rf "$lab_kernel_dir"
    mkdir -p "$lab_kernel_dir"
    dpkg-deb -x "$download"/*.deb "$lab_kernel_dir"
    rm -rf "$download"
    depmod -b "$lab_kernel_dir" "${image#linux-image-}"
    echo "$image" >"$lab_kernel_dir/.complete"
  fi
fi

# --- ramdisk firmware (only with --firmware): what the ramdisk's drivers may load -----------
# `ferric ramdisk build` packs the firmware files its NIC drivers ask for (tg3's tigon/*, ice's
# DDP package) from Debian's firmware-misc-nonfree, which is in the non-free-firmware
# component: added for bookworm when no apt source has it yet. Without these files the build
# still succeeds and names each missing file.
if [ "${1:-}" = "--firmware" ]; then
  if ! dpkg-query -W -f='${Status}' firmware-misc-nonfree 2>/dev/null | grep -q 'install ok installed'; then
    if ! grep -rqs 'non-free-firmware' /etc/apt/sources.list /etc/apt/sources.list.d/; then
      # The mirror the machine already uses for bookworm's main component.
      mirror=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '
        /^URIs:/ { uri = $2 } /^Suites:/ { suites = $0 }
        /^$/ { if (suites ~ / bookworm( |$)/ && uri != "") { print uri; exit } uri = ""; suites = "" }
        END { if (suites ~ / bookworm( |$)/ && uri != "") print uri }' | head -1)
      [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
      [ -n "$mirror" ] || { log "no bookworm apt source found to add non-free-firmware to"; exit 1; }
      log "adding Debian's non-free-firmware component from $mirror"
      printf 'Types: deb\nURIs: %s\nSuites: bookworm bookworm-updates\nComponents: non-free-firmware\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$mirror" >/etc/apt/sources.list.d/ferric-non-free-firmware.sources
      unset FERRIC_APT_UPDATED
    fi
    apt_install firmware-misc-nonfree
  fi
fi

# --- fuzzing (only with --fuzz): cargo-fuzz and schemathesis, for `cargo xtask fuzz` ---------
# Not needed by the default test run. cargo-fuzz drives libFuzzer; the fuzz targets need nightly
# flags, which `cargo xtask fuzz` enables on the stable toolchain with RUSTC_BOOTSTRAP=1.
# schemathesis goes into a venv of its own, its dependencies pinned in
# tests/schemathesis/requirements.txt.
if [ "${1:-}" = "--fuzz" ]; then
  if ! cargo fuzz --version >/dev/null 2>&1; then
    log "installing cargo-fuzz"
    cargo install --locked --quiet cargo-fuzz
  fi
  st_requirements="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/tests/schemathesis/requirements.txt"
  st_venv="${HOME}/.cache/ferric/schemathesis-venv"
  st_stamp="$(sha256sum "$st_requirements" | cut -d' ' -f1) $(python3 --version 2>&1)"
  if [ ! -x "$st_venv/bin/st" ] || [ "$(cat "$st_venv/.ferric-stamp" 2>/dev/null)" != "$st_stamp" ]; then
    python3 -m venv --help >/dev/null 2>&1 || apt_install python3-venv
    log "creating $st_venv (schemathesis)"
    rm -rf "$st_venv"
    mkdir -p "$(dirname "$st_venv")"
    python3 -m venv "$st_venv"
    "$st_venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$st_requirements"
    "$st_venv/bin/st" --version >/dev/null
    echo "$st_stamp" >"$st_venv/.ferric-stamp"
  fi
fi

# --- qemu-img: the agent's tests make qcow2 images with it ---------------------------------
# Checked last: installing the lab's qemu-system-x86 next to a backported qemu-utils removes
# the latter, and the default tests still need qemu-img.
if ! command -v qemu-img >/dev/null 2>&1; then
  apt_install qemu-utils
fi
