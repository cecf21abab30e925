"""The present room: what ``status``, ``summary``, ``tail``, the board and the phone show (pure).

Contract
- ``views`` computes the ``status --json`` document and the grouped summary from the folded
  states; ``tables`` turns them into tables of escaped cells; ``render`` draws one event as one
  short safe line; ``hub`` reads the hub's health document.
- Every agent-controlled string goes through ``projections.text.safe``.
- Reads the folded states of every room, never writes them.
"""

USES: tuple[str, ...] = ('fleet', 'notify')
