"""One Snapshot per tick, merged again only where a source's result changed, with the change hint.

``merge`` (watcher/sources) builds a Snapshot from every source's result: at 50,000 agents that is
50,000 dict insertions per tick, even when one goal.json changed. ``Merger`` keeps the last merge
and, when the results differ from it only in one file source's agents and that source says which
observations changed (``GlobSource.delta``), patches a copy of the last agents dict for those ids
alone. Every Snapshot it hands out gets the next ``gen`` and ``dirty``: the agent ids whose
observation may differ from the previous Snapshot's (None: any may). The detectors use ``dirty``
(with the ids whose folded state changed, added by the Watcher) to look only there.

Invariants (the same Snapshot content as a full ``merge`` of the same results):
- patched only when every other result is the very object of the last merge, none failed anew,
  no tmux source enriches (its enrichment reads the panes), and each changed id ends up with at
  most one observation, the new one (``owners`` counts the observations per id; two claims of
  one id, or a command source's enrichment, go through the full merge and its rules);
- ``runs`` and ``rows`` are merged again whenever any result's runs or rows changed (they are
  small); the agents dict is never mutated once handed out (a patch works on a copy: a copy of a
  dict is a C memcpy, far cheaper than the merge).
"""
from __future__ import annotations

from typing import Any

import msgspec

from watcher.sources import merge


def _shape(r: Any) -> tuple:
    return (r.name, r.ok, r.error, r.error_class, r.exit_code)


class Merger:
    def __init__(self) -> None:
        self.gen = 0
        self._last: tuple[list[Any], Any, dict[str, int]] | None = None  # results, snapshot, owners

    def forget(self) -> None:
        """The next merge is a full one, with no hint (sources were rebuilt)."""
        self._last = None

    def merge(self, sources: list[Any], results: list[Any]) -> Any:
        self.gen += 1
        last = self._last
        snap = None
        if last is not None and not any(s.kind == "tmux" for s in sources):
            snap = self._patch(sources, results, last)
        if snap is None:
            snap = msgspec.structs.replace(merge(sources, results), gen=self.gen, dirty=None)
            owners: dict[str, int] = {}
            for r in results:
                if r.ok:
                    for a in r.agents:
                        owners[a.agent] = owners.get(a.agent, 0) + 1
            self._last = (results, snap, owners)
        else:
            assert last is not None   # a patch needs the last merge
            self._last = (results, snap, last[2])
        return snap

    def _patch(self, sources: list[Any], results: list[Any], last: tuple[list[Any], Any, dict[str, int]]) -> Any:
        """The Snapshot from the last one and the changed observations, or None (merge in full)."""
        prev_results, prev, owners = last
        if len(prev_results) != len(results) or any(_shape(a) != _shape(b) for a, b in zip(results, prev_results)):
            return None
        changed = [i for i, (a, b) in enumerate(zip(results, prev_results)) if a.agents is not b.agents]
        agents = prev.agents
        dirty: frozenset[str] = frozenset()
        if changed:
            if len(changed) > 1 or not results[changed[0]].ok:
                return None
            r = results[changed[0]]
            src = next((s for s in sources if s.name == r.name), None)
            delta = src.delta if src is not None else None  # (base list, new list, changed pairs)
            if delta is None or delta[1] is not r.agents or delta[0] is not prev_results[changed[0]].agents:
                return None  # not the change from what was merged last (a result in between was dropped)
            patch = _patched(agents, delta[2], owners)
            if patch is None:
                return None
            agents, dirty = patch
        same_other = all(a.runs is b.runs and a.rows is b.rows for a, b in zip(results, prev_results))
        if same_other:
            runs, rows = prev.runs, prev.rows
        else:
            full = merge([], [msgspec.structs.replace(r, agents=[]) for r in results])
            runs, rows = full.runs, full.rows
        return msgspec.structs.replace(prev, results=results, agents=agents, runs=runs, rows=rows,
                                       gen=self.gen, dirty=dirty)


def _patched(agents: dict[str, Any], pairs: tuple[tuple[Any, Any], ...],
             owners: dict[str, int]) -> tuple[dict[str, Any], frozenset[str]] | None:
    """A copy of ``agents`` with the source's changed observations (``pairs``: (old, new), None
    for a file that came or went) put in, and the ids concerned; None when an id would not end
    with exactly its one new observation or none (two claims of one id, an enrichment by
    another source: the full merge decides). ``owners`` is updated only when the patch applies.
    O(changed) but for the copy."""
    gone: dict[str, int] = {}
    got: dict[str, list[Any]] = {}
    for was, now in pairs:
        if was is not None:
            gone[was.agent] = gone.get(was.agent, 0) + 1
        if now is not None:
            got.setdefault(now.agent, []).append(now)
    ids = gone.keys() | got.keys()
    plan: list[tuple[str, Any]] = []
    for aid in ids:
        new = got.get(aid, ())
        after = owners.get(aid, 0) - gone.get(aid, 0) + len(new)
        if after == 0:
            plan.append((aid, None))
        elif after == 1 and len(new) == 1:
            plan.append((aid, new[0]))
        else:
            return None
    out = dict(agents)
    for aid, obs in plan:
        if obs is None:
            out.pop(aid, None)
            owners.pop(aid, None)
        else:
            out[aid] = obs
            owners[aid] = 1
    return out, frozenset(ids)
