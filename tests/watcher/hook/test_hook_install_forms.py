"""`fleetwatch hook install` writes the cheapest form the installed Claude Code takes (watcher/cli/hookforms.py):
http to the watcher's [hook] endpoint when it is configured, else the exec form (no shell), else a shell
command on a Claude Code too old for either; only the events the mapping needs; Notification matched
to the types the mapping reads. The real client runs what it writes in test_realclient_http_hook.py."""
from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from watcher.cli import app
from watcher.config import parse
from events.errors import ConfigError

runner = CliRunner()


def fake_claude(tmp_path, monkeypatch, version: str | None):
    bindir = tmp_path / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    if version:
        (bindir / "claude").write_text(f"#!/bin/sh\nprintf '{version} (Claude Code)\\n'\n")
        (bindir / "claude").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")


def install(tmp_path, *args):
    s = tmp_path / "settings.json"
    r = runner.invoke(app, ["hook", "install", "--settings", str(s), "--command", "/opt/fw/bin/fleetwatch", *args])
    assert r.exit_code == 0, r.output
    return json.loads(s.read_text())["hooks"], r


def test_auto_is_http_with_an_endpoint_configured(tmp_path, monkeypatch):
    fake_claude(tmp_path, monkeypatch, "2.1.337")
    cfg = tmp_path / "c.toml"
    cfg.write_text('[hook]\nlisten = "127.0.0.1:8799"\n')
    hooks, r = install(tmp_path, "--config", str(cfg))
    assert "form: http" in r.output
    stop = hooks["Stop"][0]["hooks"][0]
    assert stop["type"] == "http" and stop["url"] == "http://127.0.0.1:8799/hook"
    assert stop["headers"]["X-Fleetwatch-Pane"] == "$TMUX_PANE" and "TMUX_PANE" in stop["allowedEnvVars"]
    assert hooks["SessionStart"] == [{"matcher": "*", "hooks": [{"type": "command", "command": "/opt/fw/bin/fleetwatch",
                                                                 "args": ["hook"], "timeout": 10}]}]
    assert "PostToolBatch" not in hooks and "PreToolUse" not in hooks and "Interrupt" in hooks
    assert hooks["Notification"][0]["matcher"].split("|")[0] == "permission_prompt"
    again, r = install(tmp_path, "--config", str(cfg))
    assert "nothing to change" in r.output and again == hooks


def test_auto_without_an_endpoint_is_the_exec_form_and_shell_for_old_clients(tmp_path, monkeypatch):
    fake_claude(tmp_path, monkeypatch, "2.1.145")
    hooks, r = install(tmp_path, "--config", str(tmp_path / "absent.toml"))
    assert "form: exec" in r.output and "Interrupt" not in hooks
    assert hooks["PostToolUse"][0]["hooks"][0] == {"type": "command", "command": "/opt/fw/bin/fleetwatch",
                                                   "args": ["hook"], "timeout": 10}
    fake_claude(tmp_path / "old", monkeypatch, "2.1.90")
    hooks, r = install(tmp_path / "old", "--config", str(tmp_path / "absent.toml"))
    assert "form: shell" in r.output and hooks["Stop"][0]["hooks"][0]["command"] == "/opt/fw/bin/fleetwatch hook"


def test_force_switches_forms_in_place_and_removes_events_no_longer_needed(tmp_path, monkeypatch):
    """An older install (shell commands, PostToolBatch too) becomes http hooks with --force; others'
    hooks in the same groups stay."""
    fake_claude(tmp_path, monkeypatch, "2.1.337")
    s = tmp_path / "settings.json"
    runner.invoke(app, ["hook", "install", "--settings", str(s), "--command", "/opt/fw/bin/fleetwatch",
                        "--form", "shell", "--events", "all"])
    data = json.loads(s.read_text())
    data["hooks"]["PostToolBatch"][0]["hooks"].append({"type": "command", "command": "mine"})
    s.write_text(json.dumps(data))
    hooks, r = install(tmp_path, "--form", "http", "--url", "http://127.0.0.1:8799/hook", "--force")
    assert "removed" in r.output and "updated" in r.output
    assert hooks["PostToolBatch"] == [{"hooks": [{"type": "command", "command": "mine"}]}]
    assert hooks["Stop"][0]["hooks"][0]["type"] == "http"
    assert "PreToolUse" not in hooks          # installed before (--events all), not needed: removed
    assert [h["type"] for g in hooks["PostToolUse"] for h in g["hooks"]] == ["http"]


def test_http_without_an_endpoint_is_refused(tmp_path, monkeypatch):
    fake_claude(tmp_path, monkeypatch, "2.1.337")
    r = runner.invoke(app, ["hook", "install", "--settings", str(tmp_path / "s.json"), "--form", "http",
                            "--config", str(tmp_path / "absent.toml")])
    assert r.exit_code == 2 and "[hook] listen" in r.output and not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("listen,ok", [("127.0.0.1:8766", True), ("[::1]:8766", True), ("localhost:1", False), ("127.0.0.1.x:1", False),
                                       ("0.0.0.0:8766", False), ("10.0.0.2:8766", False), ("127.0.0.1:0", False),
                                       ("127.0.0.1", False)])
def test_the_endpoint_listens_on_loopback_only(listen, ok):
    text = f'[hook]\nlisten = "{listen}"\n'
    if ok:
        assert parse(text, check_paths=False).hook.listen == listen
    else:
        with pytest.raises(ConfigError):
            parse(text, check_paths=False)


def test_events_all_adds_pretooluse_matched_to_the_tools_that_can_run_long(tmp_path, monkeypatch):
    fake_claude(tmp_path, monkeypatch, "2.1.337")
    hooks, _ = install(tmp_path, "--form", "http", "--url", "http://127.0.0.1:8799/hook", "--events", "all")
    assert hooks["PreToolUse"][0]["matcher"].startswith("Bash|") and "PostToolBatch" in hooks
    assert hooks["PostToolUse"][0]["matcher"] == "*"
