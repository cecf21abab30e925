"""The fast start path's lean msgspec import (watcher/cli/fast.py, issue 19): ``datetime`` built
from the C ``_datetime`` as Python 3.12 lays it out, and ``msgspec.inspect`` stood in for while
msgspec imports. Both must leave every answer as with the real modules: checked in fresh real
processes (the stand-ins only act before msgspec is first imported), on a real log."""
from __future__ import annotations

import os
import subprocess
import sys

from events.log import EventLog
from events.types import AgentClassified, DodVerdict
from watcher.runtime.state import rebuild

T0 = 1_800_000_000.0

LEAN = '''
import sys
from watcher.cli.fast import Deferred, import_msgspec_lean
import_msgspec_lean()
import datetime, _datetime, pickle, msgspec
'''

DATETIME = LEAN + '''
real = {n for n in dir(datetime) if not n.startswith("__")}
want = {n for n in dir(_datetime) if not n.startswith("__")} | {"sys"}
assert real == want, real ^ want
assert datetime.__all__ == ("date", "datetime", "time", "timedelta", "timezone", "tzinfo", "MINYEAR", "MAXYEAR", "UTC")
assert datetime.datetime is _datetime.datetime and datetime.timezone.utc is _datetime.UTC
assert datetime.__file__.endswith("datetime.py") and datetime.__spec__.name == "datetime" and datetime.__package__ == ""
d = datetime.datetime(2027, 1, 15, 8, 0, 50, 123000, tzinfo=datetime.timezone.utc)
assert pickle.loads(pickle.dumps(d)) == d
assert msgspec.json.decode(msgspec.json.encode(d), type=datetime.datetime) == d
from events.timefmt import iso, parse_iso
print(iso(parse_iso("2027-01-15T08:00:50.123Z")), datetime.date.fromisoformat("2027-01-15").isoformat())
'''

INSPECT = LEAN + '''
assert "msgspec.inspect" not in sys.modules and isinstance(msgspec.inspect, Deferred)
class S(msgspec.Struct):
    a: int
ti = msgspec.inspect.type_info(S)            # the stand-in imports the real module on first use
import msgspec.inspect as mi
assert not isinstance(mi, Deferred) and sys.modules["msgspec.inspect"] is mi and msgspec.inspect is mi
print(type(ti).__name__, [f.name for f in ti.fields], msgspec.json.schema(S)["$defs"]["S"]["required"])
'''


def run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_datetime_built_from_c_is_the_module_python_3_12_makes():
    if sys.version_info >= (3, 12):  # there datetime.py is that module already: nothing is done
        assert run(LEAN + "print(datetime.__spec__.loader is not None)") == "True"
        return
    assert run(DATETIME) == "2027-01-15T08:00:50.123Z 2027-01-15"


def test_msgspec_inspect_stood_in_answers_as_the_real_module():
    assert run(INSPECT) == "StructType ['a'] ['a']"


def test_stand_ins_stay_out_when_datetime_or_msgspec_came_first():
    code = ("import sys, datetime; real = datetime\nfrom watcher.cli.fast import import_msgspec_lean\n"
            "import_msgspec_lean(); import datetime\nprint(datetime is real, datetime.__spec__.loader is not None)")
    assert run(code) == "True True"


