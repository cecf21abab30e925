"""Class histories built by hand for the flap tests: ``pattern`` (which transitions change),
``flat``/``hist`` (the fold's stored form and its entries), ``ALT`` (21 classes, 20 changes) and
``state`` (flap_state of such a history under the policy ``P``: flap_high 50, flap_low 25)."""
from __future__ import annotations

from projections.notify.flap import flap_state
from projections.notify.policy import Policy

T = 1_800_000_000.0
P = Policy(flap_high=50.0, flap_low=25.0)


def pattern(changes: list[int], n: int = 21) -> str:
    """``n`` classes where transition j (between entry j-1 and j) changes iff j in ``changes``."""
    out, cur = ["A"], "A"
    for j in range(1, n):
        if j in changes:
            cur = "B" if cur == "A" else "A"
        out.append(cur)
    return "".join(out)


def flat(classes: str, times: list[float] | None = None) -> list:
    """The fold's stored history: class, time, seq per entry (1 s apart unless ``times``)."""
    times = times if times is not None else [T + i for i in range(len(classes))]
    out: list = []
    for i, (c, t) in enumerate(zip(classes, times)):
        out += [c, t, i + 1]
    return out


def hist(classes: str, times: list[float] | None = None) -> list:
    """``flat`` as [class, time, seq] entries."""
    f = flat(classes, times)
    return [f[i:i + 3] for i in range(0, len(f), 3)]


ALT = "AB" * 10 + "A"    # 21 classes, 20 changes


def state(classes: str, now: float | None = None, policy: Policy = P, sent: list | None = None,
          times: list[float] | None = None):
    """flap_state of ``classes`` (1 s apart unless ``times``) at ``now`` (default: 1 s after the last)."""
    f = flat(classes, times)
    return flap_state(f, sent, f[-2] + 1 if now is None else now, policy)
