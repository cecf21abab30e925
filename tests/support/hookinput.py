"""What a hook test feeds ``fleetwatch hook``: the virtual clock ``NOW``, the fields every Claude
Code hook payload carries (``BASE``) and agent a01's goal.json (``A01``, as in
tests/fixtures/goals/a01)."""
from __future__ import annotations

NOW = 1796068800.0  # 2026-11-30T20:00:00Z, virtual clock
BASE = {
    "session_id": "0b4e8f5c-7d1a-4c3e-9a61-2f5d8e1c3b7a",
    "transcript_path": "/home/dev/.claude/projects/-home-dev-work-a01/0b4e8f5c.jsonl",
    "cwd": "/home/dev/work/a01",
    "permission_mode": "default",
}
A01 = {
    "agent": "a01", "task": "refactor parser", "state": "busy", "phase": "haciendo",
    "dod": "editing parser.py, 3 tests left", "dod_contract": "pytest tests/test_parser.py passes; ruff clean",
    "dod_status": "pending", "last_activity": "2026-11-29T19:20:00Z",
}
