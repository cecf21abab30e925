"""Projection state from the log: stored snapshots plus the tail (never a full replay at start-up),
and ``rebuild`` (a full replay from seq 1, optionally checked against the snapshots).

Speed at this edge, not in the folds (bench_rebuild's rebuild row): a fold is called only for the
event types its module declares (``TYPES``); many events are folded one projection at a time
(:meth:`Projections.fold_many`); a module that reads ``rec.time`` through ``TIME`` gets this
Projections' own :class:`TimeCache` of it (the module keeps none: issue 23)."""
from __future__ import annotations

import gc
from collections.abc import Callable, Collection, Iterable, Iterator
from functools import partial
from itertools import compress
from typing import Any

import msgspec

from events.log import EventLog
from events.replay import replay, replay_batches
from projections.base import Projection, decode_state, encode_state, registry


FOLD_BATCH = 2000   # events folded per projection at a time by catch_up and rebuild (one read chunk)


class TimeCache(dict):
    """``parse(s)`` by ``s``: the events of one append share their ``time``, so a replay parses
    each time once instead of once per event and projection. Its ``__getitem__`` is what a fold
    gets as ``times`` (a dict hit, no Python call). Owned by the caller (one per projection in
    each :class:`Projections`); bounded: cleared beyond MAX times."""

    MAX = 4096

    def __init__(self, parse: Callable[[str], float]):
        super().__init__()
        self.parse = parse

    def __missing__(self, s: str) -> float:
        if len(self) >= self.MAX:
            self.clear()
        t = self[s] = self.parse(s)
        return t


def _times(m: Projection) -> Callable[[str], float] | None:
    """A new :class:`TimeCache` of ``m.TIME`` as the ``times`` its fold takes (None: no TIME)."""
    t = m.TIME
    return None if t is None else TimeCache(t).__getitem__


class Projections:
    """All projection states plus the seq they cover. Fold is the only way in."""

    def __init__(self, mods: dict[str, Projection] | None = None):
        self.mods = mods or registry()
        self.states: dict[str, Any] = {n: m.initial() for n, m in self.mods.items()}
        self.seq = 0
        self.viewed: frozenset[str] = frozenset()  # projections decoded into a reader's view (see load)
        # (name, fold, the types it reads or None for all, its times or None) in registry order
        self._folds = [(n, m.fold, m.TYPES, _times(m)) for n, m in self.mods.items()]
        self._by_type: dict[str, list[tuple[str, Any]]] = {}
        # a replay reads the records' ids only when a fold reads them (events/replay.py)
        self.reads_id = any(m.READS_ID for m in self.mods.values())

    def __getitem__(self, name: str) -> Any:
        return self.states[name]

    def _folders(self, type_: str) -> list[tuple[str, Any]]:
        """The folds that read ``type_``, in registry order (cached per type)."""
        fs = self._by_type.get(type_)
        if fs is None:
            fs = self._by_type[type_] = [(n, f if times is None else partial(f, times=times))
                                         for n, f, types, times in self._folds if types is None or type_ in types]
        return fs

    def fold(self, rec) -> None:
        st = self.states
        for n, f in self._folders(rec.type):
            st[n] = f(st[n], rec)
        self.seq = rec.seq

    def fold_many(self, recs: list, after: dict[str, int] | None = None) -> None:
        """:meth:`fold` of each of ``recs`` in order, one projection at a time: a fold reads and
        writes only its own state, so every state ends as event by event; one fold's code and
        data stay hot through the batch (1.2-1.6x the rate of event by event, 2026-12-01, a loaded machine).
        ``after`` {name: seq}: that projection already covers the records up to seq (its own
        snapshot's, ``load``) and folds only the later ones."""
        if not recs:
            return
        st = self.states
        tys = [rec.type for rec in recs]
        for n, f, types, times in self._folds:
            s = st[n]
            mine = recs if types is None else list(compress(recs, map(types.__contains__, tys)))
            if after and mine and after.get(n, 0) >= mine[0].seq:
                mine = [rec for rec in mine if rec.seq > after[n]]
            if times is None:
                for rec in mine:
                    s = f(s, rec)
            else:
                for rec in mine:
                    s = f(s, rec, times)
            st[n] = s
        self.seq = recs[-1].seq

    def encoded(self) -> dict[str, bytes]:
        return {n: encode_state(s) for n, s in self.states.items()}

    def catch_up(self, log: EventLog, after: dict[str, int] | None = None) -> int:
        """Fold every event after ``self.seq``; returns how many. ``after`` {name: seq}: that
        projection covers more already (see :meth:`fold_many`)."""
        if self.viewed:
            raise RuntimeError(f"cannot fold into a reader's view of {sorted(self.viewed)}")
        n = 0
        with gc_paused():
            for batch in replay_batches(log, self.seq, ids=self.reads_id, size=FOLD_BATCH):
                self.fold_many(batch, after)
                n += len(batch)
        return n

    @classmethod
    def load(cls, log: EventLog, names: Collection[str] | None = None,
             views: dict[str, Callable[[bytes], Any]] | None = None) -> Projections:
        """From the stored snapshots (every projection's must be there and decode; each covers
        its own seq: the watcher writes them one at a time) plus the tail after each.

        For one-shot readers (`status`, `summary`): ``names`` loads only those projections (the
        others' snapshots are neither read nor decoded); ``views`` {name: decode} decodes that
        snapshot the reader's way (only the keys it reads) when every snapshot is at the log's
        head. Such a state is an answer as of that head, never folded into: ``catch_up``
        refuses it (``viewed``)."""
        mods = registry(names)  # only the named folds are imported (projections.base.registry)
        p = cls(mods)
        snaps = log.snapshots(None if names is None else mods)
        after: dict[str, int] = {}
        if all(n in snaps for n in mods):
            seqs = {n: snaps[n][0] for n in mods}
            low = min(seqs.values(), default=0)
            at_head = views and len(set(seqs.values())) == 1 and log.head()[0] == low
            narrow = {n: t for n, t in (views or {}).items() if n in mods} if at_head else {}
            try:
                p.states = {n: narrow[n](snaps[n][1]) if n in narrow else decode_state(m, snaps[n][1])
                            for n, m in mods.items()}
                p.seq, p.viewed = low, frozenset(narrow)
                after = {n: s for n, s in seqs.items() if s > low}
            except (msgspec.DecodeError, msgspec.ValidationError, TypeError, ValueError):
                p, after = cls(mods), {}  # an unreadable snapshot is only a cache: replay instead
            if p.viewed:
                return p
        p.catch_up(log, after)
        p.seq = max(p.seq, *after.values()) if after else p.seq
        return p


