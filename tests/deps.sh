#!/bin/bash
# Installs the Debian packages the tests drive, only when some are missing:
#   python3-openstackclient python3-ironicclient  the `openstack baremetal` CLI
#   python3-tempest                               tempest's Keystone auth provider (tests/keystone)
#   ironic-tempest-plugin                         the Ironic API suite tempest runs against castiron (tests/tempest)
#   ipmitool openipmi                             IPMI client and ipmi_sim (test BMC)
#   file                                          checks the binary is static
#   chromium                                      headless browser for the web UI tests
#   qemu-system-x86 qemu-utils ipxe-qemu ovmf     the PXE-booting VMs (BIOS and UEFI) of make e2e
#   qemu-system-arm qemu-efi-aarch64              the arm64 VM (qemu-system-aarch64, AAVMF) of make e2e;
#                                                 its kernel and GRUB come from make ramdisk ARCH=arm64
#   ipxe                                          iPXE binaries castiron serves over TFTP
#   linux-image-amd64                             the ramdisk's kernel and modules (make ramdisk)
#   dnsmasq isc-dhcp-client tftp-hpa ndisc6       real DHCP/TFTP/RA peers in the pxe and agent tests
#   iputils-ping                                  reachability of the agent's static network (netup)
#   tcpdump cpio zstd xz-utils                    packet checks, initramfs and image formats
#   extlinux syslinux-common e2fsprogs gdisk      the bootable test image and disk checks
#   isolinux grub-efi-amd64-signed shim-signed xorriso  virtual media ISOs (BIOS and UEFI loaders; xorriso reads them back);
#                                                 shim and GRUB also make the Secure Boot test image
#   fdisk parted genisoimage                      partition and config-drive checks
#   kea-admin                                     perfdhcp, a DHCP load client (relay test)
#   libvirt-daemon-system libvirt-clients python3-libvirt python3-flask python3-requests
#   python3-tenacity python3-bcrypt python3-webob python3-pbr apache2-utils curl
#                                                 the sushy-tools Redfish lab (shared/redfish-lab: emulator
#                                                 on libvirt + qemu) of the redfish driver's conductor test
#   npm (only when no npm command exists: the     fetches the web UI's terminal (make web-vendor: xterm.js)
#        machine's own Node.js, e.g. NodeSource's, bundles it and conflicts with Debian's package)
#   socat                                         reads a node's serial console over TCP (console e2e)
#   postgresql                                    throwaway servers for the PostgreSQL store and multi-conductor tests
#   adduser systemd systemd-container             the .deb's dependency, systemd-analyze verify, systemd-nspawn --boot (tests/pkg)
#   linux-source-6.1 gcc make bc bison flex libelf-dev lz4
#                                                 the small VM kernel of the ramdisk (make ramdisk RAMDISK_KERNEL=vm,
#                                                 ramdisk/kernel/build.sh), which make e2e's x86 VMs boot
# As root it runs `apt-get update` and `apt-get install -y` for the missing
# ones; otherwise it only says what is missing (tests that need them skip,
# except under CI=true where they fail).
#
# usage: tests/deps.sh [EXTRA_PACKAGE...]
set -euo pipefail

PACKAGES=(python3-openstackclient python3-ironicclient python3-tempest ironic-tempest-plugin ipmitool openipmi file chromium
    qemu-system-x86 qemu-system-arm qemu-efi-aarch64 qemu-utils ipxe-qemu ovmf ipxe linux-image-amd64
    dnsmasq isc-dhcp-client tftp-hpa ndisc6 iputils-ping tcpdump cpio zstd xz-utils
    extlinux syslinux-common isolinux grub-efi-amd64-signed shim-signed xorriso e2fsprogs gdisk fdisk parted genisoimage kea-admin
    libvirt-daemon-system libvirt-clients python3-libvirt python3-flask python3-requests python3-tenacity
    python3-bcrypt python3-webob python3-pbr apache2-utils curl postgresql socat
    adduser systemd systemd-container linux-source-6.1 gcc make bc bison flex libelf-dev lz4 "$@")

if ! command -v npm >/dev/null 2>&1; then
    PACKAGES+=(npm)
fi

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "tests/deps.sh: no dpkg-query (not Debian?); make sure these are installed: ${PACKAGES[*]}" >&2
    exit 0
fi

missing=()
for p in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "tests/deps.sh: test packages present (${PACKAGES[*]})"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "tests/deps.sh: missing ${missing[*]}; not root, so not installing them" >&2
    echo "tests/deps.sh: as root: apt-get update && apt-get install -y ${missing[*]}" >&2
    exit 0
fi

echo "tests/deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y "${missing[@]}"
