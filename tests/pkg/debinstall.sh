#!/bin/bash
# usage: unshare -m -n --propagation private tests/pkg/debinstall.sh CASTIRON.deb UPGRADE.deb
# (UPGRADE.deb: the same package with a higher version)
#
# Installs the package the way the README says (apt install ./castiron_*.deb)
# in a throwaway root: an overlay over this Debian host's / in a private mount
# namespace (nothing reaches the real /), in a network namespace of its own
# (127.0.0.1:6385 is private; no network, so apt cannot download anything).
# Then checks what the package promises and runs the unit's ExecStart line as
# the castiron user with only the unit's capabilities, reaching the API.
# systemd is not PID 1 on this machine: the unit is then started for real by
# systemd booted in the throwaway root (systemd-nspawn --boot, private
# network, a target holding only castiron.service and a check). Prints
# "ok: ..." per check; any failed check exits non-zero with "FAIL: ...".
set -euo pipefail
deb=$(realpath "$1")
upgrade=$(realpath "$2")
upgrade_version=$(dpkg-deb -f "$upgrade" Version)
fail() { echo "FAIL: $*" >&2; exit 1; }
ok() { echo "ok: $*"; }
# has PATTERN TEXT: grep -q on a captured output (a pipe into grep -q would
# fail the pipeline with SIGPIPE under pipefail when grep stops early).
has() { grep -q -- "$1" <<<"$2"; }

work=$(mktemp -d /tmp/castiron-debtest-XXXXXX)
mount -t tmpfs tmpfs "$work"
mkdir "$work/upper" "$work/work" "$work/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$work/upper,workdir=$work/work" "$work/root"
R=$work/root
# What chroot needs; systemd-nspawn mounts its own.
api_mount() {
    mount -t proc proc "$R/proc"
    mount --rbind /dev "$R/dev"
    mount -t tmpfs tmpfs "$R/tmp"
    mount -t tmpfs tmpfs "$R/run"
}
api_umount() {
    umount "$R/proc" "$R/tmp" "$R/run"
    umount -R "$R/dev" 2>/dev/null || umount -lR "$R/dev"
}
api_mount
# systemd-nspawn on a host without systemd puts itself and the container in
# "supervisor" and "payload" cgroups below its own: give it one of ours, in
# every hierarchy it uses, and remove it afterwards.
cgroups=()
cg_enter() {
    local hier=() h d
    if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ]; then
        hier=(/sys/fs/cgroup)
    else
        for h in /sys/fs/cgroup/unified /sys/fs/cgroup/systemd; do [ -d "$h" ] && hier+=("$h"); done
    fi
    for h in "${hier[@]}"; do
        d=$h/castiron-debtest-$$
        mkdir "$d" && cgroups+=("$d")
        echo $$ >"$d/cgroup.procs"
    done
}
cg_leave() {
    local d
    for d in "${cgroups[@]}"; do
        echo $$ >"$(dirname "$d")/cgroup.procs" || true
        find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
        [ -d "$d" ] && echo "warning: cgroup $d left behind" >&2
    done
    cgroups=()
}
cleanup() {
    [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null || true
    cg_leave
    umount -R "$R" 2>/dev/null || umount -lR "$R" 2>/dev/null || true
    umount -l "$work" 2>/dev/null || true
    rmdir "$work" 2>/dev/null || true
}
trap cleanup EXIT
ip link set lo up
in_root() { chroot "$R" "$@"; }

# A fresh host has none of these; the overlay hides any the real host has
# (a container image's policy-rc.d forbids starting services).
in_root sh -c 'if getent passwd castiron >/dev/null; then userdel castiron; fi; rm -rf /var/lib/castiron /etc/castiron /usr/sbin/policy-rc.d'

cp "$deb" "$R/var/tmp/"
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "./var/tmp/$(basename "$deb")" </dev/null \
    || fail "apt-get install ./$(basename "$deb")"
ok "apt-get install ./$(basename "$deb")"

pw=$(in_root getent passwd castiron) || fail "no castiron user"
IFS=: read -r _ _ uid _ _ home shell <<<"$pw"
[ "$uid" -lt 1000 ] || fail "castiron is not a system user (uid $uid)"
[ "$home" = /var/lib/castiron ] || fail "castiron's home is $home"
case "$shell" in */nologin|*/false) ;; *) fail "castiron has a login shell: $shell" ;; esac
ok "system user castiron (uid $uid, home $home, shell $shell)"

