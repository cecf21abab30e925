"""Issue 13: config that validates can no longer crash the watcher, folders are private whatever
the umask, and a SIGTERM during start-up still ends with ``watcher.stopped`` (or a clean start to
repeat). Real files, a real FIFO, real ``fleetwatch run`` processes."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest

from events.errors import ConfigError
from events.log import EventLog
from watcher.config import parse
from tests.support.exe import FLEETWATCH



def _err(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        parse(text, check_paths=False)
    return e.value


@pytest.mark.parametrize("text,key", [
    ('[watch]\ninterval = "99999999999999d"\n', "watch.interval"),
    ('[watch]\ninterval = "1' + "0" * 5000 + 's"\n', "watch.interval"),
    ("[watch]\ninterval = 99999999999999999\n", "watch.interval"),
    ('[classify]\nstall_after = "40000d"\n', "classify.stall_after"),
    ('[notify]\nrepeat_interval = "999999999999d"\n', "notify.repeat_interval"),
    ('[notify]\nretry = ["1s", "99999999d"]\n', "notify.retry[1]"),
    ('[steps.deadlines]\napply = "99999999d"\n', "steps.deadlines.apply"),
    ('[watch]\ninterval = "1ms"\n', "watch.interval"),
    ('[swarm]\nmax_concurrent = -1\n', "swarm.max_concurrent"),
    ('[swarm]\nmax_children = 99999999999\n', "swarm.max_children"),
    ("[notify]\nflap_high = nan\n", "notify.flap_high"),
    ("[notify]\nflap_high = inf\n", "notify.flap_high"),
    ('[[sources]]\nname = "c"\nkind = "command"\nargv = ["true"]\ntimeout = "20s"\n', "sources[0].timeout"),
    ('[[sources]]\nname = "c"\nkind = "command"\nargv = ["true"]\ntimeout = "0s"\n', "sources[0].timeout"),
    ('[[sources]]\nname = "g"\nkind = "goals"\nglob = "/x/*/goal.json"\nmax_bytes = 0\n', "sources[0].max_bytes"),
    ('[[sources]]\nname = "g"\nkind = "goals"\nglob = "/x/*/goal.json"\nmax_bytes = 9999999999\n',
     "sources[0].max_bytes"),
    # found by a hostile pass: "07:00-07:00" was accepted and silently quiet for no minute at all
    ('[notify]\nquiet = ["07:00-07:00"]\n', "notify.quiet[0]"),
    ('[notify]\nquiet = ["22:00-06:00", "22:00-24:30"]\n', "notify.quiet[1]"),
])
def test_out_of_range_values_name_their_key(text, key):
    e = _err(text)
    assert e.key == key and key in str(e) and e.exit_code == 2


def test_source_timeout_the_watchdog_could_not_survive_is_refused():
    e = _err('[[sources]]\nname = "c"\nkind = "command"\nargv = ["true"]\ntimeout = "16s"\n')
    assert "WatchdogSec=30" in str(e)
    parse('[[sources]]\nname = "c"\nkind = "command"\nargv = ["true"]\ntimeout = "15s"\n', check_paths=False)


def test_deeply_nested_toml_is_a_config_error():
    e = _err("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    assert "nested too deeply" in str(e) or "not valid TOML" in str(e)
    e = _err("a = " + "{b = " * 5000 + "1" + "}" * 5000 + "\n")
    assert e.exit_code == 2


@pytest.mark.parametrize("text", [
    '[watch]\ninterval = "99999999999999d"\n',
    "x = " + "[" * 50_000 + "]" * 50_000 + "\n",
])
def test_run_with_a_crashing_config_exits_2_without_traceback(tmp_path, text):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    for cmd in (["doctor"], ["run", "--once"]):
        p = subprocess.run([FLEETWATCH, *cmd, "--config", str(cfg), "--db", str(tmp_path / "e.db")],
                           capture_output=True, text=True, timeout=60)
        assert "Traceback" not in p.stderr + p.stdout, p.stderr
        if cmd[0] == "run":
            assert p.returncode == 2, p.stderr


def test_fifo_as_config_does_not_block(tmp_path):
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    p = subprocess.run([FLEETWATCH, "run", "--once", "--config", str(fifo), "--db", str(tmp_path / "e.db")],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "a FIFO, not a regular file" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_folders_are_created_0700_whatever_the_umask(tmp_path, umask):
    from watcher.config_limits import private_dir

    target = tmp_path / "state" / "deep" / "fleetwatch"
    old = os.umask(umask)
    try:
        private_dir(str(target))
        log = EventLog(str(tmp_path / "other" / "fw" / "events.db"), durability="normal")
        log.close()
    finally:
        os.umask(old)
    for d in (tmp_path / "state", tmp_path / "state" / "deep", target, tmp_path / "other", tmp_path / "other" / "fw"):
        assert stat.S_IMODE(os.stat(d).st_mode) == 0o700, d


# ---- 9. SIGTERM during start-up --------------------------------------------------------------
def _types(db: str) -> list[str]:
    if not os.path.exists(db):
        return []
    log = EventLog(db, durability="normal", create=False)
    try:
        return [r.type for r in log.read(0)]
    finally:
        log.close()


def _config(tmp_path, argv, timeout: str = "10s") -> Path:
    goals = tmp_path / "goals" / "a1"
    goals.mkdir(parents=True, exist_ok=True)
    (goals / "goal.json").write_text(json.dumps({"agent": "a1", "state": "busy", "dod_contract": "x"}))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/goals/*/goal.json"\n'
                   f'[[sources]]\nname = "slow"\nkind = "command"\nargv = {json.dumps(argv)}\ntimeout = "{timeout}"\n')
    return cfg


def test_sigterm_during_the_first_tick_records_watcher_stopped(tmp_path):
    """The first tick waits for a slow source (up to its deadline): a SIGTERM then ends it at
    once, and the log says started … stopped."""
    marker = tmp_path / "polling"
    cfg = _config(tmp_path, ["sh", "-c", f"touch {marker}; sleep 60; echo []"], timeout="15s")
    db = str(tmp_path / "e.db")
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    p = subprocess.Popen([FLEETWATCH, "run", "--config", str(cfg), "--db", db], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        end = time.monotonic() + 30
        while not marker.exists():
            assert time.monotonic() < end and p.poll() is None, p.stdout.read() if p.poll() is not None else ""
            time.sleep(0.02)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=12)     # not held until the poll's 15 s deadline (the longest allowed)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, out
    types = _types(db)
    assert types[0] == "watcher.started" and types[-1] == "watcher.stopped", types


def test_sigterm_at_any_point_of_start_up_leaves_a_clean_start_to_repeat(tmp_path):
    cfg = _config(tmp_path, ["echo", "[]"])
    db = str(tmp_path / "e.db")
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    for delay in (0.0, 0.2, 0.4, 0.6, 0.8):
        p = subprocess.Popen([FLEETWATCH, "run", "--config", str(cfg), "--db", db], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(delay)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
        assert "Traceback" not in out, out
        types = [t for t in _types(db) if t.startswith("watcher.")]
        # every start that was recorded was closed
        assert types.count("watcher.started") == types.count("watcher.stopped"), (delay, types)
    p = subprocess.run([FLEETWATCH, "run", "--once", "--config", str(cfg), "--db", db], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
