"""A character that str.isdigit() calls a digit but int() refuses ("²", "³", "①") was a traceback
where the code checked isdigit() before int(): `fleetwatch report --since ²`, and a config with
`[web] listen = "127.0.0.1:²"`, which crashed every command that loads it, `doctor` included.
Real subprocesses, real files."""
from __future__ import annotations

from tests.support.fwcli import fw


def test_report_since_a_superscript_digit_is_refused_without_a_traceback(tmp_path):
    db = str(tmp_path / "events.db")
    assert fw("silence", "a1", "--for", "1h", "--force", "--db", db).returncode == 0
    for value in ("²", "#³", "①"):
        r = fw("report", "--since", value, "--db", db)
        assert r.returncode == 2 and "Traceback" not in r.stderr and "is not a duration" in r.stderr, r.stderr


def test_a_web_listen_port_of_superscript_digits_is_a_config_error_not_a_traceback(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text('[web]\nlisten = "127.0.0.1:\u00b2"\n')
    r = fw("run", "--once", "--config", str(cfg), "--db", str(tmp_path / "events.db"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and "web.listen" in r.stderr, r.stderr
    # a reading command reads past the bad section and says which key it left out (issue 45 item 9)
    r = fw("status", "--config", str(cfg), "--db", str(tmp_path / "events.db"))
    assert r.returncode == 0 and "Traceback" not in r.stderr and "warning: web.listen" in r.stderr, r.stderr
    d = fw("doctor", "--config", str(cfg), "--db", str(tmp_path / "events.db"))
    assert d.returncode == 1 and "Traceback" not in d.stderr and "web.listen" in d.stdout, (d.stdout, d.stderr)
