"""A --config or --db path ending in a slash names a folder, but the path functions drop the
slash: `fleetwatch init --config DIR/` wrote a config *file* named DIR, and `run --db DIR/` made
a log file of that name, so the folder the user meant could never be made. Every way of naming
the two files (--config, $FLEETWATCH_CONFIG, --db, $FLEETWATCH_DB, [store] path) now refuses it
(exit 2, naming the key and the file meant) and writes nothing."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


def fw(tmp_path: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_")}
    base.update(HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path / "xc"), XDG_STATE_HOME=str(tmp_path / "xs"))
    return subprocess.run([FW, *args], capture_output=True, text=True, timeout=60, env={**base, **(env or {})})


def test_init_with_a_config_path_ending_in_a_slash_writes_no_file_of_that_name(tmp_path):
    p = fw(tmp_path, "init", "--config", f"{tmp_path}/conf/")
    assert p.returncode == 2, p.stderr
    assert "--config names a folder" in p.stderr and "conf/config.toml" in p.stderr, p.stderr
    assert not (tmp_path / "conf").exists()
    assert "Traceback" not in p.stderr


@pytest.mark.parametrize("args, env, key", [
    (["run", "--once", "--config", "{d}/plain.toml", "--db", "{d}/logs/"], {}, "--db"),
    (["tail", "--db", "{d}/logs/"], {}, "--db"),
    (["status", "--db", "{d}/logs/."], {}, "--db"),
    (["verify"], {"FLEETWATCH_DB": "{d}/logs/"}, "$FLEETWATCH_DB"),
    (["status"], {"FLEETWATCH_CONFIG": "{d}/conf/"}, "$FLEETWATCH_CONFIG"),
    (["run", "--once", "--config", "{d}/c.toml"], {}, "store.path"),
    (["doctor", "--config", "{d}/conf/"], {}, "--config"),
])
def test_every_way_of_naming_the_log_or_config_refuses_a_folder_path(tmp_path, args, env, key):
    (tmp_path / "c.toml").write_text(f'[store]\npath = "{tmp_path}/logs/"\n')
    (tmp_path / "plain.toml").write_text('[watch]\ninterval = "2s"\n')
    d = str(tmp_path)
    p = fw(tmp_path, *[a.format(d=d) for a in args], env={k: v.format(d=d) for k, v in env.items()})
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert f"{key} names a folder" in p.stderr + p.stdout, p.stderr
    assert "Traceback" not in p.stderr
    assert not (tmp_path / "logs").exists() and not (tmp_path / "conf").exists()


def test_a_plain_path_and_a_folder_path_with_the_file_named_still_work(tmp_path):
    (tmp_path / "logs").mkdir()
    p = fw(tmp_path, "init", "--config", f"{tmp_path}/conf/config.toml", "--db", f"{tmp_path}/logs/events.db")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "conf" / "config.toml").is_file()
