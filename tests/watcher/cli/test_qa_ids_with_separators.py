"""Agent ids holding the condition id's own separators ('|', '#', '@') are named whole by
`tail --subject`, tail's ``about=`` and `ack NOTICE` of an escalation (condition ids are
``subject|CLASS#n``, keys add ``@rev``; an agent writes its own id). Real log, real `fleetwatch`.

Found: `tail --subject 'p|RECLAMA#q'` left out the notices about that agent and tail printed them
as ``about=p`` (the id cut at its first '|'); an escalation's conditions (no ``@rev``) of agent
``x@y`` were read as ``agent:x``, so `ack` of that notice said it had nothing open."""
from __future__ import annotations

import json

from tests.support.fwcli import fw

PIPE = "p|RECLAMA#q"
AT = "x@y"


def _log(db: str) -> None:
    from events.log import EventLog
    from events.types import AgentClassified, NoticeAcked, NoticeEscalated, NoticeSent

    log = EventLog(db)
    log.append([AgentClassified(agent=PIPE, to="RECLAMA", state="waiting", reason="r"),          # seq 1
                AgentClassified(agent=AT, to="RECLAMA", state="waiting", reason="r"),            # seq 2
                NoticeSent(notice="n000000000000001", covers=[1], keys=[f"agent:{PIPE}|RECLAMA#1@0"]),
                NoticeAcked(notice="n000000000000001", conditions=[f"agent:{PIPE}|RECLAMA#1"], by="me"),
                NoticeEscalated(notice="n000000000000002", conditions=[f"agent:{AT}|RECLAMA#2"], covers=[2])],
               1.8e9)
    log.close()


def test_tail_subject_and_about_name_an_id_holding_a_pipe_whole(tmp_path):
    db = str(tmp_path / "e.db")
    _log(db)
    r = fw("tail", "--subject", PIPE, "--json", "--db", db)
    assert r.returncode == 0, r.stderr
    assert [json.loads(x)["type"] for x in r.stdout.splitlines()] == \
        ["agent.classified", "notice.sent", "notice.acked"], r.stdout
    r = fw("tail", "--type", "notice.acked", "--db", db)
    assert f"about={PIPE}" in r.stdout or f'about="{PIPE}"' in r.stdout, r.stdout


def test_ack_of_an_escalation_names_an_agent_whose_id_holds_an_at(tmp_path):
    db = str(tmp_path / "e.db")
    _log(db)
    r = fw("ack", "n000000000000002", "--db", db)
    assert r.returncode == 0 and r.stdout.startswith(f"acknowledged agent:{AT} RECLAMA"), (r.stdout, r.stderr)
