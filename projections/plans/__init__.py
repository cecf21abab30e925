"""The plans room: the closed loop's launched agents, plans and verdicts waiting to be acted on (pure).

Contract
- ``fold.fold`` folds ``agent.launched``, ``plan.*``, ``dod.verdict``, ``dod.acted`` and the fleet's
  classes into launched agents, plans with their tasks' states and the verdicts not yet acted on;
  ``fold.figures`` the loop's figures for ``status`` and ``report``.
- The edges are watcher/runtime/launcher.py (launch), verifier.py, actions.py (close, nudge,
  escalate) and follow.py (a plan's next tasks).
- Reads only the shared modules.
"""

USES: tuple[str, ...] = ()
