"""notify_policy.short's fast path (a line returned as it is) gives what the slow path would:
whitespace runs joined, URLs redacted, cut to n (issue 19: the notify fold calls it per condition)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from projections.notify_policy import LINES, LINES_MAX, TEXT_MAX, redact, short, short_kept


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


@settings(max_examples=200, deadline=None)
@given(st.lists(WORDS, max_size=30).map("".join) | st.text(max_size=100) | st.none())
def test_short_kept_is_short_and_its_memo_stays_bounded(text):
    """The notify fold's memo of short (eighteenth session): the same line, asked once or twice."""
    assert short_kept(text) == slow(text)
    assert short_kept(text) == slow(text)
    assert (LINES[text] == slow(text)) if isinstance(text, str) else text not in LINES


def test_the_memo_of_short_is_cleared_when_full_not_grown():
    for i in range(LINES_MAX + 10):
        short_kept(f"stalled for {i}s  \n https://x.example/?t={i}")
    assert 0 < len(LINES) <= LINES_MAX
    assert short_kept("a  b") == "a b"


def test_a_condition_text_of_another_type_is_lined_not_a_crash():
    """The memo's look-up must not raise for an unhashable text (short took any value before it)."""
    from projections import notify
    st = notify.initial()
    cid = notify._new(st, "agent:a", "RECLAMA", "urgent", 1, 0.0, "a", ["waiting", "x"])  # type: ignore[arg-type]
    assert st["conds"][cid]["text"] == "['waiting', 'x']"
    assert short_kept(None) == "" and None not in LINES
