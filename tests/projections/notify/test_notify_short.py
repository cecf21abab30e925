"""notify_policy.short's fast path (a line returned as it is) gives what the slow path would:
whitespace runs joined, URLs redacted, cut to n (issue 19: the notify fold calls it per condition)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.notify.policy import TEXT_MAX, redact, short


def slow(text, n: int = TEXT_MAX) -> str:
    t = redact(" ".join(str(text or "").split()))
    return t if len(t) <= n else t[: n - 1] + "…"


WORDS = st.sampled_from(["busy", "verdict", "met", "by", "v1", " ", "  ", "\t", "\n", "\xa0", "\u2003", "\x1c",
                         "\x85", "https://x.example/t?k=1", "://", "é", "…", ""])


@settings(max_examples=400, deadline=None)
@given(st.lists(WORDS, max_size=30).map("".join) | st.text(max_size=100))
def test_short_fast_path_equals_the_join_redact_cut(text):
    assert short(text) == slow(text)
    assert short(text, 10) == slow(text, 10)


def test_short_keeps_a_line_of_single_spaces_as_it_is():
    line = "verdict met by v1"
    assert short(line) is line
    assert short(" x") == "x" and short("x ") == "x" and short("a  b") == "a b" and short(None) == ""


def test_a_condition_text_of_another_type_is_lined_not_a_crash():
    """A condition's text is lined by ``short``, whatever its type (an unhashable one raised in the
    eighteenth session's module-level memo of ``short``, since removed: issue 23, no module caches)."""
    from projections.notify import fold as notify
    st = notify.initial()
    cid = notify._new(st, "agent:a", "RECLAMA", "urgent", 1, 0.0, "a", ["waiting", "x"])  # type: ignore[arg-type]
    assert st["conds"][cid]["text"] == "['waiting', 'x']"
