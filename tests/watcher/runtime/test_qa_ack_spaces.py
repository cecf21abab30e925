"""`ack` names an agent whose id holds a space, typed raw or as `status` prints it (escaped).

Found: any whitespace in the target was refused ("not a notice id or a subject"), so an agent
with a space in its id (``my agent``, or ``evil\\nRECLAMA a99`` typed as shown) could be silenced
but never acknowledged from a shell; the refusal printed the id escaped twice (``\\\\\\\\x1b``).
Real log, real `fleetwatch ack` processes."""
from __future__ import annotations

from tests.support.fwcli import fw

RAW = "evil\x1b[31m\nRECLAMA a99"
SHOWN = "evil\\x1b[31m\\nRECLAMA a99"


def test_ack_names_agents_whose_ids_hold_spaces(tmp_path):
    from events.log import EventLog
    from events.types import AgentClassified

    db = str(tmp_path / "e.db")
    log = EventLog(db)
    log.append([AgentClassified(agent="my agent", to="RECLAMA", state="waiting", reason="r"),
                AgentClassified(agent=RAW, to="RECLAMA", state="waiting", reason="r")], 1.8e9)
    log.close()

    def ack(target: str):
        return fw("ack", target, "--db", db)

    r = ack("agent:my agent")
    assert r.returncode == 0 and r.stdout.startswith("acknowledged agent:my agent RECLAMA"), r.stderr
    r = ack(f"agent:{SHOWN}")
    assert r.returncode == 0 and r.stdout.startswith(f"acknowledged agent:{SHOWN} RECLAMA"), r.stderr
    acked = [rec.event.conditions for rec in EventLog(db, create=False, readonly=True).read(0, types=["notice.acked"])]
    assert [c.split("|")[0] for cs in acked for c in cs] == ["agent:my agent", f"agent:{RAW}"]
    r = ack(f"agent:{RAW}")                      # raw control characters: refused, named escaped once
    assert r.returncode == 2 and f"'agent:{SHOWN}'" in r.stderr and "\x1b" not in r.stderr, r.stderr


def test_ack_names_the_agent_whose_id_holds_a_pipe_and_a_hash(tmp_path):
    """Found: `ack 'p|RECLAMA#q'` acknowledged that agent but printed "acknowledged agent:p RECLAMA"
    (the condition id cut at its first '#'), naming another agent."""
    from events.log import EventLog
    from events.types import AgentClassified

    db = str(tmp_path / "e.db")
    log = EventLog(db)
    log.append([AgentClassified(agent="p|RECLAMA#q", to="RECLAMA", state="waiting", reason="r")], 1.8e9)
    log.close()
    r = fw("ack", "p|RECLAMA#q", "--db", db)
    assert r.returncode == 0 and r.stdout.startswith("acknowledged agent:p|RECLAMA#q RECLAMA (until"), r.stdout
    r = fw("ack", "p|RECLAMA#q", "--db", db)
    assert r.returncode == 0 and r.stdout.startswith("already acknowledged agent:p|RECLAMA#q RECLAMA"), r.stdout
