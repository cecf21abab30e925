"""The notify room: what needs a person, what was pushed, what is silenced, and the pipeline (pure).

Contract
- ``fold.fold`` folds every event into conditions (``"<subject>|<CLASS>#<seq>"``), agents,
  verdicts, silences, acks and sends; its one-shot conditions (``ONESHOT``) include the hub's,
  ``rules`` holds its handlers and one-shot conditions for rule events.
- ``plan.plan(state, now, policy)`` runs the stages of ``plan.STAGES`` (route, inhibit, silence,
  flap hold, ack, dedupe/repeat, quiet hours), each of one shape returning a named reason, and
  returns the messages to send; ``escalate``, ``flap``, ``quiet`` and ``msg`` are those stages and
  the message text; ``policy`` the knobs.
- Nothing here sends: watcher/runtime/notifier.py does, and records what it did.
- Reads the fleet room (waiting words), the swarms room (how a cap's breach is said) and the
  shared modules.
"""

USES: tuple[str, ...] = ('fleet', 'swarms')
