#!/bin/bash
# ramdisk/kernel/build.sh: build castiron's small ramdisk kernel for virtual
# machines (make ramdisk RAMDISK_KERNEL=vm) from Debian's kernel source.
#
#   build.sh FRAGMENT SOURCE_TARBALL CACHE_DIR
#
# FRAGMENT (ramdisk/kernel/vm.config) is merged onto `make tinyconfig` with
# scripts/kconfig/merge_config.sh, then olddefconfig; every option the
# fragment sets must survive that (a missing dependency fails the build
# instead of silently dropping a driver). Only bzImage is built: the
# fragment has no modules.
#
# The result is cached in CACHE_DIR/<key>/ where key hashes the fragment,
# this script and the tarball's name, size and mtime; a build whose key is
# there is skipped. The layout is what mkinitramfs reads:
#   CACHE_DIR/<key>/kver                          the kernel release
#   CACHE_DIR/<key>/boot/vmlinuz-<kver>, config-<kver>
#   CACHE_DIR/<key>/lib/modules/<kver>/modules.dep (empty), modules.builtin
# The last line on stdout is CACHE_DIR/<key>; progress goes to stderr.
#
# Environment: JOBS (make -j, default nproc), SOURCE_DATE_EPOCH (the
# kernel's recorded build time; default the tarball's mtime), NICE (default
# 10: the build runs under nice).
set -euo pipefail

frag=$(realpath "${1:?usage: build.sh FRAGMENT SOURCE_TARBALL CACHE_DIR}")
src=${2:?usage: build.sh FRAGMENT SOURCE_TARBALL CACHE_DIR}
cache=$(realpath -m "${3:?usage: build.sh FRAGMENT SOURCE_TARBALL CACHE_DIR}")

if [ ! -f "$src" ]; then
    echo "ramdisk kernel: no kernel source $src (apt-get install linux-source-6.1, and the build tools: gcc make bc bison flex libelf-dev libssl-dev xz-utils lz4)" >&2
    exit 1
fi
for tool in gcc make bc bison flex lz4 xz perl; do
    if ! command -v "$tool" >/dev/null; then
        echo "ramdisk kernel: $tool missing (apt-get install gcc make bc bison flex libelf-dev libssl-dev xz-utils lz4)" >&2
        exit 1
    fi
done

self=$(readlink -f "$0")
key=$( { cat "$frag" "$self"; stat -c '%n %s %Y' "$(readlink -f "$src")"; } | sha256sum | cut -c1-16)
mkdir -p "$cache"
out="$cache/$key"
if [ -f "$out/kver" ] && [ -f "$out/boot/vmlinuz-$(cat "$out/kver")" ]; then
    echo "ramdisk kernel: cached $out ($(cat "$out/kver"))" >&2
    echo "$out"
    exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/castiron-vmkernel-$key.XXXXXX")
rm -rf "$out.tmp"
trap 'rm -rf "$work" "$out.tmp"' EXIT
start=$(date +%s)
echo "ramdisk kernel: building $key from $src in $work (takes minutes; cached afterwards)" >&2
tar -xf "$src" -C "$work" --strip-components=1

export KBUILD_BUILD_USER=castiron KBUILD_BUILD_HOST=castiron
export KBUILD_BUILD_TIMESTAMP="@${SOURCE_DATE_EPOCH:-$(stat -c %Y "$(readlink -f "$src")")}"
mk() { nice -n "${NICE:-10}" make -C "$work" -s "$@"; }
mk tinyconfig >/dev/null
(cd "$work" && scripts/kconfig/merge_config.sh -m .config "$frag") >/dev/null
mk olddefconfig >&2
# Each option the fragment sets must be in the final .config.
lost=$(grep -E '^CONFIG_[A-Za-z0-9_]+=' "$frag" | while read -r line; do
    grep -qxF "$line" "$work/.config" || echo "$line"
done)
if [ -n "$lost" ]; then
    echo "ramdisk kernel: these options of $frag did not survive olddefconfig (missing dependency?):" >&2
    echo "$lost" >&2
    exit 1
fi
mk -j"${JOBS:-$(nproc)}" bzImage >&2
kver=$(mk kernelrelease)

mkdir -p "$out.tmp/boot" "$out.tmp/lib/modules/$kver"
cp "$work/arch/x86/boot/bzImage" "$out.tmp/boot/vmlinuz-$kver"
cp "$work/.config" "$out.tmp/boot/config-$kver"
: >"$out.tmp/lib/modules/$kver/modules.dep"
cp "$work/modules.builtin" "$out.tmp/lib/modules/$kver/modules.builtin"
echo "$kver" >"$out.tmp/kver"
rm -rf "$out"
mv "$out.tmp" "$out"
echo "ramdisk kernel: built $kver in $(($(date +%s) - start)) s: $(stat -c %s "$out/boot/vmlinuz-$kver") bytes" >&2
echo "$out"
