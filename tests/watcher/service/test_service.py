"""The service side: unit files (systemd-analyze), install-service, init, doctor, logging modes."""
from __future__ import annotations

import io
import logging
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from watcher.cli import app
from watcher.service import units as svc
from tests.support.exe import ROOT, TESTS

FIXTURES = TESTS / "fixtures"
if not FIXTURES.exists():
    FIXTURES = TESTS / "fixtures"

runner = CliRunner()


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A temporary HOME whose PATH has no systemctl (unless a test adds a fake one)."""
    h = tmp_path / "home"
    h.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(h / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(h / ".local" / "state"))
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    if shutil.which("systemctl"):  # hide the real one behind a fake that says "no user manager"
        fake_systemctl(bindir, rc_probe=1)
    return h


def fake_systemctl(bindir: Path, rc_probe: int = 0) -> Path:
    """A systemctl that records its arguments; ``show-environment`` exits ``rc_probe``."""
    calls = bindir / "systemctl.calls"
    exe = bindir / "systemctl"
    exe.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n"
                   f"case \"$*\" in *show-environment*) [ {rc_probe} = 0 ] || echo 'Failed to connect to bus' >&2;"
                   f" exit {rc_probe};; esac\nexit 0\n")
    exe.chmod(0o755)
    return calls


def units(home: Path) -> Path:
    return home / ".config" / "systemd" / "user"


# ---- unit files -----------------------------------------------------------------------------
# Lines systemd-analyze may print about the machine rather than the unit (no user bus in a
# container, no D-Bus session). Only lines that do NOT name one of our unit files are eligible.
ENV_NOISE = [re.compile(p) for p in (r"^Failed to (connect to|open) (the )?(user |session )?bus",
                                     r"^Failed to determine (unit paths|supplementary groups)")]


def analyze(unit_dir: Path, tmp: Path) -> list[str]:
    """Problems `systemd-analyze --user verify` reports on stderr for every unit in ``unit_dir``."""
    run = tmp / "xdg-run"
    run.mkdir(mode=0o700, exist_ok=True)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "XDG_RUNTIME_DIR": str(run),
           "SYSTEMD_LOG_COLOR": "0", "LANG": "C.UTF-8"}
    files = sorted(str(p) for p in unit_dir.iterdir() if p.suffix in (".service", ".timer"))
    r = subprocess.run(["systemd-analyze", "--user", "verify", *files], capture_output=True, text=True,
                       env=env, cwd=unit_dir, timeout=60)
    problems = [ln for ln in r.stderr.splitlines() if ln.strip() and
                (any(Path(f).name in ln for f in files) or not any(p.search(ln) for p in ENV_NOISE))]
    if r.returncode != 0 and not problems:
        problems.append(f"exit status {r.returncode}")
    return problems


needs_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze missing")


@needs_analyze
@pytest.mark.parametrize("extra", [
    [],                                                          # the plain install
    ["--config", "/tmp/my configs/fleet 100%.toml"],             # spaces and % need quoting/escaping
])
def test_rendered_units_verify_cleanly(tmp_path, extra):
    out = tmp_path / "units"
    out.mkdir()
    for name, text in svc.render_units(svc.fleetwatch_bin(), extra).items():
        assert "@FLEETWATCH@" not in text and "@ARGS@" not in text
        (out / name).write_text(text)
    assert analyze(out, tmp_path) == []


@needs_analyze
def test_analyze_catches_a_bad_key(tmp_path):
    """The checker itself fails on a warning, not only on the exit status."""
    out = tmp_path / "units"
    out.mkdir()
    text = svc.render_units(svc.fleetwatch_bin())["fleetwatch.service"]
    (out / "fleetwatch.service").write_text(text.replace("[Service]\n", "[Service]\nWatchdogSecs=30\n"))
    problems = analyze(out, tmp_path)
    assert any("WatchdogSecs" in p for p in problems), problems


def test_unit_essentials():
    text = svc.render_units("/opt/fw/bin/fleetwatch")["fleetwatch.service"]
    for line in ("Type=notify", "NotifyAccess=main", "ExecStart=/opt/fw/bin/fleetwatch run",
                 "ExecReload=/bin/kill -HUP $MAINPID", "Restart=always", "WatchdogSec=30",
                 "ExecStop=/bin/kill -USR1 $MAINPID", "ExecStopPost=/opt/fw/bin/fleetwatch notify-stopped --unasked",
                 "WantedBy=default.target", "NoNewPrivileges=yes"):
        assert re.search(rf"^{re.escape(line)}$", text, re.M), line
    verify = svc.render_units("/opt/fw/bin/fleetwatch")
    assert "Type=oneshot" in verify["fleetwatch-verify.service"]
    assert "ExecStart=/opt/fw/bin/fleetwatch verify" in verify["fleetwatch-verify.service"]
    assert "Persistent=true" in verify["fleetwatch-verify.timer"]
    assert svc.is_pristine(text) and not svc.is_pristine(text + "# mine\n")


@pytest.mark.parametrize("word, quoted", [
    ("/usr/bin/fleetwatch", "/usr/bin/fleetwatch"),              # plain
    ("/home/a b/fleetwatch", '"/home/a b/fleetwatch"'),          # a space: double quotes
    ("/x/100%", "/x/100%%"),                                     # % is a specifier
    ("/x/$HOME", "/x/$$HOME"),                                   # $ is variable expansion
    ('/x/"q"', '"/x/\\"q\\""'),                                  # embedded quotes escaped
])
def test_sd_quote(word, quoted):
    assert svc.sd_quote(word) == quoted


# ---- install-service ------------------------------------------------------------------------
def test_install_twice_is_idempotent(home):
    r1 = runner.invoke(app, ["install-service"])
    assert r1.exit_code == 0, r1.output
    assert "systemctl --user enable --now fleetwatch.service" in r1.output
    files = {p.name: p.read_text() for p in units(home).iterdir()}
    assert set(files) == set(svc.UNITS)
    assert f"ExecStart={svc.fleetwatch_bin()} run" in files["fleetwatch.service"]
    mtimes = {p.name: p.stat().st_mtime_ns for p in units(home).iterdir()}
    r2 = runner.invoke(app, ["install-service"])
    assert r2.exit_code == 0, r2.output
    assert r2.output.count("unchanged") == len(svc.UNITS)
    assert {p.name: p.stat().st_mtime_ns for p in units(home).iterdir()} == mtimes


def test_hand_edited_unit_is_refused_without_force(home):
    assert runner.invoke(app, ["install-service"]).exit_code == 0
    unit = units(home) / "fleetwatch.service"
    edited = unit.read_text().replace("RestartSec=5s", "RestartSec=1s")
    unit.write_text(edited)
    r = runner.invoke(app, ["install-service"])
    assert r.exit_code == 1
    assert "-RestartSec=1s" in r.output and "+RestartSec=5s" in r.output   # the diff
    assert "edited by hand" in r.output and "--force" in r.output
    assert unit.read_text() == edited                                     # untouched
    r = runner.invoke(app, ["install-service", "--force"])
    assert r.exit_code == 0, r.output
    assert "RestartSec=5s" in unit.read_text() and svc.is_pristine(unit.read_text())


def test_pristine_unit_of_another_install_is_updated(home):
    unit = units(home) / "fleetwatch.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(svc.render_units("/old/venv/bin/fleetwatch")["fleetwatch.service"])
    r = runner.invoke(app, ["install-service", "--dry-run"])
    assert r.exit_code == 0 and "would update" in r.output and "dry run" in r.output
    assert "/old/venv" in unit.read_text()                                # dry run wrote nothing
    assert not (units(home) / "fleetwatch-verify.timer").exists()
    r = runner.invoke(app, ["install-service"])
    assert r.exit_code == 0 and "updated" in r.output
    assert svc.fleetwatch_bin() in unit.read_text()


def test_missing_systemctl_still_succeeds(home, monkeypatch, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    r = runner.invoke(app, ["install-service"])
    assert r.exit_code == 0, r.output
    assert "systemctl not found" in r.output and (units(home) / "fleetwatch.service").exists()


def test_daemon_reload_only_when_a_manager_answers(home, tmp_path):
    calls = fake_systemctl(tmp_path / "bin", rc_probe=1)
    r = runner.invoke(app, ["install-service"])
    assert r.exit_code == 0 and "no systemd user manager reachable" in r.output
    assert "daemon-reload" not in calls.read_text()
    calls.unlink()
    fake_systemctl(tmp_path / "bin", rc_probe=0)
    shutil.rmtree(units(home))
    r = runner.invoke(app, ["install-service", "--config", str(tmp_path / "c.toml")])
    assert r.exit_code == 0, r.output
    assert "--user daemon-reload" in calls.read_text() and "✓ systemctl --user daemon-reload" in r.output
    assert f"run --config {tmp_path / 'c.toml'}" in (units(home) / "fleetwatch.service").read_text()


# ---- init -----------------------------------------------------------------------------------
def test_init_writes_a_parsable_complete_config(home):
    from watcher.config import Config, config_path, parse

    r = runner.invoke(app, ["init"])
    assert r.exit_code == 0, r.output
    path = Path(config_path())
    text = path.read_text()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert parse(text, check_paths=False) == parse(text, check_paths=False)
    cfg = parse(text, check_paths=False)
    assert msgspec.structs.replace(cfg, config_path=None) == Config()  # the written values are the defaults
    # every section and key of Config appears (set or commented), so the file documents them all
    for f in msgspec.structs.fields(Config):
        if f.encode_name.startswith("_"):
            continue
        assert f"[{f.encode_name}]" in text or f"[[{f.encode_name}]]" in text, f.encode_name
        sub = getattr(Config(), f.name)
        if isinstance(sub, msgspec.Struct):
            for k in msgspec.structs.fields(type(sub)):
                assert re.search(rf"^#? ?{k.encode_name} = ", text, re.M), f"{f.encode_name}.{k.encode_name}"
    # the commented source examples are valid when uncommented
    cfg = parse(text + "\n" + svc.SOURCE_EXAMPLES, check_paths=False)
    assert {s.kind for s in cfg.sources} == {"goals", "command", "tmux", "steps", "sqlite", "claude"}
    for k in msgspec.structs.fields(type(cfg.sources[0])):
        if k.encode_name not in ("max_bytes",):
            assert re.search(rf"^# #? ?{k.encode_name} = ", text, re.M) or k.encode_name in text, k.encode_name


def test_init_refuses_to_overwrite(home):
    assert runner.invoke(app, ["init"]).exit_code == 0
    from watcher.config import config_path

    path = Path(config_path())
    path.write_text("# mine\n")
    r = runner.invoke(app, ["init"])
    assert r.exit_code == 1 and "already exists" in r.output
    assert path.read_text() == "# mine\n"
    r = runner.invoke(app, ["init", "--force"])
    assert r.exit_code == 0
    assert Path(str(path) + ".bak").read_text() == "# mine\n" and "[notify]" in path.read_text()


# ---- doctor ---------------------------------------------------------------------------------
def _config(home: Path, body: str) -> Path:
    p = home / ".config" / "fleetwatch" / "config.toml"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(body)
    return p


def test_doctor_healthy(home, tmp_path):
    from events.log import EventLog
    from events.types import WatcherStarted

    goals = tmp_path / "goals"
    shutil.copytree(FIXTURES / "goals", goals)
    _config(home, f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{goals}/*/goal.json"\n'
                  '[notify]\nurls = ["json://127.0.0.1:8080/hook-token-xyz"]\n')
    from watcher.config import db_path

    with EventLog(db_path(None)) as lg:
        lg.append([WatcherStarted(version="t", pid=1)], now=1_000.0)
    assert runner.invoke(app, ["install-service"]).exit_code == 0
    r = runner.invoke(app, ["doctor"])
    assert r.exit_code == 0, r.output
    assert "✗" not in r.output and r.output.rstrip().endswith("healthy")
    assert re.search(r"✓ source fleet \(goals\): 8 agents", r.output), r.output
    assert "verify intact (1 events, head seq 1)" in r.output
    assert "✓ notify: 1 URL parse (json)" in r.output
    assert "hook-token-xyz" not in r.output and "127.0.0.1" not in r.output
    assert "✓ service: fleetwatch.service runs this install" in r.output


def test_doctor_broken(home, tmp_path):
    _config(home, f'[store]\npath = "{tmp_path}/not-a-log.db"\n'
                  f'[[sources]]\nname = "fleet"\nkind = "goals"\nglob = "{tmp_path}/missing/*/goal.json"\n'
                  '[[sources]]\nname = "broken"\nkind = "command"\nargv = ["sh", "-c", "exit 3"]\n'
                  '[notify]\nurls = ["nope://SECRET-TOKEN-123", "json://localhost/ok"]\n')
    (tmp_path / "not-a-log.db").write_text("this is not sqlite")
    r = runner.invoke(app, ["doctor"])
    assert r.exit_code == 1, r.output
    lines = r.output.splitlines()
    assert any(ln.startswith("✗ config:") and "sources[0].glob" in ln for ln in lines), r.output
    assert any(ln.startswith("✗ source broken (command)") for ln in lines), r.output
    assert any(ln.startswith("✗ log:") and "not an SQLite database" in ln for ln in lines), r.output
    assert any(ln.startswith("✗ notify: 1 of 2 URLs do not parse (#1; schemes: nope)") for ln in lines), r.output
    assert any(ln.startswith("! service:") and "not installed" in ln for ln in lines), r.output  # optional
    assert r.output.count("hint:") >= 5
    assert "SECRET-TOKEN-123" not in r.output
    assert lines[-1].startswith("unhealthy")


def test_doctor_unit_of_another_install(home):
    _config(home, "")
    unit = units(home) / "fleetwatch.service"
    unit.parent.mkdir(parents=True)
    unit.write_text(svc.render_units("/elsewhere/bin/fleetwatch")["fleetwatch.service"])
    r = runner.invoke(app, ["doctor"])
    assert r.exit_code == 1
    assert "runs /elsewhere/bin/fleetwatch, not this install" in r.output


def test_doctor_without_config(home):
    r = runner.invoke(app, ["doctor"])
    assert r.exit_code == 1 and "fleetwatch init" in r.output


# ---- logging --------------------------------------------------------------------------------
@pytest.fixture
def clean_logging():
    root = logging.getLogger()
    names = ("fleetwatch", "apprise", "urllib3", "requests")
    handlers, level = list(root.handlers), root.level
    levels = {n: logging.getLogger(n).level for n in names}
    yield
    for h in list(root.handlers):
        if h not in handlers:
            root.removeHandler(h)
    root.setLevel(level)
    for n, lv in levels.items():
        logging.getLogger(n).setLevel(lv)


def test_human_lines_in_utc(clean_logging):
    from watcher.runtime.logs import setup_logging

    buf = io.StringIO()
    setup_logging("info", environ={}, stream=buf)
    logging.getLogger("fleetwatch.test").info("hello %s", "world")
    logging.getLogger("fleetwatch.test").debug("hidden")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ INFO    fleetwatch\.test: hello world\n", buf.getvalue())


def test_journal_mode_prefixes_priorities(clean_logging, tmp_path):
    from watcher.runtime.logs import setup_logging

    with open(tmp_path / "journal", "w") as f:
        st = os.fstat(f.fileno())
        setup_logging("debug", environ={"JOURNAL_STREAM": f"{st.st_dev}:{st.st_ino}"}, stream=f)
        lg = logging.getLogger("fleetwatch.test")
        lg.debug("d")
        lg.info("i")
        lg.warning("w")
        lg.error("e")
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            lg.exception("failed")
    lines = (tmp_path / "journal").read_text().splitlines()
    assert lines[:4] == ["<7>fleetwatch.test: d", "<6>fleetwatch.test: i", "<4>fleetwatch.test: w",
                         "<3>fleetwatch.test: e"]
    assert lines[4] == "<3>fleetwatch.test: failed"
    assert all(ln.startswith("<3>") for ln in lines[4:]) and "RuntimeError: boom" in lines[-1]


def test_journal_stream_of_another_file_means_human(clean_logging, tmp_path):
    from watcher.runtime.logs import setup_logging

    with open(tmp_path / "out", "w") as f:
        setup_logging("info", environ={"JOURNAL_STREAM": "1:2"}, stream=f)
        logging.getLogger("fleetwatch.test").info("x")
    assert re.match(r"\d{4}-", (tmp_path / "out").read_text())


def test_secrets_are_redacted_and_apprise_is_pinned(clean_logging):
    from watcher.runtime.logs import setup_logging

    buf = io.StringIO()
    setup_logging("debug", environ={}, stream=buf)
    lg = logging.getLogger("fleetwatch.notify")
    lg.info("pushing to %s", "tgram://123456:AAbbCC@/987")
    try:
        raise ValueError("cannot reach https://user:pa55@hooks.example/T0/B1/xyz?token=t0k")
    except ValueError:
        lg.exception("failed")
    logging.getLogger("apprise").debug("apprise debug with json://host/SECRET")
    out = buf.getvalue()
    assert "tgram://***" in out and "https://***" in out
    for secret in ("123456", "AAbbCC", "pa55", "t0k", "SECRET", "hooks.example"):
        assert secret not in out
    logging.getLogger("urllib3.connectionpool").debug('"POST /botTOKEN42/sendMessage HTTP/1.1" 200')
    assert "TOKEN42" not in buf.getvalue()
    for name in ("apprise", "urllib3", "requests"):
        assert logging.getLogger(name).getEffectiveLevel() == logging.WARNING


@pytest.mark.parametrize("text, out", [
    ("to json://127.0.0.1:8080/hook now", "to json://*** now"),      # host and path hidden
    ("'mailto://u:p@x.org'", "'mailto://***'"),                      # stops at the quote
    ("no url here: a/b", "no url here: a/b"),                        # untouched
    ("two: a://x b+c://y", "two: a://*** b+c://***"),                # every URL
])
def test_redact(text, out):
    from watcher.runtime.logs import redact

    assert redact(text) == out


def test_unknown_level_is_a_config_error(clean_logging):
    from events.errors import ConfigError
    from watcher.runtime.logs import setup_logging

    with pytest.raises(ConfigError):
        setup_logging("chatty", environ={}, stream=io.StringIO())


def test_the_guide_names_the_units_install_service_writes():
    """Regression (issue 45): the guide said "three user units" while install-service wrote four."""

    text = (ROOT / "docs" / "readme" / "service.md").read_text()
    section = text.split("### `fleetwatch install-service", 1)[1].split("\n### ", 1)[0]
    intro = section.split("\n\n", 2)[1]
    words = {3: "three", 4: "four", 5: "five"}
    assert f"Writes {words[len(svc.UNITS)]} user units" in intro
    listed = re.findall(r"^- `(fleetwatch[\w.-]*)`", section, re.M)
    assert listed == list(svc.UNITS)