[ "$(in_root stat -c %U:%G:%a /var/lib/castiron)" = castiron:castiron:750 ] || fail "/var/lib/castiron: $(in_root stat -c %U:%G:%a /var/lib/castiron)"
[ "$(in_root stat -c %U:%G:%a /etc/castiron/castiron.yaml)" = root:castiron:640 ] || fail "castiron.yaml: $(in_root stat -c %U:%G:%a /etc/castiron/castiron.yaml)"
grep -qx 'data-dir: /var/lib/castiron' "$R/etc/castiron/castiron.yaml" || fail "the default config does not keep data in /var/lib/castiron"
has /etc/castiron/castiron.yaml "$(in_root dpkg-query -W -f='${Conffiles}\n' castiron)" || fail "castiron.yaml is not a conffile"
ok "/var/lib/castiron castiron:castiron 750; /etc/castiron/castiron.yaml root:castiron 640, a conffile"

# Stamped by the build (a version or a commit), not the unstamped "dev"
# (a commit may itself start with a "d").
v=$(in_root castiron version)
has "^castiron " "$v" && ! has "^castiron dev" "$v" || fail "castiron version: $v"
ok "$(in_root castiron version)"
has data-dir "$(in_root sh -c 'MANPAGER=cat man castiron 2>/dev/null || zcat /usr/share/man/man1/castiron.1.gz')" \
    || fail "man castiron does not describe the flags"
ok "man castiron"

unit=/usr/lib/systemd/system/castiron.service
[ -L "$R/etc/systemd/system/multi-user.target.wants/castiron.service" ] || fail "castiron.service is not enabled"
ok "castiron.service enabled (multi-user.target.wants)"
manflag=()
in_root sh -c 'command -v man' >/dev/null || manflag=(--man=no) # no man-db: do not check Documentation=
in_root systemd-analyze verify "${manflag[@]}" "$unit" || fail "systemd-analyze verify $unit"
ok "systemd-analyze verify $unit ${manflag[*]}"

# The unit's ExecStart as its User with its AmbientCapabilities (and no
# other capability, no new privileges), the way systemd would start it.
exec_start=$(sed -n 's/^ExecStart=//p' "$R$unit")
caps=$(sed -n 's/^AmbientCapabilities=//p' "$R$unit" | tr 'A-Z ' 'a-z\n' | sed 's/^cap_/+/' | paste -sd, -)
user=$(sed -n 's/^User=//p' "$R$unit")
[ -n "$exec_start" ] && [ -n "$caps" ] && [ "$user" = castiron ] || fail "unit: ExecStart=$exec_start caps=$caps User=$user"
# A provisioning interface, so that DHCP (67), TFTP (69) and router
# advertisements (raw ICMPv6) open with those capabilities only.
ip link add ctdeb0 type veth peer name ctdeb1
ip link set ctdeb1 up
ip addr add 10.213.0.1/24 dev ctdeb0
ip link set ctdeb0 up
# shellcheck disable=SC2086 # ExecStart is a plain command line
CASTIRON_PXE_INTERFACE=ctdeb0 chroot "$R" setpriv --reuid="$user" --regid="$user" --init-groups --no-new-privs \
    --inh-caps="-all,$caps" --ambient-caps="-all,$caps" --bounding-set="-all,$caps" \
    $exec_start >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 150); do
    curl -sf http://127.0.0.1:6385/healthz >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log" >&2; fail "ExecStart exited"; }
    sleep 0.2
done
curl -sf http://127.0.0.1:6385/readyz >/dev/null || { cat "$work/serve.log" >&2; fail "/readyz"; }
socks=$(ss -Hlunp)
for port in 67 69; do
    has ":$port .*pid=$pid," "$socks" || fail "no UDP :$port of castiron: $socks"
