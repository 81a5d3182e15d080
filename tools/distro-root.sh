#!/usr/bin/env bash
# Builds, once per machine, a minimal root of a distribution release with its
# own Open vSwitch, OVN central and OpenSSH packages, for the lab's hosts of
# other versions than this machine's (test/lab/root.ts runs their daemons and
# sshd chrooted into it: lab "c" and FaultHost's root option). A root already
# built from the same suites and package list is left as it is, so the
# second run costs nothing.
#
#   tools/distro-root.sh [RELEASE]            build if needed; print the root's path
#   tools/distro-root.sh [RELEASE] versions   print the packages' versions
#
# RELEASE is one of
#   trixie (default)  Debian 13: Open vSwitch 3.5, OVN 25.03, from deb.debian.org
#   noble             Ubuntu 24.04 LTS with its updates: Open vSwitch 3.3 (the
#                     current OVS LTS), OVN 24.03, from archive.ubuntu.com,
#                     its Release files checked against Ubuntu's archive key
#                     (Debian's ubuntu-keyring package, installed if missing)
#
# The root lives in $OVSLB_CACHE_DIR/roots/RELEASE (default /var/cache/ovslb),
# the downloaded packages in roots/debs-RELEASE (debootstrap --cache-dir), so a
# rebuild downloads nothing. Needs root and the release's archive; installs
# debootstrap if missing. Hosts mount /proc, /dev, /sys and their run
# directory in mount namespaces of their own: nothing is ever mounted in the
# cached root, and a rebuild refuses to remove one that has a mount under it.
set -euo pipefail
release=trixie
case "${1:-}" in
  trixie | noble) release=$1 && shift ;;
esac
cache=${OVSLB_CACHE_DIR:-/var/cache/ovslb}
roots=$cache/roots
root=$roots/$release
# ovn-central brings ovn-common (ovn-nbctl, ovn-northd) and openvswitch-common (ovsdb-tool, ovs-ofctl, ovs-appctl).
packages=openvswitch-switch,ovn-central,ovn-host,openssh-server,iproute2
case $release in
  trixie)
    mirror=${OVSLB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
    # Debian's own key is this machine's (debian-archive-keyring); debootstrap checks the Release file with it.
    keyring_package=debian-archive-keyring
    options=()
    script=
    updates=
    ;;
  noble)
    mirror=${OVSLB_UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}
    keyring_package=ubuntu-keyring
    options=(--keyring=/usr/share/keyrings/ubuntu-archive-keyring.gpg --components=main)
    # Then its updates, by the root's own apt (debootstrap's --extra-suites leaves noble's base unpackable here).
    updates="noble-updates noble-security"
    # Debian 12's debootstrap has no script named noble; Ubuntu's releases since gutsy share one.
    script=/usr/share/debootstrap/scripts/gutsy
    ;;
esac
stamp="$release $packages${options[*]:+ ${options[*]}}${updates:+ $updates}"

versions() {
  chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' openvswitch-switch openvswitch-common ovn-central ovn-common ovn-host openssh-server iproute2
}

if [ "${1:-}" = versions ]; then
  versions
  exit 0
fi

mkdir -p "$roots"
exec 9>"$roots/.$release.lock"
flock 9
if [ -f "$root/.ovslb-root" ] && [ "$(cat "$root/.ovslb-root")" = "$stamp" ]; then
  echo "$root"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "distro-root: building $root needs root" >&2
  exit 1
fi
missing=()
for p in debootstrap "$keyring_package"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  apt-get update -qq
  # Debian 12 has ubuntu-keyring only in its backports (Debian 13 in main): the backports suite, signed by Debian's own key.
  if [[ " ${missing[*]} " == *" ubuntu-keyring "* ]] && ! apt-cache policy ubuntu-keyring | grep -q 'Candidate: [0-9]'; then
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: %s-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$codename" >/etc/apt/sources.list.d/ovslb-backports.sources
    apt-get update -qq
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Hosts mount in namespaces of their own, which findmnt here does not see: a process chrooted into the root is the sign.
for dir in "$root" "$root.partial"; do
  [ -d "$dir" ] || continue
  if findmnt -rn -o TARGET | grep -q "^$dir/"; then
    echo "distro-root: $dir has mounts under it; not removing it" >&2
    exit 1
  fi
  for p in /proc/[0-9]*; do
    if [ "$(readlink "$p/root" 2>/dev/null)" = "$dir" ]; then
      echo "distro-root: process ${p#/proc/} runs chrooted into $dir (a lab host? take it down first); not removing it" >&2
      exit 1
    fi
  done
done
t0=$(date +%s)
rm -rf --one-file-system "$root.partial"
mkdir -p "$roots/debs-$release"
log=$roots/$release.debootstrap.log
debootstrap --variant=minbase --include="$packages" "${options[@]}" --cache-dir="$roots/debs-$release" \
  "$release" "$root.partial" "$mirror" $script >"$log" 2>&1 || {
  tail -n 20 "$log" >&2
  exit 1
}
if [ -n "$updates" ]; then
  # apt in the root checks the updates' Release files with the root's own keyring (ubuntu-keyring is in its base).
  for suite in $updates; do echo "deb $mirror $suite main"; done >>"$root.partial/etc/apt/sources.list"
  printf '#!/bin/sh\nexit 101\n' >"$root.partial/usr/sbin/policy-rc.d" # no service starts while packages install
  chmod 755 "$root.partial/usr/sbin/policy-rc.d"
  { chroot "$root.partial" apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive chroot "$root.partial" apt-get dist-upgrade -y -qq -o Dpkg::Options::=--force-confold; } >>"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    exit 1
  }
fi
# The packages' services never start in the root (nothing runs init there); its apt lists are not needed.
rm -rf "$root.partial/var/lib/apt/lists/"* "$root.partial/var/cache/apt/"*.bin
rm -rf --one-file-system "$root"
mv "$root.partial" "$root"
echo "$stamp" >"$root/.ovslb-root"
echo "distro-root: built $root in $(($(date +%s) - t0)) s:" >&2
versions >&2
echo "$root"
