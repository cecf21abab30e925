"""Event types of the closed loop (issue 44): an agent launched with its contract, a plan recorded
and stopped, a verdict acted on. Part of the one union in ``events.types`` (same tag field and
rules: stable tags, every later field with a default); kept apart so events/types.py stays small.
They carry ids, digests, folders, tmux targets and short task titles, never a prompt, a contract's
text or an agent's note."""
# No `from __future__ import annotations`: msgspec would compile each string annotation at start
# (tests/watcher/cli/test_cli_start.py: a fast path compiles no source text)
from typing import Any

from msgspec import Struct


class _L(Struct, frozen=True, tag_field="type", forbid_unknown_fields=False, omit_defaults=False):
    pass


class AgentLaunched(_L, frozen=True, tag="agent.launched"):
    """``fleetwatch launch`` (or the watcher following a plan) started ``agent``: the pin of record.
    The checker and the verifier judge the agent against this contract digest and folder, whatever
    its goal.json says later. ``plan``/``task_id``: the plan task it runs (None: a lone launch)."""

    agent: str
    task: str = ""                   # the title (first line of the task, at most 200 characters)
    contract_sha256: str = ""
    cwd: str = ""
    target: str = ""                 # tmux target of its window (window id, or session:name)
    plan: str | None = None
    task_id: str | None = None
    socket: str = ""                 # tmux -L socket of the window
    by: str = "cli"                  # cli | watcher (a plan followed)
    pin: str = ""                    # sha256 of the launched task, contract and cwd kept beside the log

    @property
    def subject(self) -> str:
        return f"launch:{self.agent}"


class PlanRecorded(_L, frozen=True, tag="plan.recorded"):
    """A plan validated whole: its tasks (id, title, deps, contract digest) and ``max_parallel``.
    ``sha256``: of the plan's canonical JSON, stored beside the log (``plans/<sha256>.json``)."""

    plan: str
    max_parallel: int = 1
    tasks: list[dict[str, Any]] = []  # [{"id", "title", "deps", "contract_sha256"}]
    sha256: str = ""

    @property
    def subject(self) -> str:
        return f"plan:{self.plan}"


class PlanStopped(_L, frozen=True, tag="plan.stopped"):
    """No more tasks of ``plan`` are launched: ``task`` (agent ``agent``) was judged ``verdict``
    (failed | unevaluable), or a task could not be launched (``verdict`` "launch-failed")."""

    plan: str
    task: str = ""
    agent: str = ""
    verdict: str = ""
    reason: str = ""

    @property
    def subject(self) -> str:
        return f"plan:{self.plan}"


class DodActed(_L, frozen=True, tag="dod.acted"):
    """A verdict acted on: ``action`` close | nudge | escalate for the verdict at ``verdict_seq``.
    Recorded before the action runs (a nudge is sent at most once per verdict, also across a
    kill -9); ``by``: the watcher (policy) or a human's ``verdict`` command."""

    agent: str
    action: str
    verdict_seq: int = 0
    verdict: str = ""
    verifier: str = ""
    detail: str = ""                 # what the nudge named (failed check ids), never the agent's words
    by: str = "watcher"

    @property
    def subject(self) -> str:
        return f"dod:{self.agent}"