done
has 'dhcp\|DHCP' "$(cat "$work/serve.log")" || fail "no DHCP in the log"
has '"version"' "$(curl -sf http://127.0.0.1:6385/v1/)" || fail "GET /v1/"
has '"name": *"debtest"' "$(curl -sf -X POST -H 'Content-Type: application/json' -H 'X-OpenStack-Ironic-API-Version: latest' \
    -d '{"driver":"fake-hardware","name":"debtest"}' http://127.0.0.1:6385/v1/nodes)" || fail "POST /v1/nodes"
has '^castiron_nodes' "$(curl -sf http://127.0.0.1:6385/metrics)" || fail "GET /metrics"
ok "ExecStart as $user with $caps only: DHCP :67 and TFTP :69 on ctdeb0; /healthz, /readyz, GET /v1/, POST /v1/nodes, /metrics answer"
[ "$(in_root stat -c %U /var/lib/castiron/castiron.db)" = castiron ] || fail "castiron.db is not castiron's"
has ' 1 nodes' "$(in_root runuser -u castiron -- castiron backup --config /etc/castiron/castiron.yaml /var/lib/castiron/debtest.db)" \
    || fail "castiron backup as castiron while serving"
ok "castiron backup while serving"
kill -TERM "$pid"
wait "$pid" || fail "castiron did not stop cleanly on SIGTERM: $(tail -5 "$work/serve.log")"
pid=
ok "SIGTERM: clean stop"

