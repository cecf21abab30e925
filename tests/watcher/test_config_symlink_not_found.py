"""A config path that is a symlink loop, a symlink whose target is gone, or a path under a file
was "config file not found" (os.path.exists is False for all three), at the start and in a SIGHUP
reload: the user looked for a missing file that is there. Each now says what it is (exit 2 at
the start; the reload is refused with that reason and the running config kept)."""
from __future__ import annotations

import os
import subprocess
from tests.support.exe import FLEETWATCH
from tests.support.reloads import reload_lines

FW = FLEETWATCH


def config(tmp_path) -> str:
    (tmp_path / "fleet" / "a1").mkdir(parents=True)
    (tmp_path / "fleet" / "a1" / "goal.json").write_text('{"state": "busy", "dod_contract": "x"}')
    cfg = tmp_path / "good.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/e.db"\n[[sources]]\nname = "fleet"\nkind = "goals"\n'
                   f'glob = "{tmp_path}/fleet/*/goal.json"\n')
    return str(cfg)


def test_a_config_symlink_loop_or_dangling_link_is_named_not_not_found(tmp_path):
    config(tmp_path)
    loop = tmp_path / "loop.toml"
    os.symlink("loop.toml", loop)
    dangling = tmp_path / "dangling.toml"
    os.symlink("gone.toml", dangling)
    for path, said in ((loop, "symbolic links"), (dangling, "symlink whose target does not exist"),
                       (tmp_path / "good.toml" / "x.toml", "Not a directory")):
        r = subprocess.run([FW, "run", "--once", "--config", str(path)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert said in r.stderr and "not found" not in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_reload_onto_a_symlink_loop_says_loop_and_keeps_running(tmp_path):
    good = config(tmp_path)

    def loop(cfg):
        os.unlink(cfg)
        os.symlink(cfg.name, cfg)

    got = reload_lines(tmp_path, [], open(good).read(), loop, str(tmp_path / "e.db"))
    line = next(x for x in got if "reload refused" in x)
    assert "symbolic links" in line and "not found" not in line, got
