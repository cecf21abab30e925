"""File-glob sources (goals, steps): level-based, with a stat cache and the two-read rule.

- Each poll returns the full current set. Only files whose (inode, size, mtime_ns) changed are
  read again; reads are capped at ``max_bytes`` (larger -> "too large").
- A file that fails to parse counts only after two consecutive failed reads; meanwhile its last
  good observation stands (a half-written file is not MAL_LANZADO).
- Errors (unreadable file, symlink loop) become observations or a failed SourceResult, never
  exceptions out of ``poll``.
"""
from __future__ import annotations

import glob
import logging
import os
import stat
from collections.abc import Callable, Iterator
from typing import Any

from projections.observations import SourceResult
from watcher.config import Source, expand
from watcher.sources.parse import parse_goal, parse_steps

log = logging.getLogger("fleetwatch.sources")


class _Entry:
    __slots__ = ("key", "obs", "fails", "good")

    def __init__(self) -> None:
        self.key: tuple[int, int, int] | None = None
        self.obs: Any = None        # what this file reports now (None: nothing yet)
        self.good: Any = None       # last successfully parsed observation
        self.fails = 0


class GlobSource:
    """Base for goals/steps: subclasses set ``parse(raw, path, folder_id, mtime)``."""

    kind = "files"

    def __init__(self, spec: Source):
        self.name = spec.name
        self.spec = spec
        self.pattern = expand(spec.glob or "")
        self.max_bytes = spec.max_bytes
        self.cache: dict[str, _Entry] = {}
        head, name = os.path.split(self.pattern)
        root, star = os.path.split(head)
        simple = star == "*" and not any(c in root + name for c in "*?[")
        self._simple = (root, name) if simple else None

    # the folders to watch with inotify
    def watch_roots(self) -> list[str]:
        from watcher.config import _glob_root

        return [_glob_root(self.pattern)]

    def matches(self, path: str) -> bool:
        import fnmatch

        return fnmatch.fnmatch(path, self.pattern)

    def parse(self, raw: bytes, path: str, folder_id: str, mtime: float) -> Any:
        raise NotImplementedError

    def is_error(self, obs: Any) -> bool:
        return obs.error is not None

    def _read(self, path: str, st: os.stat_result) -> Any:
        folder_id = os.path.basename(os.path.dirname(path))
        mtime = st.st_mtime
        if st.st_size > self.max_bytes:
            return self.error_obs(folder_id, path, f"too large ({st.st_size} bytes > {self.max_bytes})")
        try:
            with open(path, "rb") as f:
                raw = f.read(min(st.st_size + 65536, self.max_bytes + 1))  # no 1 MB buffer per file
        except OSError as e:
            return self.error_obs(folder_id, path, f"unreadable: {e.strerror or type(e).__name__}")
        if len(raw) > self.max_bytes:
            return self.error_obs(folder_id, path, f"too large (> {self.max_bytes} bytes)")
        return self.parse(raw, path, folder_id, mtime)

    def error_obs(self, folder_id: str, path: str, reason: str) -> Any:
        raise NotImplementedError

    def _stats(self) -> Iterator[tuple[str, os.stat_result | OSError]]:
        """(path, stat or the error) for every match. ``ROOT/*/NAME`` (the usual layout) is one
        scandir plus one stat per agent; any other pattern goes through glob."""
        if self._simple is not None:
            root, name = self._simple
            try:
                it = os.scandir(root)
            except FileNotFoundError:
                return
            with it:
                for d in it:
                    try:
                        if d.name.startswith(".") or not d.is_dir():
                            continue
                    except OSError:  # e.g. a symlink loop: not an agent folder
                        continue
                    path = os.path.join(d.path, name)
                    try:
                        yield path, os.stat(path)
                    except FileNotFoundError:
                        continue
                    except OSError as e:
                        if os.path.lexists(path):
                            yield path, e
            return
        for path in glob.glob(self.pattern):
            try:
                yield path, os.stat(path)
            except OSError as e:
                if os.path.lexists(path):  # else: vanished between glob and stat
                    yield path, e

    def poll(self, now: float, full: bool = True) -> SourceResult:
        seen: dict[str, _Entry] = {}
        out = []
        try:
            stats = list(self._stats())
        except OSError as e:  # e.g. the root itself unreadable, a symlink loop in the pattern
            return SourceResult(name=self.name, kind=self.spec.kind, ok=False,
                                error=f"cannot list {self.pattern}: {e.strerror or type(e).__name__}")
        for path, st in stats:
            ent = self.cache.get(path) or _Entry()
            if isinstance(st, OSError):
                obs = self.error_obs(os.path.basename(os.path.dirname(path)), path,
                                     f"unreadable: {st.strerror or type(st).__name__}")
                ent.key, ent.obs, ent.fails = None, obs, 2
                seen[path] = ent
                out.append(obs)
                continue
            if stat.S_ISDIR(st.st_mode):
                continue
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            if key != ent.key or (ent.fails == 1):
                obs = self._read(path, st)
                if self.is_error(obs):
                    ent.fails += 1
                    if ent.fails >= 2:
                        ent.obs = obs
                    else:
                        ent.obs = ent.good  # first failure: keep the last good view (or nothing)
                else:
                    ent.fails = 0
                    ent.obs = ent.good = obs
                ent.key = key
            seen[path] = ent
            if ent.obs is not None:
                out.append(ent.obs)
        self.cache = seen
        return self.result(out)

    def result(self, items: list[Any]) -> SourceResult:
        raise NotImplementedError

    def close(self) -> None:
        pass


class GoalsSource(GlobSource):
    def parse(self, raw: bytes, path: str, folder_id: str, mtime: float):
        return parse_goal(raw, source=self.name, path=path, folder_id=folder_id, mtime=mtime)

    def error_obs(self, folder_id: str, path: str, reason: str):
        from projections.observations import AgentObs

        return AgentObs(agent=folder_id, source=self.name, path=path, error=reason)

    def result(self, items):
        return SourceResult(name=self.name, kind="goals", agents=items)


class StepsSource(GlobSource):
    def parse(self, raw: bytes, path: str, folder_id: str, mtime: float):
        return parse_steps(raw, source=self.name, path=path, folder_id=folder_id)

    def error_obs(self, folder_id: str, path: str, reason: str):
        from projections.observations import RunObs

        return RunObs(run=folder_id, source=self.name, path=path, error=reason)

    def result(self, items):
        return SourceResult(name=self.name, kind="steps", runs=items)


FACTORY: dict[str, Callable[[Source], Any]] = {"goals": GoalsSource, "steps": StepsSource}
