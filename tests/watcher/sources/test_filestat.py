"""watcher.sources.filestat.read_new: one open, its fstat, and (usually) one read per file — real
files, a real FIFO."""
from __future__ import annotations

import os

import pytest

from watcher.config_limits import NotRegular
from watcher.sources.filestat import read_new


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 65536, 200_000])
def test_read_new_reads_the_whole_file_of_any_size_up_to_the_limit(tmp_path, size):
    p = tmp_path / "goal.json"
    data = os.urandom(size)
    p.write_bytes(data)
    st, raw, why = read_new(str(p), 1 << 20)
    assert (raw, why, st.st_size) == (data, None, size)


def test_read_new_at_the_limit_and_one_byte_past(tmp_path):
    p = tmp_path / "goal.json"
    p.write_bytes(b"x" * 1000)
    assert read_new(str(p), 1000)[1:] == (b"x" * 1000, None)
    p.write_bytes(b"x" * 1001)
    st, raw, why = read_new(str(p), 1000)
    assert raw == b"" and why == "too large (1001 bytes > 1000)"


@pytest.mark.parametrize("growth", [1, 100, 70_000])
def test_read_new_a_file_grown_past_its_fstat_is_read_to_the_limit(tmp_path, growth):
    """The first read asks for the fstat size + 1 byte (os.read allocates all it is asked for:
    64 KiB of slack cost ~1.3 µs a file on a first poll): a file that grew at all between the
    fstat and the read is read on, to its end or the limit (and found too large there)."""
    p = tmp_path / "goal.json"
    p.write_bytes(b"a" * 10)
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    try:
        import watcher.sources.filestat as fs
        real = fs.open_regular

        def grow_after_fstat(path):
            got = real(path)
            os.write(fd, b"b" * growth)   # the writer appends after our fstat, before our read
            return got

        fs.open_regular = grow_after_fstat
        try:
            st, raw, why = read_new(str(p), 1 << 20)
            assert st.st_size == 10 and why is None and raw == b"a" * 10 + b"b" * growth
            os.write(fd, b"c" * (150_000 - 10 - growth))   # at the limit at its fstat, past it at the read
            st, raw, why = read_new(str(p), 150_000)
            assert raw == b"" and why == "too large (> 150000 bytes)"
        finally:
            fs.open_regular = real
    finally:
        os.close(fd)


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs procfs")
def test_read_new_reads_a_regular_file_that_reports_no_size_to_its_end():
    """procfs files are regular with st_size 0 and content: the one-byte first read comes back
    full, so the rest is read on."""
    st, raw, why = read_new("/proc/self/status", 1 << 20)
    assert st.st_size == 0 and why is None
    assert raw.startswith(b"Name:") and b"Pid:" in raw


def test_read_new_refuses_a_fifo_without_blocking(tmp_path):
    p = tmp_path / "goal.json"
    os.mkfifo(p)
    with pytest.raises(NotRegular):
        read_new(str(p), 1 << 20)
