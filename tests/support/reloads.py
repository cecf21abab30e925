"""A real ``fleetwatch run`` reloaded with SIGHUP: what it says about the reload."""
from __future__ import annotations

import os
import signal
import subprocess
import time

from tests.support.exe import FLEETWATCH


def reload_lines(tmp_path, args: list[str], first: str, second, db: str) -> list[str]:
    """Start `run` on ``first``, rewrite the config as ``second`` (a text, or a callable given
    the config's path), SIGHUP; the reload's lines."""
    cfg = tmp_path / "live.toml"
    cfg.write_text(first)
    p = subprocess.Popen([FLEETWATCH, "run", "--config", str(cfg), *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + 60
        while not os.path.exists(db + ".head"):   # the first tick is committed (liveness only)
            assert p.poll() is None and time.monotonic() < end
            time.sleep(0.05)
        cfg.write_text(second) if isinstance(second, str) else second(cfg)
        p.send_signal(signal.SIGHUP)
        time.sleep(1.0)
        assert p.poll() is None
    finally:
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    return [x for x in err.splitlines() if "reload" in x]
