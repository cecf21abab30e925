#!/usr/bin/env bash
# The permission tests, run as an unprivileged user. Root reads and writes through any file mode,
# so as root these tests skip (an unwritable log, an unreadable goal.json) or take root's
# `chattr +i` path instead of the modes (a read-only copy of the log). .ci/run calls this after
# `make test` when CI runs as root; here they must pass, and none may skip.
#   usage: .ci/unprivileged.sh [USER]      (needs root; default fwci, created if missing, as
#                                           .ci/user-manager.sh does)
# The user gets a private TMPDIR/HOME (removed afterwards) and runs this checkout's .venv Python:
# every folder above the checkout must be searchable by others (.ci/run does `chmod o+x /root`).
set -euo pipefail
cd "$(dirname "$0")/.."
user=${1:-fwci}
[ "$(id -u)" = 0 ] || { echo "unprivileged: needs root (as another user, make test already runs these tests)" >&2; exit 1; }
id "$user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$user"
py=$PWD/.venv/bin/python
if ! runuser -u "$user" -- "$py" -c "import events, watcher, pytest" 2>/dev/null; then
  echo "unprivileged: $user cannot run $py with this checkout (every folder above $PWD must be o+x, its files o+r)" >&2
  exit 1
fi
tmp=$(mktemp -d /tmp/fw-unprivileged.XXXXXX)
chown "$user": "$tmp"
trap 'rm -rf "$tmp"' EXIT
# the tests whose root case differs: keep in step with their `geteuid() == 0` branches
files=(tests/events/test_log_permissions.py tests/watcher/cli/test_log_cli.py tests/watcher/sources/test_sources.py tests/events/test_log_integrity.py tests/watcher/cli/test_report.py)
select="test_log_permissions or unreadable or read_only_copy"
set +e
out=$(runuser -u "$user" -- env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$tmp" TMPDIR="$tmp" LANG=C.UTF-8 \
      PYTHONDONTWRITEBYTECODE=1 HYPOTHESIS_STORAGE_DIRECTORY="$tmp/hypothesis" \
      "$py" -m pytest -o addopts= -p no:cacheprovider -q -rs --strict-markers "${files[@]}" -k "$select" 2>&1)
rc=$?
set -e
printf '%s\n' "$out"
echo "unprivileged: pytest as $user exited $rc"
[ "$rc" = 0 ] || exit 1
if printf '%s\n' "$out" | grep -Eq '^SKIPPED|[0-9]+ skipped'; then
  echo "unprivileged: a permission test skipped as $user (see the reasons above)" >&2
  exit 1
fi
