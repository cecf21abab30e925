"""``load_lenient``: the config as the commands that only read take it (see its docstring)."""
from __future__ import annotations

import re

from events.errors import ConfigError
from watcher.config import MAX_CONFIG_BYTES, Config, config_path, from_raw, load, read_regular


def load_lenient(explicit: str | None = None, warn=None) -> Config:
    """``load`` for the commands that only read (tail, status, summary, board, ...): a bad key in
    one section leaves that section out (its defaults stand) and ``warn(text)`` says so, instead
    of refusing, as `fleetwatch run` still does. A bad ``[store]`` (the log's path), TOML that does
    not parse and an unreadable file are refused all the same."""
    try:
        return load(explicit, check_paths=False)
    except ConfigError as e:
        first = e
    import sys
    import tomllib  # only for a config that was refused: a good one (or none) is read by load alone
    path = config_path(explicit)
    try:
        raw = tomllib.loads(read_regular(path, MAX_CONFIG_BYTES).decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        raise first from None
    err, dropped = first, []
    for _ in range(len(raw)):
        m = re.match(r"[A-Za-z0-9_-]+", err.key or "")
        sec = m.group(0) if m else ""
        if not sec or sec == "store" or sec not in raw:
            raise first
        raw.pop(sec)
        dropped.append((sec, err))
        try:
            cfg = from_raw(raw, path, check_paths=False)
            break
        except ConfigError as e:
            err = e
    else:
        raise first
    say = warn or (lambda text: print(text, file=sys.stderr))
    from projections.text import safe

    for sec, why in dropped:
        say(f"fleetwatch: warning: {safe(why, 300)}: [{safe(sec, 40)}] left out here "
            f"(`fleetwatch run` refuses this config until it is fixed)")
    return cfg
