"""The runs room: the outer loop's step progress and its hard rules, audited from outside (pure).

Contract
- ``fold.detect`` / ``fold.judge`` compare one tick's steps.json files (``parse``) with the folded
  state and give ``run.changed`` / ``step.changed`` / ``rule.violated`` / ``step.overdue`` /
  ``run.abandoned``; ``fold.fold`` applies them.
- ``rules``: one function per per-run rule, keyed by the rule (``STEP_RULES``); ``quota``: the
  rules across runs; ``view``: the rows of ``status`` and the board.
- Reads nothing outside its room.
"""

USES: tuple[str, ...] = ()
