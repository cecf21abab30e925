"""`tail --subject a7` shows everything about a7: its agent events, its DoD events and the notice
and silence events that name it (issue 45: verdicts and contract changes were left out); a
notice line (an ack among them) names the agents it is about, not only the notice id."""
from __future__ import annotations

import json
import time

from events.log import EventLog
from events.types import AgentClassified, DodContractChanged, DodVerdict, NoticeAcked, NoticeSent, SilenceAdded
from tests.support.fwcli import fw


def _world(tmp_path) -> str:
    db = str(tmp_path / "e.db")
    log = EventLog(db, durability="normal")
    t = time.time() - 100
    log.append([AgentClassified(agent="a7", to="RECLAMA", state="waiting", source="fleet"),
                AgentClassified(agent="a70", to="RECLAMA", state="waiting", source="fleet")], t)
    log.append([NoticeSent(notice="n1", covers=[1, 2], title="2 agents need you", severity="urgent",
                           keys=["agent:a7|RECLAMA#1@1", "agent:a70|RECLAMA#2@1"])], t + 1)
    log.append([NoticeSent(notice="n2", covers=[2], title="a70 needs you", severity="urgent",
                           keys=["agent:a70|RECLAMA#2@1"])], t + 2)
    log.append([NoticeAcked(notice="n1", conditions=["agent:a7|RECLAMA#1"], via="web")], t + 3)
    log.append([DodContractChanged(agent="a7", old_sha256="x", new_sha256="y")], t + 4)
    log.append([DodVerdict(agent="a7", verdict="met", verifier="lead", evidence="pytest green")], t + 5)
    log.append([SilenceAdded(silence="s1", subject_match="agent:a7", until="2099-01-01T00:00:00Z"),
                SilenceAdded(silence="s2", subject_match="agent:b*", until="2099-01-01T00:00:00Z")], t + 6)
    for i in range(300):  # much else in between: the notices about a7 are found past it
        log.append([AgentClassified(agent=f"b{i}", to="TRABAJANDO", state="busy", source="fleet")], t + 7)
    log.close()
    return db


def test_tail_subject_gathers_agent_dod_notice_and_silence_events(tmp_path):
    db = _world(tmp_path)
    r = fw("tail", "--subject", "a7", "--json", "--db", db)
    assert r.returncode == 0, r.stderr
    got = [(e["type"], e["subject"]) for e in map(json.loads, r.stdout.splitlines())]
    assert got == [("agent.classified", "agent:a7"), ("notice.sent", "notice:n1"), ("notice.acked", "notice:n1"),
                   ("dod.contract_changed", "dod:a7"), ("dod.verdict", "dod:a7"), ("silence.added", "silence:s1")]
    assert fw("tail", "--subject", "a7", "-n", "2", "--json", "--db", db).stdout.count("\n") == 2
    since = fw("tail", "--subject", "agent:a7", "--since", "0", "--json", "--db", db)
    assert [json.loads(x)["seq"] for x in since.stdout.splitlines()] == [
        json.loads(x)["seq"] for x in r.stdout.splitlines()]
    run = fw("tail", "--subject", "run:T1", "--db", db)          # other subjects: exactly as before
    assert run.returncode == 0 and run.stdout == ""


def test_notice_lines_name_the_agents(tmp_path):
    db = _world(tmp_path)
    out = fw("tail", "--type", "notice.acked", "--type", "notice.sent", "--db", db).stdout.splitlines()
    acked = next(x for x in out if "notice.acked" in x)
    assert "about=a7" in acked and "via=web" in acked
    sent = next(x for x in out if "notice:n1" in x and "notice.sent" in x)
    assert "about=a7,a70" in sent and "RECLAMA#" not in sent
