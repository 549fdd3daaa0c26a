#!/bin/bash
# vm.sh ENVFILE : start the e2e lab's "bare-metal" qemu VM (daemonized; pid in $E2E_PIDFILE).
#
# Run by bmc-chassis.sh on "chassis power on", inside the test's network namespace (adapted from
# ../shared/lab/vm.sh). The boot device is the one the BMC stored ($E2E_BOOTDEV_FILE):
#   pxe (also none/cdrom/bios: we have neither)  -> first NIC bootindex 1, disks after it
#   default (IPMI "force boot from hard drive")   -> disks only
#   disks with an MBR boot signature get the lower boot indexes (see below)
# Settings (all from ENVFILE, written by tests/e2e/lab_test.go):
#   E2E_VM_NAME E2E_BOOT=bios|uefi E2E_NET=ipv4|ipv6 E2E_QEMU E2E_MACHINE E2E_CPU (arm64: qemu-system-aarch64,
#   virt, cortex-a57 with AAVMF as E2E_OVMF_CODE/VARS) E2E_ACCEL E2E_MEM E2E_CPUS E2E_UUID E2E_SERIAL
#   E2E_NICS="tap0=52:54:00:..:..:.. tap1=..."  E2E_DISKS="/path/disk0.raw=SERIAL0 ..."
#   E2E_INBAND_BMC=true|false E2E_BMC_ADDR E2E_BMC_VM_PORT
#   E2E_OVMF_CODE E2E_OVMF_VARS  E2E_CONSOLE_SOCK E2E_MONITOR_PORT E2E_PIDFILE E2E_RUN E2E_EVENTS
set -u
# shellcheck source=/dev/null
. "${1:?usage: vm.sh ENVFILE}"

read -r bootdev < "$E2E_BOOTDEV_FILE" 2>/dev/null
bootdev=${bootdev:-default}
case "$bootdev" in
  default|disk) nic_first=0 ;;
  *)            nic_first=1 ;;
esac

args=(-name "$E2E_VM_NAME,process=$E2E_VM_NAME"
  -machine "${E2E_MACHINE:-pc}" -accel "${E2E_ACCEL:-tcg}" -m "$E2E_MEM" -smp "$E2E_CPUS"
  -uuid "$E2E_UUID" -smbios "type=1,manufacturer=Castiron,product=E2E Lab VM,serial=$E2E_SERIAL"
  -nodefaults -display none -vga none
  -chardev "socket,id=con0,path=$E2E_CONSOLE_SOCK,reconnect=1" -serial chardev:con0
  -monitor "tcp:127.0.0.1:$E2E_MONITOR_PORT,server=on,wait=off"
  -boot strict=on
  -pidfile "$E2E_PIDFILE" -daemonize)
[ -n "${E2E_CPU:-}" ] && args+=(-cpu "$E2E_CPU")

nicrom=""
if [ "$E2E_BOOT" = uefi ]; then
  # No NIC option ROM: OVMF's own EDK2 PXE client does the first DHCP/TFTP and chainloads iPXE,
  # like a real UEFI server (gotcha 10/11). Fresh NVRAM on every power on: stale boot entries
  # reorder the network boot options and each failing one costs ~60 s.
  nicrom=",romfile="
  if [ "${E2E_MACHINE:-pc}" = virt ]; then
    # AAVMF's varstore is 64 MiB: qemu takes 1-3 s to start on a writable
    # copy under load, longer than ipmi_sim may take to answer "chassis
    # power on" (it runs this script synchronously); a snapshot of the
    # pristine file (discarded when qemu exits) starts in ~0.6 s.
    vars="file=$E2E_OVMF_VARS,snapshot=on"
  else
    cp "$E2E_OVMF_VARS" "$E2E_RUN/OVMF_VARS.fd" || exit 1
    vars="file=$E2E_RUN/OVMF_VARS.fd"
  fi
  args+=(-drive "if=pflash,format=raw,unit=0,readonly=on,file=$E2E_OVMF_CODE"
         -drive "if=pflash,format=raw,unit=1,$vars")
  # IPv6-only network: without PXEv4 (which waits ~60 s for a DHCPv4 answer
  # that never comes, lab IPV6.md) OVMF's PXEv6 is the first network boot.
  if [ "${E2E_NET:-ipv4}" = ipv6 ]; then
    args+=(-fw_cfg "name=opt/org.tianocore/IPv4PXESupport,string=n")
  fi
else
  # SeaBIOS "sercon": mirror the BIOS/iPXE text console to COM1 (what -nographic does implicitly,
  # which cannot be combined with -daemonize).
  [ -s "$E2E_RUN/sercon-port" ] || printf '\xf8\x03' > "$E2E_RUN/sercon-port"
  args+=(-fw_cfg "name=etc/sercon-port,file=$E2E_RUN/sercon-port")
fi

# In-band BMC: the VM's KCS system interface talks to the lab's ipmi_sim over its VM-codec port
# (qemu adds the SMBIOS type 38 record and the ACPI IPI0001 device a real board has).
if [ "${E2E_INBAND_BMC:-false}" = true ]; then
  args+=(-chardev "socket,id=ipmi0,host=$E2E_BMC_ADDR,port=$E2E_BMC_VM_PORT,reconnect=5"
         -device ipmi-bmc-extern,id=bmc0,chardev=ipmi0 -device isa-ipmi-kcs,bmc=bmc0)
fi

bi=1
i=0
for nic in $E2E_NICS; do
  tap=${nic%%=*} mac=${nic#*=} extra=""
  if [ "$i" = 0 ] && [ "$nic_first" = 1 ]; then extra=",bootindex=$bi"; bi=$((bi + 1)); fi
  args+=(-netdev "tap,id=net$i,ifname=$tap,script=no,downscript=no"
         -device "virtio-net-pci,netdev=net$i,mac=$mac$extra$nicrom")
  i=$((i + 1))
done
# SeaBIOS boots only the first disk in the boot order ("Boot failed: not a bootable disk" and no
# fallback to the next one), where a server BIOS tries each disk in turn. So disks with an MBR boot
# signature (0x55 0xAA at byte 510) come first: an image deployed to the second disk (root device
# hints) then boots like on real hardware. Disk order and serials are unchanged.
bootable() { [ "$(od -An -tx1 -j510 -N2 "$1" 2>/dev/null | tr -d ' \n')" = 55aa ]; }
nboot=0
for disk in $E2E_DISKS; do bootable "${disk%%=*}" && nboot=$((nboot + 1)); done
other=$((bi + nboot))                   # next index for a disk without a boot signature
i=0 serials=
for disk in $E2E_DISKS; do
  path=${disk%%=*} serial=${disk#*=}
  serials=${serials:+$serials,}$serial
  if bootable "$path"; then idx=$bi bi=$((bi + 1)); else idx=$other other=$((other + 1)); fi
  args+=(-drive "file=$path,if=none,id=disk$i,format=raw,cache=unsafe"
         -device "virtio-blk-pci,drive=disk$i,serial=$serial,bootindex=$idx")
  i=$((i + 1))
done

echo "$bootdev" > "$E2E_RUN/vm-bootdev-at-start"
echo "$(date +%s.%N) start bootdev=$bootdev boot=$E2E_BOOT disks=$serials" >> "$E2E_EVENTS"
exec "${E2E_QEMU:-qemu-system-x86_64}" "${args[@]}"