def test_fast_status_prints_what_the_real_modules_print(tmp_path):
    """`status` (table and --json) and `summary` through the console script's fast path, against
    the same functions in a process that imported datetime and msgspec as usual."""
    db = str(tmp_path / "e.db")
    elog = EventLog(db, durability="normal")
    elog.append([AgentClassified(agent="a1", to="RECLAMA", state="waiting", phase="haciendo", reason="waiting",
                                 source="fleet", last_activity="2027-01-15T08:00:50.000Z"),
                 AgentClassified(agent="a2", to="DICE_TERMINADO", state="idle", phase="hecho", reason="done",
                                 source="fleet")], T0)
    elog.append([DodVerdict(agent="a2", verdict="met", verifier="v1", evidence="pytest -q: green")], T0 + 30)
    rebuild(elog)
    elog.close()
    env = dict(os.environ, FLEETWATCH_DB=db, XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    exe = os.path.join(os.path.dirname(sys.executable), "fleetwatch")
    usual = ("import datetime, msgspec, msgspec.inspect, sys, time\n"
             "time.time = lambda: 1_800_000_600.0\n"
             "from watcher.cli import status\n"
             "getattr(status, sys.argv[1])(json='--json' in sys.argv)\n")
    clock = "import time; time.time = lambda: 1_800_000_600.0\n"
    fast = clock + ("import sys; from watcher.cli import fast; rc = fast.main(sys.argv[1:])\n"
                    "assert sys.version_info >= (3, 12) or sys.modules['datetime'].__spec__.loader is None\n"
                    "assert 'msgspec.inspect' not in sys.modules\nsys.exit(rc)\n")
    for args in (["status"], ["status", "--json"], ["summary"], ["summary", "--json"]):
        a = subprocess.run([sys.executable, "-c", fast, *args], capture_output=True, env=env)
        b = subprocess.run([sys.executable, "-c", usual, *args], capture_output=True, env=env)
        assert a.returncode == b.returncode == 0, (a.stderr, b.stderr)
        assert a.stdout == b.stdout and a.stdout, args
    r = subprocess.run([exe, "status"], capture_output=True, env=env)   # the console script itself
    assert r.returncode == 0 and r.stdout.startswith(b"fleet: 2 agent(s)"), r.stderr


FORWARD_REF = LEAN + '''
import typing, msgspec._utils
from watcher.cli.fast import probe_forward_ref
assert typing.ForwardRef.__module__ == "typing" and isinstance(typing.ForwardRef, type)   # the real one again
ref = msgspec._utils._forward_ref("Foo")                    # msgspec chose the is_class variant, as with the real one
assert type(ref) is typing.ForwardRef and ref.__forward_is_class__ and not ref.__forward_is_argument__
probe = probe_forward_ref(typing.ForwardRef)
probe("Foo", is_class=True); probe("Foo", False, None, is_class=False)
for bad in ({"no_such": 1},):
    try:
        probe("Foo", **bad)
    except TypeError:
        pass
    else:
        raise AssertionError(bad)
class Old:                                                   # a ForwardRef without is_class: the probe refuses it
    def __init__(self, arg, is_argument=True, module=None): pass
try:
    probe_forward_ref(Old)("Foo", is_class=True)
except TypeError:
    print("ok")
'''


def test_forward_ref_probe_answers_msgspec_as_the_real_class():
    assert run(FORWARD_REF) == "ok"


def test_agent_rows_dod_fields_are_dod_keys(tmp_path):
    from projections import views

    dod = {"a1": {"status": "met", **{k: k.upper() for k in views.DOD_KEYS}, "evidence": "x"}}
    fleet = {"agents": {"a1": {"class": "RECLAMA", "since": None}, "a2": {"class": "RECLAMA", "since": None}}}
    rows = {r["agent"]: r for r in views.agent_rows({"fleet": fleet}, T0, dod)}
    assert list(rows["a1"]["dod"].items()) == [(k, k.upper()) for k in views.DOD_KEYS]
    assert rows["a2"]["dod"] is None and rows["a2"]["dod_status"] == "pending"


def joined_ljust(doc):
    """status_plain as it was written before its one-format-per-line form (the reference)."""
    from projections.tables import tables
    from watcher.cli.render import headline

    out = [headline(doc)]
    for title, head, rows in tables(doc):
        w = [max(map(len, col)) for col in zip(head, *rows)]
        out += ["", title, "  " + "  ".join(map(str.ljust, head, w)).rstrip()]
        out += ["  " + "  ".join(map(str.ljust, r, w)).rstrip() for r in rows]
    return "\n".join(out) + "\n"


def test_status_plain_is_the_joined_ljust_text(tmp_path):
    """Hostile and odd cells (a %-format, trailing spaces, wide and escaped characters, empty
    values) on a real log: the same text as joining ljust-padded cells."""
    from watcher.cli import render
    from watcher.cli.status import TABLE_READS, build_status, load_states

    db = str(tmp_path / "e.db")
    elog = EventLog(db, durability="normal")
    elog.append([AgentClassified(agent=a, to=c, state=s, phase="haciendo", reason="r", source="fleet", task=t,
                                 target=tg, last_activity="2027-01-15T08:00:50.000Z")
                 for a, c, s, t, tg in (("a%s", "RECLAMA", "%d%%", "fix %(x)s ", "✓ wide ✗"),
                                        ("a\x1b[2J", "ESTANCADO", "", "  ", None),
                                        ("b1", "TRABAJANDO", None, "tab\there", "t%"))], T0)
    elog.append([DodVerdict(agent="b1", verdict="failed", verifier="v%s", evidence="x")], T0 + 5)
    rebuild(elog)
    elog.close()
    cfg, states, head, _ = load_states(None, db, TABLE_READS)
    doc = build_status(cfg, states, head, T0 + 600)
    got = render.status_plain(doc)
    assert got == joined_ljust(doc) and "fix %(x)s" in got
