"""The swarms room: per group progress of children (group, child, status, label) rows (pure).

Contract
- ``fold.detect`` gives ``swarm.*`` edges from one tick's rows; ``fold.fold`` applies them.
- Reads only ``projections.rows``.
"""

USES: tuple[str, ...] = ()
