"""append builds its rows in one pass per batch (events/chain.py ``chain_rows``): the headers and the
events are each encoded by one ``encode_lines`` call split at its newlines. These tests pin that the
rows are byte for byte what ``encode_data`` and ``row_hash`` make one row at a time, whatever the
strings hold, and that the (type, block) pairs of a batch that crosses a block are all listed."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from events.chain import chain_rows
from events.log import GENESIS, EventLog, Pending, row_hash
from events.schema import BLOCK_SHIFT
from events.types import AgentClassified, DodVerdict, NoticeSent, StepChanged, encode_data, tag_of

NOW = 1_764_443_000.0  # virtual clock
NASTY = ["", "plain", "line\nbreak", "cr\rlf\r\n", 'quote " and \\ backslash', "tab\tnul\x00bell\x07",
         "\u2028\u2029 separators", "vt\x0bff\x0cfs\x1cgs\x1drs\x1enel\x85", "ünïcödé ✓ 日本", "\U0001f600 astral", "\x7f del", '{"type":"x"}\n[1]']


def _mixed(texts: list[str]) -> list:
    out: list = []
    for i, t in enumerate(texts):
        k = i % 4
        if k == 0:
            out.append(AgentClassified(agent=f"a{t}", to="RECLAMA", reason=t, source="fleet"))
        elif k == 1:
            out.append(StepChanged(run=f"T{i % 3}", step=t or "s", to="done", data={"k": t, t: [t, 1]}))
        elif k == 2:
            out.append(DodVerdict(agent=t or "a", verdict="met", verifier="v", evidence=t))
        else:
            out.append(NoticeSent(notice=f"n{i}", covers=[i], attempt=1, title=t))
    return out


def _one_at_a_time(prev: bytes, heads: list[tuple], events: list) -> list[tuple]:
    rows = []
    for h, ev in zip(heads, events):
        data = encode_data(ev)
        prev = row_hash(prev, *h, data)
        rows.append((*h, data, prev))
    return rows


def _heads(events: list, subject_suffix: str = "") -> list[tuple]:
    return [(i + 1, f"{'ab' * 8}{i + 1:016x}", "2025-11-29T19:03:20.000Z", tag_of(ev), ev.subject + subject_suffix, 1)
            for i, ev in enumerate(events)]


@pytest.mark.parametrize("n", [0, 1, 2, len(NASTY), 300])
def test_chain_rows_are_the_bytes_of_encode_data_and_row_hash(n):
    events = _mixed((NASTY * (n // len(NASTY) + 1))[:n])
    heads = _heads(events, "\n\"\\✓")  # a subject with a newline, a quote, a backslash, non-ASCII
    assert chain_rows(GENESIS, heads, events) == _one_at_a_time(GENESIS, heads, events)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.text(max_size=12), min_size=2, max_size=12), st.binary(min_size=32, max_size=32))
def test_chain_rows_any_text(texts, prev):
    events = _mixed(texts)
    heads = _heads(events, texts[0])
    assert chain_rows(prev, heads, events) == _one_at_a_time(prev, heads, events)


def test_append_of_strings_with_newlines_reads_back_and_verifies(db_path):
    events = _mixed(NASTY * 3)
    with EventLog(db_path) as log:
        seqs = log.append(events, NOW)
        seqs += log.append([Pending(e, id=f"given-{i}\n") for i, e in enumerate(_mixed(NASTY))], NOW)
        assert seqs == list(range(1, len(events) + len(NASTY) + 1))
        got = list(log.read(verify=True))
        assert [r.event for r in got[:len(events)]] == events
        assert [r.data for r in got[:len(events)]] == [encode_data(e) for e in events]
        assert log.verify().ok
        # the given ids are idempotency keys: the same batch again appends nothing
        assert log.append([Pending(e, id=f"given-{i}\n") for i, e in enumerate(_mixed(NASTY))], NOW) == seqs[len(events):]


def test_a_batch_across_a_type_block_lists_each_type_in_both_blocks(db_path):
    edge = 1 << BLOCK_SHIFT
    with EventLog(db_path, durability="normal") as log:
        log.append([AgentClassified(agent=f"a{i % 7}", to="X") for i in range(edge - 5)], NOW)
        mixed = _mixed([f"t{i}" for i in range(20)])  # seqs edge-4 .. edge+15: two blocks, four types each side
        log.append(mixed, NOW)
        pairs = set(log.db.execute("SELECT type, block FROM event_types").fetchall())
        for seq, ev in zip(range(edge - 4, edge + 16), mixed):
            assert (tag_of(ev), seq >> BLOCK_SHIFT) in pairs
        assert log.verify().ok
        assert [r.seq for r in log.last(3, types=["dod.verdict"])] == [edge + 6, edge + 10, edge + 14]


def test_read_verified_is_lazy_and_raises_at_the_first_bad_row(db_path):
    from events.errors import ChainBroken

    with EventLog(db_path) as log:
        log.append(_mixed(["a", "b", "c", "d"]), NOW)
        it = log.read(since=99, verify=True)  # nothing is read before the first next()
        with pytest.raises(ChainBroken):
            next(it)
