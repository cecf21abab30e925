"""The DoD room: who is done for real (pure).

Contract
- ``fold.fold`` keeps, per agent, the contract digest fixed at first sight, the latest verdict,
  the current claim and the flags; ``fold.judge`` / ``fold.detect`` turn a tick's observations
  into ``dod.contract_changed`` / ``dod.flagged`` edges; ``fold.status`` / ``items`` / ``summary``
  are its read models.
- ``checks`` parses structured DoD contracts and decides the checker's verdicts (no process is run
  here: watcher/runtime/checker.py runs them).
- A verdict whose verifier is the agent itself is never a verdict (``projections.identity``).
- Reads the fleet room (its prune cadence) and the shared modules.
"""

USES: tuple[str, ...] = ('fleet',)
