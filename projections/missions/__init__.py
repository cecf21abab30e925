"""The missions room: work packages and circuits of a bounded orchestrator, from ``sqlite`` source rows (pure).

Contract
- ``fold.detect`` gives ``wp.*`` / ``circuit.*`` / ``mission.*`` edges from one tick's rows;
  ``fold.fold`` applies them; ``rules.check`` judges the orchestrator's rules on one tick's
  work-package changes.
- Reads only ``projections.rows``.
"""

USES: tuple[str, ...] = ()
