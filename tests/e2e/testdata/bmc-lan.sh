#!/bin/bash
# bmc-lan.sh IP MAC get PARM... : ipmi_sim "lan_config_program" of the e2e lab's in-band BMC
# (adapted from ../shared/lab/lancontrol.sh). ipmi_sim appends "get parm..." and reads one
# "parm:value" line per parm; without this program "lan print" answers 0.0.0.0 and a zero MAC, so
# software in the VM could not learn the BMC's address. set/check are accepted and ignored.
ip=${1:?usage: bmc-lan.sh IP MAC get PARM...} mac=${2:?}
shift 2
[ "${1:-}" = get ] || exit 0
shift
for p in "$@"; do
  case $p in
    ip_addr) v=$ip ;;
    ip_addr_src) v=static ;;
    mac_addr) v=$mac ;;
    subnet_mask) v=255.255.255.255 ;;
    default_gw_ip_addr|backup_gw_ip_addr) v=0.0.0.0 ;;
    default_gw_mac_addr|backup_gw_mac_addr) v=00:00:00:00:00:00 ;;
    *) echo "Invalid parameter: $p"; exit 1 ;;
  esac
  echo "$p:$v"
done
