"""`fleetwatch init` over what is already there: real files, real subprocesses.

A second `init --force` keeps the first one's `config.toml.bak` (the user's own config); a
`config.toml.bak` symlink is not written through (its target neither overwritten nor made 0600);
a folder or FIFO at the path, a path under a file and an unwritable folder are each one message,
never a Python traceback.
"""
from __future__ import annotations

import os

from tests.support.fwcli import fw


def test_a_second_init_force_keeps_the_first_backup_of_the_users_config(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("# MY REAL CONFIG\n")
    first = fw("init", "--force", "--config", str(cfg))
    second = fw("init", "--force", "--config", str(cfg))
    assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
    assert (tmp_path / "config.toml.bak").read_text() == "# MY REAL CONFIG\n"
    assert "config.toml.bak.1" in second.stdout and "[notify]" in (tmp_path / "config.toml.bak.1").read_text()
    assert os.stat(tmp_path / "config.toml.bak").st_mode & 0o777 == 0o600


def test_init_force_never_writes_through_a_symlinked_backup_name(tmp_path):
    cfg = tmp_path / "config.toml"
    cfg.write_text("# mine\n")
    precious = tmp_path / "precious"
    precious.write_text("precious\n")
    os.chmod(precious, 0o644)
    (tmp_path / "config.toml.bak").symlink_to(precious)
    r = fw("init", "--force", "--config", str(cfg))
    assert r.returncode == 0, r.stderr
    assert precious.read_text() == "precious\n" and os.stat(precious).st_mode & 0o777 == 0o644
    assert (tmp_path / "config.toml.bak.1").read_text() == "# mine\n"


def test_init_over_a_folder_or_a_fifo_is_refused_without_a_traceback(tmp_path):
    (tmp_path / "dir.toml").mkdir()
    os.mkfifo(tmp_path / "fifo.toml")
    for name in ("dir.toml", "fifo.toml"):
        for force in ((), ("--force",)):
            r = fw("init", *force, "--config", str(tmp_path / name))
            assert r.returncode == 2 and "not a regular file" in r.stderr, (name, force, r.stderr)
            assert "Traceback" not in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["dir.toml", "fifo.toml"] and not os.listdir(tmp_path / "dir.toml")


def test_init_under_a_file_or_in_an_unwritable_folder_is_refused_without_a_traceback(tmp_path):
    (tmp_path / "file").write_text("x")
    for path in (tmp_path / "file" / "c.toml", tmp_path / "file" / "a" / "b" / "c.toml"):
        r = fw("init", "--config", str(path))
        assert r.returncode == 2 and "is not a directory" in r.stderr and "Traceback" not in r.stderr, r.stderr
    r = fw("init", "--config", "/proc/fleetwatch-test.toml")  # a folder nobody may create files in
    assert r.returncode == 2 and "cannot write the config" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert (tmp_path / "file").read_text() == "x"
