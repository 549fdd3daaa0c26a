#!/bin/bash
# bmc-chassis.sh ENVFILE get|set|check PARM [VALUE] ...
#
# ipmi_sim "chassis_control" program of the e2e lab (adapted from ../shared/lab/bmc-chassis.sh).
# ipmi_sim runs inside the test's network namespace and calls us through popen():
#   <prog> ENVFILE get power boot    -> "power:1" / "boot:pxe" lines
#   <prog> ENVFILE set power "1"     -> nothing on stdout, exit 0 on success
#   <prog> ENVFILE set boot "pxe"    (none|pxe|default|cdrom|bios)
#   <prog> ENVFILE set reset "1" | set shutdown "1" | set identify "15 0"
# Every setting comes from ENVFILE, written by the Go harness (tests/e2e/lab_test.go).
# ipmi_sim is single threaded and fread()s our stdout until EOF: return fast and never let qemu
# inherit our stdout or ipmi_sim's sockets (NOTES.md gotcha 14). We run inside the namespace, so
# qemu started from here is in it too.
env_file=${1:?usage: bmc-chassis.sh ENVFILE get|set|check ...}
shift
# shellcheck source=/dev/null
. "$env_file" || { echo "cannot read $env_file"; exit 1; }
op=${1:-}
shift || true

ev() { echo "$(date +%s.%N) bmc $*" >> "$E2E_EVENTS"; }

# vm_running: the qemu in the pidfile is alive (not a zombie: orphans are reaped lazily, gotcha 15)
# and is this lab's VM. Bash builtins only: ipmi_sim forks us for every status read.
vm_running() {
  local pid stat st args
  [ -s "$E2E_PIDFILE" ] || return 1
  read -r pid < "$E2E_PIDFILE" || return 1
  [ -n "$pid" ] || return 1
  read -r stat < "/proc/$pid/stat" 2>/dev/null || return 1
  st=${stat##*) }
  st=${st:0:1}
  case "$st" in ''|Z|X) return 1 ;; esac
  mapfile -d '' args < "/proc/$pid/cmdline" 2>/dev/null || return 1
  [[ " ${args[*]} " == *"$E2E_VM_NAME"* ]]
}

# monitor CMD: one HMP command to the VM's monitor (TCP on the namespace's loopback).
monitor() {
  exec 3<>"/dev/tcp/127.0.0.1/$E2E_MONITOR_PORT" || return 1
  sleep 0.1
  printf '%s\n' "$1" >&3
  sleep 0.2
  exec 3>&-
}

power_on() {
  vm_running && return 0
  # close every fd inherited from ipmi_sim (its UDP/TCP sockets, the popen pipe) before qemu forks
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-"
    done
    exec /bin/bash "$E2E_VM_SCRIPT" "$env_file"
  ) </dev/null >>"$E2E_LAUNCH_LOG" 2>&1
}

power_off() {
  local pid i
  vm_running || return 0
  read -r pid < "$E2E_PIDFILE"
  kill -TERM "$pid" 2>/dev/null
  for ((i = 0; i < 100; i++)); do vm_running || break; sleep 0.05; done
  if vm_running; then
    kill -KILL "$pid" 2>/dev/null
    for ((i = 0; i < 40; i++)); do vm_running || break; sleep 0.05; done
  fi
  rm -f "$E2E_PIDFILE"
  echo "$(date +%s.%N) stop (bmc power off)" >> "$E2E_EVENTS"
}

bootdev() { local d; read -r d < "$E2E_BOOTDEV_FILE" 2>/dev/null; echo "${d:-default}"; }

do_get() {
  local p
  for p in "$@"; do
    case "$p" in
      power) if vm_running; then echo "power:1"; else echo "power:0"; fi ;;
      boot)  echo "boot:$(bootdev)" ;;
      *) echo "Invalid parameter: $p"; exit 1 ;;
    esac
  done
}

do_set() {
  while [ $# -gt 0 ]; do
    local parm=$1 val=${2:-} started
    shift 2 || { echo "No value present for parameter $parm"; exit 1; }
    ev "set $parm=$val"
    case "$parm" in
      power)
        if [ "$val" = 1 ]; then power_on || { echo "power on failed"; exit 1; }; else power_off; fi ;;
      reset)
        # A BMC reset re-reads the boot flags; qemu fixes the boot order at start, so when the
        # boot device changed since power on, restart qemu instead of resetting it.
        if vm_running; then
          read -r started < "$E2E_RUN/vm-bootdev-at-start" 2>/dev/null
          if [ "$started" = "$(bootdev)" ]; then monitor system_reset; else power_off; power_on; fi
        fi ;;
      shutdown) vm_running && monitor system_powerdown ;;   # ACPI power button ("chassis power soft")
      boot)
        case "$val" in none|pxe|default|cdrom|bios) echo "$val" > "$E2E_BOOTDEV_FILE" ;;
          *) echo "Invalid boot value: $val"; exit 1 ;; esac ;;
      identify) ;;                                           # no LED to blink
      *) echo "Invalid parameter: $parm"; exit 1 ;;
    esac
  done
}

case "$op" in
  get)   do_get "$@" ;;
  set)   do_set "$@" ;;
  check) exit 1 ;;   # not supported for chassis control (as upstream's example)
  *) echo "Unknown operation: $op"; exit 1 ;;
esac
exit 0
