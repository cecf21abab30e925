"""The DoD checker's own record (watcher/runtime/checker.py), part of the one union in
``events.types`` (same tag field and rules: a stable tag, every later field with a default)."""
from __future__ import annotations

from msgspec import Struct


class DodCheckStarted(Struct, frozen=True, tag_field="type", tag="dod.check_started", forbid_unknown_fields=False,
                      omit_defaults=False):
    """The checker is about to run a claim's checks (recorded before they run: a claim started
    and never decided stopped the watcher, and is not run again)."""

    agent: str
    claim_seq: int = 0
    isolation: str = ""   # bwrap | unshare | unshare-pid | none

    @property
    def subject(self) -> str:
        return f"dod:{self.agent}"
