#!/usr/bin/env bash
# Start (or reuse) a systemd --user manager for an unprivileged user on a machine that was not
# booted with systemd (CI containers, this workplace). Needs root. Prints the user's
# XDG_RUNTIME_DIR on success; exits 1 with a reason on stderr when the machine cannot host one.
#   usage: .ci/user-manager.sh [USER]      (default: fwci, created if missing)
# What it does, all idempotent: creates the user, /run/systemd/system (systemd --user refuses to
# start unless the system "was booted with systemd"), /run/user/UID (0700, the user's), and a
# cgroup subtree the user owns in every mounted hierarchy (the manager must be able to move its
# units' processes), then starts /lib/systemd/systemd --user inside that subtree.
set -euo pipefail
user=${1:-fwci}
[ "$(id -u)" = 0 ] || { echo "user-manager: needs root" >&2; exit 1; }
sd=/lib/systemd/systemd
[ -x "$sd" ] || { echo "user-manager: $sd missing (apt-get install systemd)" >&2; exit 1; }
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
uid=$(id -u "$user")
rt=/run/user/$uid
mkdir -p /run/systemd/system "$rt"
chown "$user": "$rt"; chmod 700 "$rt"
as_user() { runuser -u "$user" -- env XDG_RUNTIME_DIR="$rt" "$@"; }
if as_user systemctl --user is-system-running >/dev/null 2>&1 \
   || [ "$(as_user systemctl --user is-system-running 2>/dev/null || true)" = degraded ]; then
  echo "$rt"; exit 0
fi
cg=()
for h in /sys/fs/cgroup/unified /sys/fs/cgroup/systemd /sys/fs/cgroup; do
  if [ -e "$h/cgroup.procs" ]; then
    mkdir -p "$h/fw-$user" && chown -R "$user": "$h/fw-$user" && cg+=("$h/fw-$user/cgroup.procs")
  fi
done
log=$rt/user-manager.log
# shellcheck disable=SC2016
sh -c 'for f in "$@"; do echo $$ > "$f" 2>/dev/null || true; done; exec runuser -u '"$user"' -- env XDG_RUNTIME_DIR='"$rt"' '"$sd"' --user' \
  sh "${cg[@]}" >"$log" 2>&1 &
for _ in $(seq 100); do
  state=$(as_user systemctl --user is-system-running 2>/dev/null || true)
  case "$state" in running|degraded) echo "$rt"; exit 0 ;; esac
  sleep 0.1
done
echo "user-manager: systemd --user did not come up (state: ${state:-none}); see $log" >&2
exit 1
