"""A duration is ASCII digits and a unit (README: "an integer and a unit: 500ms, 90s ..."), as
`--expect-head`, `report --since` and ports are. Real subprocesses, real files.

Other Unicode digits are not digits there, as for every other number of the CLI and the config:
`silence a1 --for ١h` (Arabic-Indic one) or `--for １h` (fullwidth) is refused, nothing written; a
config's `interval = "٢s"` or `quiet = ["٢٢:00-07:00"]` is refused by `run` and named in a
reading command's warning.
"""
from __future__ import annotations

from events.log import EventLog
from tests.support.fwcli import fw


def test_silence_for_with_non_ascii_digits_is_refused_and_nothing_written(tmp_path):
    db = str(tmp_path / "events.db")
    assert fw("silence", "a1", "--for", "1h", "--force", "--db", db).returncode == 0
    for value in ("\u0661h", "\uff11h", "1\u0660m"):
        r = fw("silence", "a1", "--for", value, "--force", "--db", db)
        assert r.returncode == 2 and "expected a duration like" in r.stderr, (value, r.stderr)
    with EventLog(db, create=False, readonly=True) as log:
        assert log.head()[0] == 1


def test_config_durations_and_quiet_hours_with_non_ascii_digits_are_refused(tmp_path):
    for body, key in (('[watch]\ninterval = "\u0662s"\n', "watch.interval"),
                      ('[notify]\nquiet = ["\u0662\u0662:00-07:00"]\n', "notify.quiet")):
        cfg = tmp_path / "config.toml"
        cfg.write_text(body, encoding="utf-8")
        db = str(tmp_path / "events.db")
        r = fw("run", "--once", "--config", str(cfg), "--db", db)
        assert r.returncode == 2 and key in r.stderr and "Traceback" not in r.stderr, (body, r.stderr)
        # a reading command reads past the bad section and says which key it left out (issue 45 item 9)
        r = fw("status", "--config", str(cfg), "--db", db)
        assert r.returncode == 0 and "warning" in r.stderr and key in r.stderr, (body, r.stderr)
        assert "expected" in r.stderr and "Traceback" not in r.stderr, (body, r.stderr)
