"""``private_dir``: folders for the log and the config, 0700 whatever the umask."""
from __future__ import annotations

import os


def private_dir(path: str) -> None:
    """Create ``path`` and its missing parents as 0700 folders, whatever the umask (``mkdir``
    then ``chmod``: a umask of 0 cannot widen them, one of 0700 cannot make them unusable).
    Folders that exist already are left as they are."""
    path = os.path.abspath(path)
    missing = []
    p = path
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            continue
        os.chmod(d, 0o700)
