"""File-glob sources (goals, steps): level-based, with a stat cache and the two-read rule.

- Each poll returns the full current set. Only files whose (inode, size, mtime_ns) changed are
  read again; reads are capped at ``max_bytes`` (larger -> "too large").
- A file that fails to parse counts only after two consecutive failed reads; meanwhile its last
  good observation stands (a half-written file is not MAL_LANZADO).
- Errors (unreadable file, symlink loop, a parser that raises) become that file's observation
  or a failed SourceResult, never exceptions out of ``poll``.
- Nothing can block a read: a file is opened ``O_NONBLOCK`` and its open descriptor checked
  (``fstat``) before one byte is read; anything but a regular file (FIFO, socket, device,
  folder), also behind a symlink, is MAL_LANZADO "a FIFO, not a regular file" and never read.
  Sizes are checked on the descriptor and again while reading (at most ``max_bytes + 1``).
- A missing (or unlistable) ROOT is a failed source (``error_class`` "root-missing"), not an
  empty fleet: its agents keep their class, and when ROOT returns the cached observations are
  reused, so nothing is re-classified or pushed again.
- Full polls (the periodic resync) stat every file; when no key changed the previous result is
  returned as it is, so unchanged files keep their very observation object (the detectors skip
  those). ROOT is listed again when its (dev, inode, mtime_ns) changed, its last listing is
  "racy" (ROOT changed within 2 s before it) or 30 s old.
- Partial polls (``full`` False, ``changed``: the paths inotify reported; simple layout only) stat
  only the files those paths can concern, the rest from the cache; the two-read rule applies.
"""
from __future__ import annotations

import glob
import logging
import math
import os
import time
from collections.abc import Callable, Iterator
from itertools import compress
from operator import attrgetter, ne
from typing import Any

from projections.observations import AgentObs, RunObs, SourceResult
from watcher.config import Source, expand
from watcher.config_limits import NotRegular
from watcher.sources import forkread, pins
from watcher.sources.filestat import DEFAULT_MAX_BYTES, _Entry, _folder_id, _not_regular, _stat, read_new, shown_name
from watcher.sources.parse import parse_goal, parse_steps

log = logging.getLogger("fleetwatch.sources")
_KEY = attrgetter("st_ino", "st_size", "st_mtime_ns")
# A folder's listing is reused while its mtime is unchanged, only when that mtime is older than the
# listing by this margin (a change in the listing's clock tick leaves the mtime: git's "racy" case).
_RACY_NS = 2_000_000_000
_RELIST_NS = 30_000_000_000  # and it is listed anyway this often (a file system whose mtimes lag)


