#!/usr/bin/env bash
# Builds, once per machine, a minimal Debian 13 (trixie) root with Debian's
# own Open vSwitch, OVN central and OpenSSH packages, for the lab's hosts of
# the newer versions (test/support/fault-host.ts, its root option, runs their daemons and sshd
# chrooted into it). A root already built from this package list is left as
# it is, so the second run costs nothing.
#
#   tools/trixie-root.sh            build if needed; print the root's path
#   tools/trixie-root.sh versions   print the packages' versions
#
# The root lives in $OVSLB_CACHE_DIR/roots/trixie (default /var/cache/ovslb),
# the downloaded .debs in roots/debs (debootstrap --cache-dir), so a rebuild
# downloads nothing. Needs root and deb.debian.org; installs debootstrap if
# missing. Hosts mount /proc, /dev, /sys and their run directory in mount
# namespaces of their own: nothing is ever mounted in the cached root, and a
# rebuild refuses to remove one that has a mount under it.
set -euo pipefail
cache=${OVSLB_CACHE_DIR:-/var/cache/ovslb}
roots=$cache/roots
root=$roots/trixie
mirror=${OVSLB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# ovn-central brings ovn-common (ovn-nbctl, ovn-northd) and openvswitch-common (ovsdb-tool, ovs-ofctl, ovs-appctl).
packages=openvswitch-switch,ovn-central,openssh-server,iproute2
stamp="trixie $packages"

versions() {
  chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' openvswitch-switch openvswitch-common ovn-central ovn-common openssh-server iproute2
}

if [ "${1:-}" = versions ]; then
  versions
  exit 0
fi

mkdir -p "$roots"
exec 9>"$roots/.trixie.lock"
flock 9
if [ -f "$root/.ovslb-root" ] && [ "$(cat "$root/.ovslb-root")" = "$stamp" ]; then
  echo "$root"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "trixie-root: building $root needs root" >&2
  exit 1
fi
if ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi
for dir in "$root" "$root.partial"; do
  if [ -d "$dir" ] && findmnt -rn -o TARGET | grep -q "^$dir/"; then
    echo "trixie-root: $dir has mounts under it (a host still running from it?); not removing it" >&2
    exit 1
  fi
done
t0=$(date +%s)
rm -rf --one-file-system "$root.partial"
mkdir -p "$roots/debs"
debootstrap --variant=minbase --include="$packages" --cache-dir="$roots/debs" trixie "$root.partial" "$mirror" >"$roots/trixie.debootstrap.log" 2>&1 || {
  tail -n 20 "$roots/trixie.debootstrap.log" >&2
  exit 1
}
# The packages' services never start in the root (nothing runs init there); its apt lists are not needed.
rm -rf "$root.partial/var/lib/apt/lists/"* "$root.partial/var/cache/apt/"*.bin
rm -rf --one-file-system "$root"
mv "$root.partial" "$root"
echo "$stamp" >"$root/.ovslb-root"
echo "trixie-root: built $root in $(($(date +%s) - t0)) s:" >&2
versions >&2
echo "$root"
