#!/bin/bash
# fetch-arch.sh ARCH DIR: Debian's kernel and network GRUB for a foreign
# architecture (arm64), unpacked under DIR/root without installing anything:
#   DIR/root/boot/vmlinuz-<ver>, config-<ver>; DIR/root/lib/modules/<ver>/...
#   DIR/root/usr/lib/grub/arm64-efi-signed/grubnetaa64.efi.signed
# The packages come from the host's apt sources as foreign-architecture
# packages (`dpkg --add-architecture ARCH && apt-get update`, done here as
# root when needed), by `apt-get download`, unpacked with dpkg-deb -x and
# indexed with depmod -b (a .deb ships no modules.dep). An
# existing DIR/root is reused (delete DIR to fetch again). Prints the
# kernel version on stdout.
set -euo pipefail
arch=${1:?usage: fetch-arch.sh ARCH DIR} dir=${2:?usage: fetch-arch.sh ARCH DIR}
case "$arch" in
  arm64) grubpkg=grub-efi-arm64-signed ;;
  *) echo "fetch-arch.sh: $arch: only arm64 is supported" >&2; exit 2 ;;
esac
kver() { ls "$dir/root/lib/modules" 2>/dev/null | head -1; }
if [ -n "$(kver)" ] && [ -f "$dir/root/boot/vmlinuz-$(kver)" ] && [ -f "$dir/root/lib/modules/$(kver)/modules.dep" ]; then kver; exit 0; fi

if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "fetch-arch.sh: apt does not know $arch packages; as root: dpkg --add-architecture $arch && apt-get update" >&2
    exit 1
  fi
  dpkg --add-architecture "$arch"
  apt-get update -q >&2
fi
# linux-image-ARCH is a metapackage: the kernel is the one it depends on.
kpkg=$(apt-cache depends "linux-image-$arch:$arch" | awk '/Depends: linux-image-[0-9]/{print $2; exit}')
if [ -z "$kpkg" ]; then
  if [ "$(id -u)" -eq 0 ]; then apt-get update -q >&2; kpkg=$(apt-cache depends "linux-image-$arch:$arch" | awk '/Depends: linux-image-[0-9]/{print $2; exit}'); fi
  [ -n "$kpkg" ] || { echo "fetch-arch.sh: no linux-image-$arch:$arch in the apt sources" >&2; exit 1; }
fi
mkdir -p "$dir/debs"
chmod 777 "$dir/debs" # apt-get download drops to the _apt user
( cd "$dir/debs" && apt-get download -q "$kpkg" "$grubpkg:$arch" >&2 )
rm -rf "$dir/root.tmp"
for deb in "$dir"/debs/*.deb; do dpkg-deb -x "$deb" "$dir/root.tmp"; done
# modules.dep and friends are made by depmod when a kernel is installed;
# kmod's depmod reads the modules of any architecture.
v=$(ls "$dir/root.tmp/lib/modules" | head -1)
depmod -b "$dir/root.tmp" "$v"
rm -rf "$dir/root" && mv "$dir/root.tmp" "$dir/root"
kver