# castiron.service started by systemd (PID 1 of a container on the same
# root) after the README's "Install on an edge host" edits: an htpasswd
# file, listen on every address, a provisioning interface (a veth made in
# the container's private network); then an upgrade to UPGRADE.deb while
# the service runs.
api_umount
htpasswd -B -b -c "$R/etc/castiron/htpasswd" admin debtest-secret 2>/dev/null
chroot "$R" chgrp castiron /etc/castiron/htpasswd
chmod 640 "$R/etc/castiron/htpasswd"
cat >>"$R/etc/castiron/castiron.yaml" <<'YAML'
listen: 0.0.0.0:6385
htpasswd: /etc/castiron/htpasswd
pxe-interface: ctdeb0
YAML
cp "$upgrade" "$R/var/tmp/upgrade.deb"
cat /proc/sys/kernel/random/uuid | tr -d - >"$R/etc/machine-id" # not the host's
cat >"$R/etc/systemd/system/castiron-testnet.service" <<'UNIT'
[Unit]
Before=castiron.service
[Service]
Type=oneshot
ExecStart=/sbin/ip link add ctdeb0 type veth peer name ctdeb1
ExecStart=/sbin/ip link set ctdeb1 up
ExecStart=/sbin/ip addr add 10.213.0.1/24 dev ctdeb0
ExecStart=/sbin/ip link set ctdeb0 up
UNIT
cat >"$R/usr/local/sbin/castiron-check" <<'CHECK'
#!/bin/bash
# Runs in the container once castiron.service started; the test reads its output.
api() { curl -sf -u admin:debtest-secret -H 'X-OpenStack-Ironic-API-Version: latest' "$@"; }
ready() { for _ in $(seq 60); do curl -sf http://127.0.0.1:6385/readyz && return; sleep 1; done; echo "not ready"; }
ready; echo
systemctl show castiron -p ActiveState -p User -p NRestarts
pid=$(systemctl show castiron -p MainPID --value)
grep -E "^(Uid|CapEff|CapBnd|NoNewPrivs)" "/proc/$pid/status"
ss -Hlunp
echo "noauth /v1/nodes: $(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:6385/v1/nodes)"
api http://127.0.0.1:6385/metrics | grep '^castiron_build_info'
api -X POST -H 'Content-Type: application/json' -d '{"driver":"fake-hardware","name":"before-upgrade"}' \
    http://127.0.0.1:6385/v1/nodes >/dev/null && echo "created before-upgrade"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
    -o Dpkg::Options::=--force-confold /var/tmp/upgrade.deb </dev/null >/var/tmp/upgrade.log 2>&1 && echo "upgrade installed"
echo "after upgrade: $(dpkg-query -W castiron)"
ready; echo
systemctl show castiron -p ActiveState --value | sed 's/^/after upgrade: /'
[ "$(systemctl show castiron -p MainPID --value)" != "$pid" ] && echo "after upgrade: restarted"
api http://127.0.0.1:6385/v1/nodes/before-upgrade | grep -q '"before-upgrade"' && echo "after upgrade: before-upgrade kept"
grep -q '^pxe-interface: ctdeb0' /etc/castiron/castiron.yaml && echo "after upgrade: castiron.yaml kept"
CHECK
chmod 755 "$R/usr/local/sbin/castiron-check"
cat >"$R/etc/systemd/system/castiron-check.service" <<'UNIT'
# Wants, not Requires: the upgrade restarts castiron.service, which must not
# restart this check in the middle of its apt-get.
[Unit]
After=castiron.service
Wants=castiron.service
[Service]
Type=oneshot
StandardOutput=append:/var/tmp/castiron-check.out
StandardError=inherit
ExecStart=/usr/local/sbin/castiron-check
ExecStartPost=/bin/systemctl poweroff --no-block
UNIT
cat >"$R/etc/systemd/system/castiron-check.target" <<'UNIT'
[Unit]
Requires=castiron-testnet.service castiron-check.service
After=castiron-check.service
UNIT
cg_enter
timeout 300 systemd-nspawn -q -D "$R" --private-network --register=no --keep-unit \
    --link-journal=no -b -- systemd.unit=castiron-check.target >"$work/nspawn.log" 2>&1 </dev/null \
    || { tail -30 "$work/nspawn.log" >&2; fail "systemd-nspawn --boot"; }
cg_leave
check=$(cat "$R/var/tmp/castiron-check.out" 2>/dev/null) || { tail -30 "$work/nspawn.log" >&2; fail "no output of castiron-check.service"; }
expect() {
    local what=$1 want
    shift
    for want in "$@"; do
        has "$want" "$check" || {
            echo "$check" >&2
            tail -n 30 "$work/nspawn.log" "$R/var/tmp/upgrade.log" >&2
            fail "$what: no $want"
        }
    done
}
expect "castiron.service under systemd" '^ready' '^ActiveState=active$' '^User=castiron$' '^NRestarts=0$' \
    "^Uid:[[:space:]]*$uid[[:space:]]" '^CapEff:[[:space:]]*0000000000002400$' '^CapBnd:[[:space:]]*0000000000002400$' \
    '^NoNewPrivs:[[:space:]]*1$' ':67 .*castiron' ':69 .*castiron' '^noauth /v1/nodes: 401$' \
    '^castiron_build_info' '^created before-upgrade$'
ok "castiron.service started by systemd (nspawn --boot) with htpasswd, listen 0.0.0.0, pxe-interface: active as castiron, CapEff only NET_BIND_SERVICE+NET_RAW, NoNewPrivs, DHCP :67 and TFTP :69 bound, 401 without credentials, /metrics with them"
expect "upgrade" '^upgrade installed$' "^after upgrade: castiron[[:space:]]$upgrade_version\$" '^after upgrade: active$' \
    '^after upgrade: restarted$' '^after upgrade: before-upgrade kept$' '^after upgrade: castiron.yaml kept$'
ok "upgrade to $upgrade_version under systemd: service restarted, nodes and the edited castiron.yaml kept"
rm "$R"/etc/systemd/system/castiron-{testnet,check}.{service,target} "$R/usr/local/sbin/castiron-check" 2>/dev/null || true
api_mount

in_root env DEBIAN_FRONTEND=noninteractive apt-get purge -y -q castiron </dev/null >/dev/null || fail "apt-get purge"
[ ! -e "$R/usr/bin/castiron" ] || fail "purge left /usr/bin/castiron"
[ -f "$R/var/lib/castiron/castiron.db" ] || fail "purge removed the database"
ok "purge removes the package, keeps /var/lib/castiron/castiron.db"
