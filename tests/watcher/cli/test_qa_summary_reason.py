"""`summary` says what a RECLAMA agent needs in the words of the push and the phone pages when
the hook recorded no `waiting_for`: its reason ("waiting for the human"), not "waiting/-"
(issue 45 item 7: one view model). Real goal.json, real `fleetwatch run --once` and `summary`.

Found: the push and the phone's fleet page read "a1 · waiting for the human", `summary` read
"a1: waiting/- for 3s"."""
from __future__ import annotations

from tests.support.fwcli import fw
from tests.support.fleet import config, goal


def test_summary_names_what_a_reclama_agent_waits_for_as_the_push_does(tmp_path):
    g = tmp_path / "goals"
    goal(g, "a1", state="waiting", task="Fix login")
    goal(g, "a2", state="busy", phase="bloqueado", task="Write docs")
    goal(g, "a3", state="waiting", task="Ship", waiting_for={"kind": "permission", "tool": "Bash"})
    cfg = config(tmp_path)
    assert fw("run", "--once", "--create", "--config", str(cfg)).returncode == 0
    r = fw("summary", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    lines = {ln.split(":")[0].strip(): ln for ln in r.stdout.splitlines() if ln.startswith("  ")}
    assert lines["a1"].startswith("  a1: waiting for the human for ") and "task: Fix login" in lines["a1"], r.stdout
    assert lines["a2"].startswith("  a2: blocked for "), r.stdout
    assert lines["a3"].startswith("  a3: waiting for permission: Bash for "), r.stdout
    assert "/-" not in r.stdout
