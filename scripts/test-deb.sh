#!/usr/bin/env bash
# Tests the Debian package on this machine (root): dpkg -i, `ferric --version`,
# `systemd-analyze verify` on the units, the `ferric` user and /var/lib/ferric, the
# `ferric db` commands as that user with the packaged settings file, an upgrade over itself
# that keeps a changed settings file, then dpkg --purge, after which nothing of the package
# may be left but /var/lib/ferric (and the `ferric` user that owns it), as documented.
# Finally it removes those two, so the machine is as before.
#
# usage: scripts/test-deb.sh target/deb/ferric_<version>_<arch>.deb   (cargo xtask deb-test)
set -euo pipefail

deb=${1:?usage: $0 PACKAGE.deb}
[ "$(id -u)" = 0 ] || { echo "test-deb: run as root (dpkg -i)" >&2; exit 2; }
if dpkg -s ferric >/dev/null 2>&1 || [ -e /var/lib/ferric ] || getent passwd ferric >/dev/null; then
    echo "test-deb: ferric is already installed here (package, /var/lib/ferric or user);" \
        "this test would overwrite it: run it on a machine without Ferric" >&2
    exit 2
fi

fail() { echo "test-deb: FAIL: $*" >&2; exit 1; }
step() { echo "test-deb: $*"; }
as_ferric() { runuser -u ferric -- "$@"; }

# Anything named *ferric* that is on this machine before the install (a source checkout, the
# lab's network namespace, ...) is not the package's: only what is new after the purge counts.
ferric_paths() {
    find / -xdev \( -path /proc -o -path /sys -o -path /work -o -path /root -o -path /tmp -o -path /var/lib/ferric \) -prune \
        -o -name '*ferric*' -print 2>/dev/null | sort || true
}
before=$(ferric_paths)

step "install $deb"
dpkg -i "$deb"
version=$(dpkg-deb -f "$deb" Version)
step "ferric --version: $(ferric --version)"
[ "$(ferric --version)" = "ferric ${version%-*}" ] || fail "ferric --version does not say ${version%-*}"

step "systemd-analyze verify"
units=(/lib/systemd/system/ferric.service /lib/systemd/system/ferric-inspector.service)
for unit in "${units[@]}"; do [ -f "$unit" ] || fail "$unit is not installed"; done
verify=$(systemd-analyze verify "${units[@]}" 2>&1) || fail "systemd-analyze verify: $verify"
# verify exits 0 on some warnings; anything it says about our units is a failure.
if grep -F 'ferric' <<<"$verify"; then fail "systemd-analyze verify complained"; fi

step "user, state directory and settings file"
getent passwd ferric >/dev/null || fail "no ferric user"
[ "$(stat -c %U:%a /var/lib/ferric)" = "ferric:750" ] || fail "/var/lib/ferric: $(stat -c %U:%a /var/lib/ferric)"
[ "$(stat -c %U:%G:%a /etc/ferric/ferric.toml)" = "root:ferric:640" ] || fail "ferric.toml: $(stat -c %U:%G:%a /etc/ferric/ferric.toml)"

step "ferric db as the ferric user, with the packaged settings"
cd /
if as_ferric ferric db upgrade --check --config /etc/ferric/ferric.toml; then
    fail "a database that does not exist yet reads as up to date"
fi
as_ferric ferric db upgrade --config /etc/ferric/ferric.toml
as_ferric ferric db upgrade --check --config /etc/ferric/ferric.toml
[ -f /var/lib/ferric/ferric.db ] || fail "the database is not in /var/lib/ferric"
as_ferric ferric db backup --config /etc/ferric/ferric.toml /var/lib/ferric/backup.db
as_ferric ferric db restore --config /etc/ferric/ferric.toml /var/lib/ferric/backup.db

step "upgrade over itself keeps a changed settings file"
echo '# changed by the operator' >>/etc/ferric/ferric.toml
dpkg -i "$deb"
grep -q 'changed by the operator' /etc/ferric/ferric.toml || fail "the upgrade replaced the operator's settings"
as_ferric ferric db upgrade --check --config /etc/ferric/ferric.toml

step "purge"
installed=$(dpkg -L ferric)
dpkg --purge ferric
dpkg -s ferric >/dev/null 2>&1 && fail "still installed after purge"
left=()
while read -r path; do
    # Directories (and /lib, a link to one on merged-/usr systems) are shared with others.
    [ -d "$path" ] && continue
    if [ -e "$path" ] || [ -L "$path" ]; then left+=("$path"); fi
done <<<"$installed"
[ -e /etc/ferric ] && left+=(/etc/ferric)
[ "${#left[@]}" = 0 ] || fail "left after purge: ${left[*]}"
[ -f /var/lib/ferric/ferric.db ] || fail "purge removed the state directory's database"
extra=$(comm -13 <(echo "$before") <(ferric_paths))
[ -z "$extra" ] || fail "left after purge: $extra"
step "purge left only /var/lib/ferric and the ferric user, as documented"

# Back to the machine as it was.
rm -rf /var/lib/ferric
deluser --quiet --system ferric >/dev/null 2>&1 || userdel ferric
getent group ferric >/dev/null && groupdel ferric
step "ok"
