"""`fleetwatch init --force` over a config that is a symlink (kept in a dotfiles folder) replaced
the link itself with a regular file: the file the user keeps was left stale and the link gone.
It now writes the file the link names (its backup beside it) and the link stays."""
from __future__ import annotations

import os
import subprocess
from tests.support.exe import FLEETWATCH

FW = FLEETWATCH


def test_init_force_over_a_symlinked_config_writes_its_target_and_keeps_the_link(tmp_path):
    dot = tmp_path / "dotfiles"
    dot.mkdir(mode=0o755)
    target = dot / "fleetwatch.toml"
    target.write_text("# mine\n")
    cfg = tmp_path / "conf" / "config.toml"
    cfg.parent.mkdir()
    cfg.symlink_to(target)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_")}
    r = subprocess.run([FW, "init", "--force", "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                       env=dict(env, HOME=str(tmp_path)))
    assert r.returncode == 0, r.stderr
    assert cfg.is_symlink() and os.readlink(cfg) == str(target)
    assert "[[sources]]" in target.read_text() or "[watch]" in target.read_text()
    assert (dot / "fleetwatch.toml.bak").read_text() == "# mine\n"
    assert (dot.stat().st_mode & 0o777) == 0o755        # the user's folder keeps its mode
    assert (target.stat().st_mode & 0o777) == 0o600


def _init(tmp_path, cfg, *extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETWATCH_")}
    return subprocess.run([FW, "init", *extra, "--config", str(cfg)], capture_output=True, text=True, timeout=60,
                          env=dict(env, HOME=str(tmp_path)))


def test_init_over_a_dangling_config_link_makes_the_file_it_names_and_keeps_the_link(tmp_path):
    dot = tmp_path / "dotfiles"
    dot.mkdir()
    cfg = tmp_path / "config.toml"
    cfg.symlink_to(dot / "fleetwatch.toml")         # the dotfiles checkout has no such file yet
    r = _init(tmp_path, cfg)
    assert r.returncode == 0, r.stderr
    assert cfg.is_symlink() and (dot / "fleetwatch.toml").is_file()


def test_init_force_over_a_symlink_loop_is_refused_and_the_links_stay(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.symlink_to(b)
    b.symlink_to(a)
    r = _init(tmp_path, a, "--force")
    assert r.returncode == 2 and "symlink that leads nowhere" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    assert a.is_symlink() and b.is_symlink()
