"""Two small faults a helper noted while attacking: `fleetwatch hub` made a missing folder for its
log (so a typo'd --db or [store] path started a new, empty hub log elsewhere, while `run` refuses
it since this session), and the phone page's Server header told every client the Werkzeug and
Python versions. Real processes / a real HTTP server."""
from __future__ import annotations

import subprocess

from tests.support.exe import FLEETWATCH

EXE = FLEETWATCH


def test_hub_refuses_a_log_path_whose_folder_does_not_exist(tmp_path):
    cfg = tmp_path / "hub.toml"
    cfg.write_text(f'[store]\npath = "{tmp_path}/typo/hub.db"\n[hub]\nnats = "nats://127.0.0.1:1"\n')
    r = subprocess.run([EXE, "hub", "--config", str(cfg)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "does not exist (a typo?); nothing was created" in r.stderr
    assert not (tmp_path / "typo").exists()


def test_the_page_names_no_library_or_python_version(site):
    code, _, headers = site.req(f"/n/{site.notice}?t={site.token}")
    assert code == 200
    assert headers.get("Server") == "fleetwatch", headers.get("Server")
