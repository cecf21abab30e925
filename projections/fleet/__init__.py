"""The fleet room: every agent's class, from what the sources observe (pure).

Contract
- ``fold.judge(aid, obs, record, now, limits)`` judges one agent's observation against its folded
  record and returns the events to append and when to look again; ``fold.detect`` judges every
  agent (what the differential test compares the runtime's scheduler with). The judge keeps
  nothing between calls: which agents to judge on a tick is watcher/runtime/schedule.py's job.
- ``fold.fold(state, rec)`` folds ``agent.classified``, ``agent.updated`` and the source edges
  into ``{"agents": {id: record}, "sources": {...}}`` (a record: a plain dict).
- ``machine`` is the termination machine: one rule per class, tried in ``projections.classes``'
  table order. ``tmux`` holds what the tmux source told the fleet; ``waiting`` what an agent waits
  for; ``fanout`` the fan-out projection (more new agents than the cap within a window).
- Reads only the shared modules (classes, observations, text).
"""

USES: tuple[str, ...] = ()