class Difference(msgspec.Struct):
    projection: str
    seq: int
    detail: str


def rebuild(log: EventLog, check: bool = False, store: bool = True) -> tuple[Projections, Difference | None]:
    """Replay all projections from seq 1, in this process. With ``check``, compare against the
    stored snapshots at the seq they cover and report the first difference. With ``store`` (and
    no difference), write the rebuilt snapshots. (`fleetwatch rebuild` runs
    ``watcher.runtime.rebuild_par.rebuild``: half the folds in a second process when that pays.)"""
    p = Projections()
    snaps = log.snapshots()
    at: dict[int, list[str]] = {}
    for n, (s, d) in snaps.items():
        at.setdefault(s, []).append(n)
    diff: Difference | None = None

    def compare() -> Difference | None:
        for n in sorted(at.get(p.seq, [])):
            if n in p.states and encode_state(p.states[n]) != snaps[n][1]:
                return Difference(n, p.seq, _first_diff(encode_state(p.states[n]), snaps[n][1]))
        return None

    if check:
        diff = compare()
    # the read's own lists are the fold's batches; a check also cuts them at each snapshot's seq
    reads = batches(replay(log, 0, ids=p.reads_id), set(at)) if check else \
        replay_batches(log, 0, ids=p.reads_id, size=FOLD_BATCH)
    with gc_paused():
        for batch in reads:
            p.fold_many(batch)
            if check and diff is None and p.seq in at:
                diff = compare()
    if check and diff is None:
        for n, (s, _) in snaps.items():
            if n in p.mods and s > p.seq:
                diff = Difference(n, s, f"snapshot covers seq {s} beyond the log head {p.seq}")
    if store and diff is None:
        log.put_snapshots(p.seq, p.encoded())
    return p, diff


class gc_paused:
    """The cyclic GC off while a replay folds (restored after, as it was; also ``fleetwatch
    report``'s fold). A replay keeps a batch of records alive while states grow, so each young
    collection rescans thousands of objects that are never garbage: records and states are trees
    (dicts, lists, Structs), never cycles, and reference counting frees them all the same (a
    rebuild of bench_rebuild's 100k log: 21.2 -> 16.7 µs/event of CPU with the GC off,
    2026-12-01, a loaded machine)."""

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self.was:
            gc.enable()


def batches(recs: Iterable[Any], stops: Collection[int] = ()) -> Iterator[list]:
    """``recs`` in lists of up to FOLD_BATCH; a list also ends at each seq in ``stops`` (rebuild's
    check; a plain replay takes ``replay_batches``' own lists)."""
    batch = []
    for rec in recs:
        batch.append(rec)
        if len(batch) >= FOLD_BATCH or rec.seq in stops:
            yield batch
            batch = []
    if batch:
        yield batch


def _first_diff(a: bytes, b: bytes) -> str:
    da, db = msgspec.json.decode(a), msgspec.json.decode(b)

    def walk(x: Any, y: Any, path: str) -> str | None:
        if type(x) is not type(y):
            return f"{path or '.'}: replay {x!r:.80} vs snapshot {y!r:.80}"
        if isinstance(x, dict):
            for k in sorted(set(x) | set(y), key=str):
                if k not in x or k not in y:
                    return f"{path}.{k}: only in {'snapshot' if k in y else 'replay'}"
                r = walk(x[k], y[k], f"{path}.{k}")
                if r:
                    return r
            return None
        if isinstance(x, list):
            if len(x) != len(y):
                return f"{path}: {len(x)} items in replay vs {len(y)} in snapshot"
            for i, (u, v) in enumerate(zip(x, y)):
                r = walk(u, v, f"{path}[{i}]")
                if r:
                    return r
            return None
        return None if x == y else f"{path or '.'}: replay {x!r:.80} vs snapshot {y!r:.80}"

    return walk(da, db, "") or "encodings differ"
