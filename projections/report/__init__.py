"""The report room: DoD throughput and the person's load, folded from the log (pure).

Contract
- ``fold.fold`` counts per UTC day and in total; ``view.figures(state, now)`` gives the report's
  stable JSON fields, percentiles, per-day series and the one-line "today".
- Reads only the shared modules.
"""

USES: tuple[str, ...] = ()
