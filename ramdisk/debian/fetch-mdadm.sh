#!/bin/bash
# fetch-mdadm.sh DIR: Debian's mdadm for the ramdisk (software RAID: the
# agent raid interface, ramdisk/swraid), unpacked under DIR/root without
# installing anything: `apt-get download mdadm` from the host's apt
# sources, dpkg-deb -x. Prints the mkinitramfs arguments that put it in
# the archive as /sbin/mdadm, with the shared libraries it links (found by
# ldd: the dynamic loader, libc, libudev and theirs, taken from this
# Debian host, the release the package is built for). An existing
# DIR/root is reused (delete DIR to fetch again).
set -euo pipefail
dir=${1:?usage: fetch-mdadm.sh DIR}
mkdir -p "$dir"
dir=$(realpath "$dir")
if [ ! -x "$dir/root/sbin/mdadm" ]; then
  mkdir -p "$dir/debs"
  chmod 777 "$dir/debs" # apt-get download drops to the _apt user
  rm -f "$dir"/debs/mdadm_*.deb
  if ! (cd "$dir/debs" && apt-get download -q mdadm >&2); then
    [ "$(id -u)" -eq 0 ] || { echo "fetch-mdadm.sh: apt-get download mdadm failed (as root: apt-get update)" >&2; exit 1; }
    apt-get update -q >&2
    (cd "$dir/debs" && apt-get download -q mdadm >&2)
  fi
  rm -rf "$dir/root.tmp"
  dpkg-deb -x "$dir"/debs/mdadm_*.deb "$dir/root.tmp"
  rm -rf "$dir/root" && mv "$dir/root.tmp" "$dir/root"
fi
bin="$dir/root/sbin/mdadm"
echo "-extra /sbin/mdadm=$bin"
ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u | while read -r lib; do
  echo "-extra $lib=$(realpath "$lib")"
done