class GlobSource:
    """Base for goals/steps: subclasses set ``parse(raw, path, folder_id, mtime)``."""

    kind, partial = "files", True   # partial: poll(now, False, changed=paths) looks only at those paths
    OBS: type       # the observation its files give (AgentObs, RunObs): what a forked reader decodes

    def __init__(self, spec: Source):
        self.name = spec.name
        self.spec = spec
        self.pattern = expand(spec.glob or "")
        self.max_bytes = spec.max_bytes or DEFAULT_MAX_BYTES
        self.cache: dict[str, _Entry] = {}
        self._names: list[str] | None = None   # ROOT's last listing (simple layout)
        self._paths: list[str] = []            # its candidate paths
        self._keys: list[tuple[int, int, int] | None] | None = None    # their last (inode, size, mtime_ns), aligned
        self._items: list[Any] | None = None   # the last result's observations
        self._obs_of: dict[str, Any] = {}      # path -> the observation it gave last
        self._suspects: set[str] = set()       # files that failed their first read
        self._cursor = 0                       # where the next rolling sweep starts in ``_paths``
        self._now = math.inf                   # this poll's time: no file counts as written after it
        # (old result list, new one, the differing (old, new) observations; None: a file came or
        # went): set when a poll changed the result in place, merged alone (runtime/merged.py)
        self.delta: tuple[list[Any] | None, list[Any], tuple[tuple[Any, Any], ...]] | None = None
        self._names_new = False                # the listing changed since the last stat pass
        self._root_key: tuple[int, int, int] | None = None  # ROOT's (dev, inode, mtime_ns) at that listing
        self._listed_ns = 0                    # when it was listed (wall clock, ns)
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
        """The observation of a regular file ``st`` stat'ed (read_new checks it again, opened)."""
        try:
            _, raw, bad = read_new(path, self.max_bytes)  # no 1 MB buffer per file
        except NotRegular as e:  # replaced by a FIFO (or other) between the stat and the open
            return self.error_obs(_folder_id(path), path, e.strerror)
        except OSError as e:
            return self.error_obs(_folder_id(path), path, f"unreadable: {e.strerror or type(e).__name__}")
        return self._observed(path, raw, bad, st.st_mtime)

    def _observed(self, path: str, raw: bytes, why: str | None, mtime: float) -> Any:
        """The observation of bytes read from ``path``: its parse (an mtime after this poll's time,
        `touch -d 2099` or a clock set back, counts as the poll's time: it bounds last_activity),
        or the error ``why``; a parser that raises (a 400-digit contract number: OverflowError)
        is that file's error, not the source's (it failed whole, every agent unseen)."""
        folder_id = _folder_id(path)
        if why:
            return self.error_obs(folder_id, path, why)
        try:
            return self.parse(raw, path, folder_id, min(mtime, self._now))
        except Exception as e:  # logged when the file changed: only then is it parsed again
            log.warning("%s: %r could not be parsed (%r)", self.name, path, e)
            return self.error_obs(folder_id, path, f"could not be parsed ({type(e).__name__})")

    def error_obs(self, folder_id: str, path: str, reason: str) -> Any:
        raise NotImplementedError

    def _stats(self) -> Iterator[tuple[str, os.stat_result | OSError]]:
        """(path, stat or the error) for every match: ROOT/*/NAME a scandir + a stat each, else glob."""
        if self._simple is not None:
            paths = self._listing()
            if paths is None:
                return
            yield from self._stat_all(paths)
            return
        from watcher.config import _glob_root
        if not os.path.isdir(_glob_root(self.pattern)):
            raise FileNotFoundError(2, "folder missing")
        for path in glob.glob(self.pattern, recursive=True):  # "**": any depth
            st = _stat(path)
            if st is not None:  # else: vanished between glob and stat
                yield path, st

    def _listing(self) -> list[str] | None:
        """The candidate paths of the simple layout: ROOT/<folder>/NAME for every folder whose
        name does not start with a dot (None: no ROOT). Rebuilt only when ROOT's listing changed."""
        root, name = self._simple  # type: ignore[misc]
        try:
            rst = os.stat(root)
        except FileNotFoundError:
            return None
        rkey = (rst.st_dev, rst.st_ino, rst.st_mtime_ns)
        listed_ns = time.time_ns()
        if rkey == self._root_key and rst.st_mtime_ns < self._listed_ns - _RACY_NS \
                and listed_ns - self._listed_ns < _RELIST_NS:
            return self._paths  # ROOT unchanged since a listing made well after its last change
        try:
            names = os.listdir(root)
        except FileNotFoundError:
            return None
        self._root_key, self._listed_ns = rkey, listed_ns
        if names != self._names:
            prefix = os.path.join(root, "")
            self._names = names
            self._paths = [f"{prefix}{n}{os.sep}{name}" for n in names if not n.startswith(".")]
            self._keys = None
            self._names_new = True
        return self._paths

    @staticmethod
    def _stat_all(paths: list[str]) -> list[tuple[str, os.stat_result | OSError]]:
        """Stat every path: missing ones (or a folder that is no folder) are left out; any other
        error (loop, permission) is kept when the path itself exists."""
        out: list[tuple[str, os.stat_result | OSError]] = []
        for path in paths:
            st = _stat(path)
            if st is not None:
                out.append((path, st))
        return out

    def _update(self, path: str, st: os.stat_result | OSError, ent: _Entry | None,
                obs: Any = None) -> _Entry | None:
        """One file's entry after this stat (the two-read rule); None: not a file (a folder).
        ``obs``: the observation of a read already made at this stat (the first poll's)."""
        if ent is None:
            ent = _Entry()
        if isinstance(st, OSError):
            obs = self.error_obs(_folder_id(path), path,
                                 f"unreadable: {st.strerror or type(st).__name__}")
            ent.key, ent.obs, ent.fails = None, obs, 2
            return ent
        why = _not_regular(st.st_mode)
        if why is not None:  # a FIFO, folder, socket or device: never read, no second chance
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            if key != ent.key or ent.obs is None or not self.is_error(ent.obs):
                ent.obs = self.error_obs(_folder_id(path), path, why)
            ent.key, ent.fails = key, 2
            return ent
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        if key != ent.key or ent.fails == 1:
            if obs is None:
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
        return ent

    def poll(self, now: float, full: bool = True, changed: set[str] | None = None,
             sweep: float = 0.0, most: int | None = None) -> SourceResult:
        """The full current set. ``changed`` (with ``full`` False): only those paths (inotify's
        report) are looked at again, the rest comes from the cache; else everything is stat'ed.
        ``sweep`` (0 < part <= 1, with ``changed``): the next ``part`` of the files is stat'ed
        too, at most ``most`` of them (see ``_sweep``)."""
        self._now = now
        if not full and changed is not None and self._items is not None:
            swept = self._sweep(sweep, most) if sweep > 0 else ()
            part = None if swept is None else self._partial(changed, swept)
            if part is not None:
                return part
        try:
            if self._simple is not None:
                return self._poll_simple()
            stats = list(self._stats())
        except FileNotFoundError:
            return self._missing_root()
        except OSError as e:  # e.g. the root itself unreadable, a symlink loop in the pattern
            return self._failed(e)
        return self._rebuild(stats)

    def _failed(self, e: OSError) -> SourceResult:
        self._items = None
        return SourceResult(name=self.name, kind=self.spec.kind, ok=False,
                            error=f"cannot list {shown_name(self.pattern)}: {e.strerror or type(e).__name__}",
                            error_class="unlistable")

    def _missing_root(self) -> SourceResult:
        """ROOT is gone: a failed source (its agents keep their class), the cache kept so that
        ROOT's return re-reads nothing that did not change."""
        from watcher.config import _glob_root

        self._items = None
        self._root_key = None
        return SourceResult(name=self.name, kind=self.spec.kind, ok=False, error_class="root-missing",
                            error=f"folder {shown_name(_glob_root(self.pattern))} is missing")

    def _rebuild(self, stats: list[tuple[str, os.stat_result | OSError]]) -> SourceResult:
        """A new cache from every (path, stat), in listing order."""
        old = self.cache
        seen: dict[str, _Entry] = {}
        for path, st in stats:
            ent = self._update(path, st, old.get(path))
            if ent is not None:
                seen[path] = ent
        self.cache = seen
        return self._emit(changed=True)

    def _first_poll(self, paths: list[str]) -> SourceResult:
        """A new cache from files never seen: each is opened at once and its descriptor's
        ``fstat`` is its stat (``filestat.read_new``: one syscall less per file than stat +
        open), under ``_update``'s rules; anything but a readable regular
        file (gone, a dangling symlink, a FIFO, a folder, unreadable) takes ``_update``'s path.
        From ``forkread.FORK_MIN`` files on, a forked second process reads part of them
        (watcher/sources/forkread.py: the very same reads, else this process's own); this
        process files each of its own as it reads it, then the child's as they come."""
        cache: dict[str, _Entry] = {}
        reads = forkread.iter_split(paths, self._read_new, self.OBS)  # from FORK_MIN files: 2 processes
        try:
            for path, (st, obs) in zip(paths, reads):
                if st is None:  # NotRegular too: the careful way, with its own stat (None: gone)
                    st = _stat(path)
                ent = None if st is None else self._update(path, st, None, obs)
                if ent is not None:
                    cache[path] = ent
        finally:
            reads.close()  # after an error above: the second process is killed and reaped now
        self.cache = cache
        return self._emit(changed=True)

    def _read_new(self, path: str) -> tuple[Any, Any]:
        """A first poll's look at one file: (its fstat, its observation), or (None, None)."""
        try:
            st, raw, why = read_new(path, self.max_bytes)
        except OSError:
            return None, None
        return st, self._observed(path, raw, why, st.st_mtime)

    def _poll_simple(self) -> SourceResult:
        """The usual layout: one listdir, one stat per folder; when ROOT lists the same folders,
        no (inode, size, mtime_ns) changed and no file awaits its second read, the last result
        is returned as it is; else only the files whose key changed are read again."""
        paths = self._listing()
        if paths is None:
            self._keys = None
            return self._missing_root()
        relisted = self._names_new
        self._names_new = False
        cache = self.cache
        if self._items is None:  # the first poll: one open (its fstat is the stat) and one read per file
            self._keys = None
            res = self._first_poll(paths)
            if len(self.cache) == len(paths):
                self._keys = [self.cache[p].key for p in paths]
            return res
        try:  # in C, keeping only the keys (no stat_result lives on: that is most of the cost)
            keys: list[tuple[int, int, int] | None] = list(map(_KEY, map(os.stat, paths)))
        except OSError:  # something missing or unreadable: the careful way, path by path
            self._keys = None
            stats = self._stat_all(paths)
            if len(stats) < len(paths) and not os.path.isdir(self._simple[0]):  # type: ignore[index]
                return self._missing_root()  # ROOT went away after its listing: not an empty fleet
            return self._rebuild(stats)
        members = relisted or len(cache) != len(paths)
        old = self._keys
        if members or old is None:  # folders came or went, or after a partial tick: the cache's keys
            old = [e.key if (e := cache.get(p)) is not None else None for p in paths]
        self._keys = keys
        if not members and keys == old and not self._suspects:
            return self._emit(changed=False)
        touched = set(compress(range(len(keys)), map(ne, keys, old)))
        if self._suspects:
            touched.update(i for i, p in enumerate(paths) if p in self._suspects)
        obs_of, suspects = self._obs_of, self._suspects
        dirty = False
        ids: list[tuple[Any, Any]] = []
        for i in sorted(touched):
            path = paths[i]
            st = _stat(path)
            ent = None if st is None else self._update(path, st, cache.get(path))
            if ent is None:  # gone meanwhile, or a folder where the file should be
                cache.pop(path, None)
                members = True
                continue
            cache[path] = ent
            keys[i] = ent.key
            was = obs_of.get(path)
            if ent.obs is not was:  # the result changes in place (same order)
                obs_of[path] = ent.obs
                dirty = True
                ids.append((was, ent.obs))
            if ent.fails == 1:
                suspects.add(path)
            else:
                suspects.discard(path)
        if members:  # forget what ROOT no longer lists; the result is made again
            if len(cache) != len(paths):
                listed = set(paths)
                for p in [p for p in cache if p not in listed]:
                    del cache[p]
            if len(cache) != len(paths):
                self._keys = None  # compare against the cache next time
            return self._emit(changed=True)
        if dirty:
            base, self._items = self._items, [o for o in obs_of.values() if o is not None]
            self.delta = (base, self._items, tuple(ids))
        return self.result(self._items)

    def _sweep(self, part: float, most: int | None = None) -> list[str] | None:
        """The rolling resync while inotify is healthy: the next ``part`` of the listed files, at
        most ``most`` (from where the last sweep stopped), so a change inotify never reported (an
        in-place write held open, a network file system) is found within ``1 / part`` sweeps (or
        ``files / most``) and no tick stats them all (50,000: 0.3–0.9 s taking no write). When a
        sweep comes round, ROOT is listed again and every folder that came or went is looked at.
        None: ROOT is missing or another folder now (the caller polls in full, which says so)."""
        if self._simple is None or self._items is None:
            return []
        try:  # ROOT gone or replaced (another folder by that name): look everywhere, as a full poll
            rst = os.stat(self._simple[0])
        except OSError:
            return None
        if self._root_key is not None and (rst.st_dev, rst.st_ino) != self._root_key[:2]:
            return None
        paths = self._paths
        start = self._cursor
        extra: list[str] = []
        if start >= len(paths):  # round: list ROOT again
            self._root_key = None
            listed = self._listing()
            if listed is None:
                return None
            paths, start = listed, 0
            have = self.cache.keys()
            extra = sorted(set(paths).symmetric_difference(have))
        k = max(1, math.ceil(len(paths) * min(part, 1.0)))
        if most is not None:  # watch.resync_rate: a big fleet's round takes longer instead
            k = min(k, max(1, most))
        self._cursor = start + k
        return paths[start:start + k] + extra

    def _partial(self, changed: set[str], swept: list[str] | tuple = ()) -> SourceResult | None:
        """Re-stat only the files these paths can concern (a file itself, or a folder created,
        deleted or moved: its NAME inside), and the ``swept`` files (paths of this layout); None
        when that cannot be told (look everywhere)."""
        if self._simple is None:
            return None
        root, name = self._simple
        rootn = os.path.abspath(root)
        cands: set[str] = set(self._suspects)
        cands.update(swept)
        for p in changed:
            p = os.path.abspath(p)
            head, tail = os.path.split(p)
            if head == rootn:
                if tail.startswith("."):
                    continue
                cands.add(os.path.join(root, tail, name))
            elif tail == name and os.path.dirname(head) == rootn:
                if os.path.basename(head).startswith("."):
                    continue
                cands.add(os.path.join(root, os.path.basename(head), name))
            elif p == rootn or rootn.startswith(p + os.sep) or p == os.sep:
                return None  # the root itself (or above) moved: look everywhere
        if not cands:
            return self._emit(changed=False)
        cache, obs_of, suspects = self.cache, self._obs_of, self._suspects
        members = False
        ids: list[tuple[Any, Any]] = []
        stats = [(path, _stat(path)) for path in sorted(cands)]
        if any(st is None and path in cache for path, st in stats) and not os.path.isdir(root):
            return None  # files gone because ROOT is: a full poll says root-missing, the cache stays
        for path, st in stats:  # the result is changed in place: O(paths), not O(files)
            old = cache.get(path)
            ent = None if st is None else self._update(path, st, old)
            was = obs_of.get(path)
            if ent is None:
                suspects.discard(path)
                if old is not None:
                    del cache[path]
                    obs_of.pop(path, None)
                    members = True
                    if was is not None:
                        ids.append((was, None))
                continue
            if old is None:
                cache[path] = ent
                members = True
            if ent.fails == 1:
                suspects.add(path)
            else:
                suspects.discard(path)
            if ent.obs is not was or path not in obs_of:
                obs_of[path] = ent.obs
                ids.append((was, ent.obs))
        if members:
            self._names_new = True  # the next full poll rebuilds the cache from a new listing
            self._root_key = None
        self._keys = None  # the next full poll compares against the cache's keys
        if not ids:
            return self.result(self._items)  # type: ignore[arg-type]
        base, self._items = self._items, [o for o in obs_of.values() if o is not None]
        self.delta = (base, self._items, tuple(ids))
        return self.result(self._items)

    def _emit(self, changed: bool, looked: bool = False) -> SourceResult:
        """The result from the cache (the previous one if unchanged); ``looked``: some were read."""
        if changed or self._items is None:
            cache = self.cache
            self._obs_of = {p: e.obs for p, e in cache.items()}
            self._items = [o for o in self._obs_of.values() if o is not None]
            self.delta = None  # made anew: which ids changed is not known
        if changed or looked or self._items is None:
            self._suspects = {p for p, e in self.cache.items() if e.fails == 1}
        return self.result(self._items)

    def result(self, items: list[Any]) -> SourceResult:
        raise NotImplementedError

    def close(self) -> None:
        pass


class GoalsSource(GlobSource):
    OBS = AgentObs
    _update = pins.pinned(GlobSource._update)   # a folder's agent id, fixed at first sight (sources/pins.py)
    def parse(self, raw: bytes, path: str, folder_id: str, mtime: float):
        return parse_goal(raw, source=self.name, path=path, folder_id=folder_id, mtime=mtime)

    def error_obs(self, folder_id: str, path: str, reason: str):
        return AgentObs(agent=folder_id, source=self.name, path=path, error=reason)

    def result(self, items):
        return SourceResult(name=self.name, kind="goals", agents=items)


class StepsSource(GlobSource):
    OBS = RunObs

    def parse(self, raw: bytes, path: str, folder_id: str, mtime: float):
        return parse_steps(raw, source=self.name, path=path, folder_id=folder_id)

    def error_obs(self, folder_id: str, path: str, reason: str):
        return RunObs(run=folder_id, source=self.name, path=path, error=reason)

    def result(self, items):
        held = sum(1 for p in self._suspects if self._obs_of.get(p) is None)  # not shown until read again
        return SourceResult(name=self.name, kind="steps", runs=items, held=held)


FACTORY: dict[str, Callable[[Source], Any]] = {"goals": GoalsSource, "steps": StepsSource}
