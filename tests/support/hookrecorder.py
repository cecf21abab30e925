"""A Claude Code command hook that records which hook ran and the shape of its payload, never its
content: one JSON line per call in the file named by argv[1] with the event name, the sorted payload
keys and a few metadata fields (the notification type, source/reason/trigger, the tool's name,
the tool_use_id / agent_id, the type and status of each background task, the interrupt's reason/source/via, the permission
mode, the error kind), plus the hook's $TMUX_PANE and time. Standard library only, stdout silent.
"""
import json
import os
import sys
import time

META = ("notification_type", "source", "reason", "trigger", "tool_name", "agent_type", "via", "error_type",
        "error", "permission_mode", "is_interrupt", "stop_hook_active", "status")


def main() -> int:
    try:
        payload = json.loads(sys.stdin.buffer.read() or b"{}")
    except ValueError:
        payload = {}
    if not isinstance(payload, dict):
        payload = {}
    rec = {"event": payload.get("hook_event_name"), "t": time.time(), "keys": sorted(payload)}
    for k in META:
        v = payload.get(k)
        if isinstance(v, (str, bool, int)) and not isinstance(v, bool) or isinstance(v, bool):
            rec[k] = v if not isinstance(v, str) else v[:60]
    for k in ("tool_use_id", "agent_id", "session_id"):
        if isinstance(payload.get(k), str):
            rec[k] = payload[k][:80]
    for k in ("background_tasks", "tool_calls"):  # their shape: each entry's type and status only
        v = payload.get(k)
        if isinstance(v, list):
            rec[k] = [{f: e.get(f) for f in ("type", "status", "kind") if isinstance(e.get(f), str)}
                      for e in v if isinstance(e, dict)]
    ti = payload.get("tool_input")
    if isinstance(ti, dict):
        rec["tool_input_keys"] = sorted(ti)
    rec["pane"] = os.environ.get("TMUX_PANE")
    rec["ppid"] = os.getppid()
    with open(sys.argv[1], "a") as f:
        f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
