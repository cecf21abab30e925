"""Typos refused, readable output: every refusal exits 2 with a message naming the value (real
logs, the real console script), help keeps bracketed words, `--version`/`-h`, `tail --subject`
exact by default, doctor counts tmux windows and treats a missing service as a warning, and every
agent-controlled string is escaped in tail/status/summary/the service log while --json stays JSON."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid

import pytest

from events.log import EventLog
from events.types import AgentClassified, AgentUpdated, DodVerdict
from tests.support.exe import FLEETWATCH

EXE = FLEETWATCH
EVIL = "a1\x1b]0;pwned\x07\x1b[2J\n     99 2026-01-01T00:00:00.000Z dod:a1 v1 dod.verdict verdict=met verifier=human-lead\u202e"


def fw(*args, env=None, timeout=60):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_")}
    e.update(env or {})
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=timeout, env=e)


@pytest.fixture
def db(tmp_path):
    p = str(tmp_path / "events.db")
    elog = EventLog(p, durability="normal")
    elog.append([AgentClassified(agent=a, to="RECLAMA", state="waiting", source="fleet", contract_sha256="x")
                 for a in ("a1", "a10", "a11", "a12", "builder-7")], time.time())
    elog.close()
    return p


def count(db: str, type_: str) -> int:
    elog = EventLog(db, create=False)
    try:
        return sum(1 for _ in elog.read(0, types=[type_]))
    finally:
        elog.close()


# ---- refusals: exit 2, naming the value --------------------------------------------------------
def test_verdict_for_an_unknown_agent_is_refused_naming_near_matches(db):
    r = fw("verdict", "a13", "met", "--verifier", "lead", "--evidence", "x", "--db", db)
    assert r.returncode == 2 and "unknown agent a13" in r.stderr and "a1" in r.stderr and "--force" in r.stderr
    assert count(db, "dod.verdict") == 0
    r = fw("verdict", "nosuch", "met", "--verifier", "lead", "--evidence", "x", "--db", db)
    assert r.returncode == 2 and "nosuch" in r.stderr
    r = fw("verdict", "a13", "met", "--verifier", "lead", "--evidence", "x", "--force", "--db", db)
    assert r.returncode == 0 and count(db, "dod.verdict") == 1


def test_verdict_refusals_name_the_bad_value(db):
    r = fw("verdict", "a1", "meet", "--verifier", "lead", "--evidence", "x", "--db", db)
    assert r.returncode == 2 and "'meet'" in r.stderr
    r = fw("verdict", "a1", "met", "--verifier", "a1", "--evidence", "x", "--db", db)
    assert r.returncode == 2 and "self-approval" in r.stderr


def test_silence_unknown_class_lists_the_classes(db):
    r = fw("silence", "--class", "NOPE", "--for", "1h", "--db", db)
    assert r.returncode == 2 and "unknown class NOPE" in r.stderr
    assert "RECLAMA" in r.stderr and "RULE_VIOLATED" in r.stderr
    assert count(db, "silence.added") == 0
    assert fw("silence", "--class", "estancado", "--for", "1h", "--db", db).returncode == 0


def test_silence_requires_for(db):
    r = fw("silence", "a1", "--db", db)
    assert r.returncode == 2 and "--for" in r.stderr
    assert count(db, "silence.added") == 0


def test_silence_unknown_agent_is_refused_and_force_records(db):
    r = fw("silence", "a02", "--for", "2h", "--db", db)
    assert r.returncode == 2 and "unknown agent a02" in r.stderr
    assert fw("silence", "agent:*", "--for", "2h", "--db", db).returncode == 0      # globs are not typos
    assert fw("silence", "a02", "--for", "2h", "--force", "--db", db).returncode == 0
    assert count(db, "silence.added") == 2


def test_bad_durations_exit_2_naming_the_key(db):
    r = fw("silence", "a1", "--for", "soon", "--db", db)
    assert r.returncode == 2 and "--for" in r.stderr and "soon" in r.stderr


# ---- tail --subject and --type ------------------------------------------------------------------
def test_tail_subject_bare_id_is_exact_and_star_is_a_prefix(db):
    lines = fw("tail", "--subject", "a1", "--db", db).stdout.splitlines()
    assert len(lines) == 1 and " agent:a1 " in lines[0]
    assert len(fw("tail", "--subject", "agent:a1", "--db", db).stdout.splitlines()) == 1
    assert len(fw("tail", "--subject", "agent:a1*", "--db", db).stdout.splitlines()) == 4
    assert len(fw("tail", "--subject", "agent:", "--db", db).stdout.splitlines()) == 5


def test_tail_unknown_type_warns(db):
    r = fw("tail", "--type", "agent.clasified", "--db", db)
    assert r.returncode == 0 and "agent.clasified" in r.stderr and "warning" in r.stderr
    r = fw("tail", "--type", "agent.*", "--db", db)
    assert "warning" not in r.stderr and len(r.stdout.splitlines()) == 5


def test_tail_lines_are_short_and_v_shows_every_field(db):
    elog = EventLog(db, create=False)
    elog.append([AgentClassified(agent="a1", from_="RECLAMA", to="TRABAJANDO", state="busy", phase="haciendo",
                                 reason="busy", source="fleet", contract_sha256="f" * 64, contract_len=30)], time.time())
    elog.close()
    short = fw("tail", "-n", "1", "--db", db).stdout
    assert "f" * 64 not in short and "RECLAMA -> TRABAJANDO" in short and len(short) < 140
    assert "f" * 64 in fw("tail", "-n", "1", "-v", "--db", db).stdout


# ---- help, version ------------------------------------------------------------------------------
def test_version_and_short_help():
    r = fw("--version")
    assert r.returncode == 0 and r.stdout.startswith("fleetwatch ") and r.stdout.split()[1][0].isdigit()
    assert fw("-h").returncode == 0 and "Commands" in fw("-h").stdout
    assert fw("tail", "-h").returncode == 0


def test_help_keeps_bracketed_words():
    out = fw("status", "--help").stdout
    assert "[store] path" in out
    assert "[notify]" in fw("notify-test", "--help").stdout


# ---- escaping ------------------------------------------------------------------------------------
@pytest.fixture
def evil_db(tmp_path):
    p = str(tmp_path / "evil.db")
    elog = EventLog(p, durability="normal")
    elog.append([AgentClassified(agent=EVIL, to="DICE_TERMINADO", state="idle", phase="hecho", reason="r\rx",
                                 task="t\x1b[31m", source="fleet", contract_sha256="x"),
                 AgentUpdated(agent=EVIL, state="idle", phase="hecho", task="t2\n", changed=["task"]),
                 DodVerdict(agent=EVIL, verdict="failed", verifier="v\n1", evidence="e\x1b")], time.time())
    elog.close()
    return p


@pytest.mark.parametrize("cmd", [("tail",), ("tail", "-v"), ("status",), ("summary",)])
def test_agent_strings_are_escaped_everywhere(evil_db, cmd):
    r = fw(*cmd, "--db", evil_db)
    assert r.returncode == 0
    assert "\x1b" not in r.stdout and "\r" not in r.stdout and "\u202e" not in r.stdout and "\x07" not in r.stdout
    for line in r.stdout.splitlines():               # no line starts like a forged event
        assert not line.lstrip().startswith("99 2026-01-01"), line
    assert "\\x1b]0;pwned" in r.stdout


@pytest.mark.parametrize("cmd", [("tail", "--json"), ("status", "--json"), ("summary", "--json")])
def test_json_stays_valid_and_exact(evil_db, cmd):
    out = fw(*cmd, "--db", evil_db).stdout
    docs = [json.loads(line) for line in out.splitlines()] if cmd[0] == "tail" else [json.loads(out)]

    def strings(x):
        if isinstance(x, str):
            yield x
        elif isinstance(x, dict):
            for k, v in x.items():
                yield k
                yield from strings(v)
        elif isinstance(x, list):
            for v in x:
                yield from strings(v)
    found = [s for s in strings(docs) if EVIL in s]
    assert found, out                                   # the exact id, not an escaped copy


def test_service_log_line_is_one_escaped_line():
    from watcher.runtime.loop import describe

    line = describe(AgentClassified(agent=EVIL, from_="TRABAJANDO", to="RECLAMA", reason="x\ny"))
    assert "\n" not in line and "\x1b" not in line and line.count("agent:") == 1


# ---- doctor -------------------------------------------------------------------------------------
def _home(tmp_path) -> dict:
    h = tmp_path / "home"
    (h / ".config" / "fleetwatch").mkdir(parents=True)
    return {"HOME": str(h), "XDG_CONFIG_HOME": str(h / ".config"), "XDG_STATE_HOME": str(h / "state"),
            "PATH": os.path.dirname(EXE) + ":" + "/usr/bin:/bin"}


def test_doctor_without_a_service_is_healthy_with_a_warning(tmp_path):
    env = _home(tmp_path)
    goals = tmp_path / "goals" / "a1"
    goals.mkdir(parents=True)
    (goals / "goal.json").write_text('{"state": "busy", "dod_contract": "x"}')
    (tmp_path / "home" / ".config" / "fleetwatch" / "config.toml").write_text(
        f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/goals/*/goal.json"\n'
        '[notify]\nurls = ["json://127.0.0.1:9/x"]\n')
    r = fw("doctor", env=env)
    assert r.returncode == 0, r.stdout
    assert any(ln.startswith("! service:") and "not installed" in ln for ln in r.stdout.splitlines()), r.stdout
    assert r.stdout.rstrip().endswith("healthy")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_doctor_counts_tmux_windows(tmp_path):
    sock = f"fw-doc-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
    subprocess.run(["tmux", "-L", sock, "new-session", "-d", "-s", "fleet", "sleep 60"], check=True, env=env)
    try:
        for i in range(9):
            subprocess.run(["tmux", "-L", sock, "new-window", "-d", "-t", "fleet", "sleep 60"], check=True, env=env)
        henv = _home(tmp_path)
        (tmp_path / "home" / ".config" / "fleetwatch" / "config.toml").write_text(
            f'[[sources]]\nname = "tmux"\nkind = "tmux"\nsocket = "{sock}"\n')
        r = fw("doctor", env=henv)
        assert "✓ source tmux (tmux): 10 windows" in r.stdout, r.stdout
    finally:
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True, env=env)


def test_board_without_a_terminal_is_refused(db):
    r = fw("board", "--db", db)
    assert r.returncode == 2 and "terminal" in r.stderr
