"""aiopim.umem on the host side: status rules, Host and File contexts, addresses, extending."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aiopim import umem
from aiopim.umem import StatusType
from aiopim.umem import _context as umem_context


# -- status ---------------------------------------------------------------------------------------
def test_status_overwrites_type_and_appends_messages() -> None:
    ctx = umem.Host()
    assert ctx.is_ok() and ctx.get_status() is StatusType.OK and ctx.get_message() == ""
    ctx.set_status(StatusType.ValueError, "first")
    ctx.set_status(StatusType.ValueError, "second")
    assert ctx.get_message() == "first\nsecond"
    ctx.set_status(StatusType.IndexError, "third")
    assert ctx.get_status() is StatusType.IndexError
    assert ctx.get_message() == "first\nsecond\nstatus ValueError changed to IndexError\nthird"
    ctx.set_status(StatusType.IOError, None)  # a None message drops the text, keeps the type
    assert ctx.get_status() is StatusType.IOError and ctx.get_message() == ""
    ctx.clear_status()
    assert ctx.is_ok() and ctx.get_message() == ""


def test_status_names() -> None:
    names = [umem.get_status_name(t) for t in StatusType]
    assert names == [
        "OK",
        "MemoryError",
        "RuntimeError",
        "IOError",
        "NotImplementedError",
        "AssertError",
        "ValueError",
        "TypeError",
        "IndexError",
        "NotSupportedError",
    ]
    assert umem.Host.get_status_name(StatusType.IndexError) == "IndexError"


def test_nothing_is_gated_after_a_failure() -> None:
    host = umem.Host()
    a, b = host.alloc(8), host.alloc(8)
    a.copy_to(b, 9)  # out of bounds: an IndexError, nothing copied
    assert host.get_status() is StatusType.IndexError
    a.view()[:] = 7
    a.copy_to(b)  # still runs although the status is not OK
    assert b.view().tolist() == [7] * 8
    assert host.get_status() is StatusType.IndexError  # the status stays until cleared
    a.free()
    b.free()


# -- Host -----------------------------------------------------------------------------------------
def test_host_alloc_calloc_free_and_views() -> None:
    host = umem.Host()
    assert host.device_name == "Host" and host.get_device_name() == "Host"
    assert host.fundamental_align() == 16
    adr = host.calloc(8, 10)
    assert isinstance(adr, umem.Address) and adr.size == 80 and int(adr) % 16 == 0
    assert adr.view(np.float64).tolist() == [0.0] * 10
    adr.view(np.float64)[:] = np.arange(10)
    assert np.asarray(adr).view(np.float64)[3] == 3.0
    assert adr[8] == 0 and adr[0] == 0
    adr[1] = 255
    assert adr.view()[1] == 255
    host.free(adr)
    assert host.is_ok()
    host.free(adr)  # twice: ValueError, and says what happened
    assert host.get_status() is StatusType.ValueError
    assert "not the start of a live allocation" in host.get_message()


def test_host_aligned_alloc_rules() -> None:
    host = umem.Host()
    a = host.aligned_alloc(256, 512)
    assert int(a) % 256 == 0 and a.alignment == 256 and a.size == 512
    origin = host.aligned_origin(a)
    assert origin <= int(a) < origin + 256 and a.origin().adr == origin
    small = host.aligned_alloc(4, 8)  # raised to the fundamental alignment
    assert small.alignment == 16 and int(small) % 16 == 0
    assert host.is_ok()
    bad = host.aligned_alloc(24, 48)
    assert not bad and bad.is_null
    assert host.get_status() is StatusType.ValueError and "not a power of two" in host.get_message()
    host.clear_status()
    rounded = host.aligned_alloc(64, 100)  # umem rounds the block up, C11 would refuse
    assert rounded.size == 128 and int(rounded) % 64 == 0 and host.is_ok()
    host.aligned_free(rounded)
    host.aligned_free(a)
    host.aligned_free(small)
    assert host.is_ok()


def test_free_of_an_aligned_address_points_to_aligned_free() -> None:
    host = umem.Host()
    a = host.aligned_alloc(4096, 4096)
    if host.aligned_origin(a) == int(a):  # the buffer happened to be aligned already
        host.aligned_free(a)
        a = host.aligned_alloc(4096, 4096)
    if host.aligned_origin(a) != int(a):
        host.free(a)
        assert "aligned_free" in host.get_message()
        a.view()[:] = 1  # still allocated
        host.clear_status()
    host.aligned_free(a)
    assert host.is_ok()


def test_host_copies_set_and_safe_forms() -> None:
    host = umem.Host()
    with host.alloc(16) as a, host.calloc(1, 16) as b:
        a.view()[:] = np.arange(16)
        host.copy_to(a, host, b, 16)
        assert b.view().tolist() == list(range(16))
        host.set(b, 9, 4)
        assert b.view()[:5].tolist() == [9, 9, 9, 9, 4]
        host.copy_from(int(b) + 8, host, a, 8)
        assert b.view()[8:].tolist() == list(range(8))
        # the safe forms check the area sizes and blame the smaller side
        host.copy_to_safe(a, 4, host, b, 16, 8)
        assert host.get_status() is StatusType.IndexError
        assert "4-byte source area" in host.get_message()
        host.clear_status()
        other = umem.Host()
        host.copy_to_safe(a, 16, other, b, 4, 8)
        assert host.is_ok() and other.get_status() is StatusType.IndexError
        host.set_safe(b, 2, 0, 3)
        assert host.get_status() is StatusType.IndexError
        assert b.view()[:5].tolist() == [9, 9, 9, 9, 4]  # nothing written
        host.clear_status()


def test_out_of_bounds_and_freed_addresses_set_status_and_keep_data() -> None:
    host = umem.Host()
    a = host.alloc(8)
    b = host.alloc(8)
    a.view()[:] = 1
    b.view()[:] = 2
    host.copy_to(a, host, b, 9)  # the unsafe form still refuses to leave the allocation
    assert host.get_status() is StatusType.IndexError
    assert "move at most 8 bytes" in host.get_message()
    assert b.view().tolist() == [2] * 8
    host.clear_status()
    dangling = int(a)
    a.free()
    host.copy_to(dangling, host, b, 4)
    assert host.get_status() is StatusType.ValueError and "freed already" in host.get_message()
    assert b.view().tolist() == [2] * 8
    host.clear_status()
    a.copy_to(b)  # through the released Address object
    assert "was released" in host.get_message()
    host.clear_status()
    b.free()


def test_negative_counts_set_status_and_move_nothing() -> None:
    host = umem.Host()
    with host.alloc(8) as a, host.calloc(1, 8) as b:
        a.view()[:] = 1
        buf = bytearray(8)
        a.copy_to(buf, -2)
        assert buf == bytearray(8) and host.get_status() is StatusType.ValueError
        host.clear_status()
        assert a.read(-1).value == b""  # type: ignore[attr-defined]
        assert "negative" in host.get_message()
        host.clear_status()
        b.copy_from(a, -3)
        host.copy_to(a, host, b, -1)
        host.set(b, 5, -1)
        assert b.view().tolist() == [0] * 8 and host.get_status() is StatusType.ValueError
        host.clear_status()
        assert not host.alloc(-1) and "size -1 is negative" in host.get_message()


def test_host_out_of_memory_is_a_status() -> None:
    host = umem.Host()
    assert not host.alloc(1 << 62) and host.get_status() is StatusType.MemoryError
    assert "cannot allocate" in host.get_message()


def test_address_arithmetic() -> None:
    host = umem.Host()
    with host.aligned_alloc(64, 64) as a:
        a.view()[:] = np.arange(64)
        b = a + 8
        assert int(b) == int(a) + 8 and b.size == 56 and b.alignment == 8
        assert b.view()[0] == 8 and b % 16 == 8
        assert (a + 0) == a and hash(a + 0) == hash(a)
        c = a + 65
        assert c.size == 0 and int(c) == int(a) + 64 and host.get_status() is StatusType.IndexError
        host.clear_status()
        d = b + (-16)  # never reaches below the block
        assert int(d) == int(b) and d.size == 56 and host.get_status() is StatusType.IndexError
        host.clear_status()
        b.free()  # non-owning: frees nothing
        assert a.view()[0] == 0 and host.is_ok()


def test_with_blocks_free_and_addresses_are_awaitable() -> None:
    host = umem.Host()

    async def main() -> int:
        adr = await host.calloc(4, 4)
        async with adr:
            return int(adr)

    import anyio

    start = anyio.run(main)
    assert host._lookup(start, 0) is None  # freed on leaving the block
    assert repr(umem.Done(3)) == "Done(3)"


def test_connect_host_to_host_is_zero_copy() -> None:
    host, other = umem.Host(), umem.Host()
    assert host.is_accessible_from(other) and other.is_accessible_from(host)
    with host.aligned_alloc(64, 64) as a:
        with a.connect(other, 64, 32) as pair:
            assert pair.zero_copy and int(pair) == int(a) and pair.mate is a
            pair.view()[:] = 5
            pair.sync()  # no-op: the same memory
            assert a.view().tolist() == [5] * 64
        assert a.view()[0] == 5  # disconnecting a zero-copy pair frees nothing
        with (a + 16).connect(other, 16, 64) as pair:  # the alignment does not fit: a copy
            assert not pair.zero_copy and int(pair) % 64 == 0 and int(pair) != int(a) + 16
            assert pair.view().tolist() == [5] * 16
            pair.view()[:] = 6
            pair.sync(8)
            assert a.view()[16:32].tolist() == [6] * 8 + [5] * 8
            a.view()[16:32] = 1
            pair.update()
            assert pair.view().tolist() == [1] * 16
            mirror = int(pair)
        assert other._lookup(mirror, 0) is None  # the mirror was freed
    assert host.is_ok() and other.is_ok()


def test_connect_is_not_zero_copy_when_a_status_is_set() -> None:
    host = umem.Host()
    a = host.alloc(32)
    host.set_status(StatusType.RuntimeError, "earlier failure")
    pair = host.connect(a, 32, host)
    assert not pair.zero_copy and int(pair) != int(a)
    pair.free()
    host.disconnect(a, host, a)  # same address, same memory: nothing to free
    a.free()
    assert host.get_status() is StatusType.RuntimeError  # unchanged by the calls above


def test_c_style_connect_sync_disconnect() -> None:
    host, other = umem.Host(), umem.Host()
    a = host.alloc(16)
    a.view()[:] = 3
    b = other.alloc(16)
    host.sync_to(a, other, b, 16)
    assert b.view().tolist() == [3] * 16
    b.view()[:] = 4
    host.sync_from(a, other, b, 16)
    assert a.view().tolist() == [4] * 16
    host.sync_to_safe(a, 16, other, b, 8, 16)
    assert other.get_status() is StatusType.IndexError
    other.clear_status()
    other.sync_from_safe(b, 16, host, a, 16, 16)
    assert other.is_ok()
    host.disconnect(a, other, b)  # different addresses: frees the mirror b
    assert other._lookup(int(b), 0) is None
    a.free()


def test_c_style_connect_with_integer_addresses(tmp_path: Path) -> None:
    host = umem.Host()
    with umem.File(tmp_path / "f", "w+") as f:
        a = f.alloc(8)
        a.copy_from(b"abcdefgh")
        pair = f.connect(int(a), 8, host, 32)
        assert int(pair) % 32 == 0 and pair.mate is not None and pair.mate.size == 8
        assert pair.view().tobytes() == b"abcdefgh"
        pair.view()[:] = 0x2A
        pair.sync()
        assert a.read().value == b"*" * 8  # type: ignore[attr-defined]
        f.disconnect(a, host, pair, 32)
        assert host._lookup(int(pair), 0) is None and host.is_ok() and f.is_ok()


def test_close_releases_what_the_context_allocated() -> None:
    host, other = umem.Host(), umem.Host()
    a, b = host.alloc(8), host.alloc(8)
    other.free(b)  # one process memory: any Host context may free it
    host.close()
    assert host._lookup(int(a), 0) is None and host.is_ok() and other.is_ok()


def test_sync_without_a_mate_sets_status() -> None:
    host = umem.Host()
    with host.alloc(8) as a:
        a.sync()
        assert host.get_status() is StatusType.ValueError and "connect()" in host.get_message()


def test_type_errors_name_the_parameter() -> None:
    host = umem.Host()
    with pytest.raises(TypeError, match="nbytes"):
        host.alloc("8")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="dest"):
        host.copy_to(0, "host", 0, 8)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="src"), host.alloc(8) as a:
        a.copy_from(object())
    with pytest.raises(TypeError, match="no host view"):
        np.asarray(umem.Address(_Scratch(), 0, 4))


# -- File -----------------------------------------------------------------------------------------
def test_file_modes(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    missing = umem.File(path, "r")
    assert missing.get_status() is StatusType.IOError and "cannot open" in missing.get_message()
    assert "use w, w+, a or a+ to create it" in missing.get_message()
    bad = umem.File(path, "x")
    assert bad.get_status() is StatusType.ValueError and "unknown mode" in bad.get_message()
    assert not bad.alloc(4) and bad.get_status() is StatusType.IOError

    with umem.File(path, "wb") as w:  # write-only, truncating
        adr = w.alloc(6)
        assert int(adr) == 0 and w.device_name == "FILE"
        adr.copy_from(b"abcdef")
        assert w.is_ok()
        adr.read()
        assert w.get_status() is StatusType.IOError and "write-only" in w.get_message()
    assert path.read_bytes() == b"abcdef"

    with umem.File(path, "rb") as r:  # read-only: maps the existing content
        adr = r.alloc(6)
        assert adr.read().value == b"abcdef"  # type: ignore[attr-defined]
        adr.copy_from(b"x")
        assert r.get_status() is StatusType.IOError and "read-only" in r.get_message()
        r.clear_status()
        assert not r.alloc(1) and r.get_status() is StatusType.MemoryError
    assert path.read_bytes() == b"abcdef"

    with umem.File(path, "rb+") as rp:  # 'b' anywhere after the letter
        adr = rp.alloc(8)  # grows the file
        (adr + 6).copy_from(b"gh")
        assert rp.is_ok()
    assert path.read_bytes() == b"abcdefgh"

    with umem.File(path, "a") as a:  # appends: the old bytes are never overwritten
        adr = a.alloc(2)
        assert int(adr) == 8
        adr.copy_from(b"ij")
        a.copy_from(0, umem.Host(), umem.Host().alloc(1), 1)  # offset 0 was never allocated
        assert a.get_status() is StatusType.ValueError
    assert path.read_bytes() == b"abcdefghij"

    with umem.File(path, "a+b") as ap:
        adr = ap.calloc(1, 4)
        assert int(adr) == 10 and adr.read().value == b"\0\0\0\0"  # type: ignore[attr-defined]
    with umem.File(path, "w+") as wp:
        adr = wp.alloc(3)
        adr.copy_from(b"xyz")
        assert adr.read().value == b"xyz"  # type: ignore[attr-defined]
    assert path.read_bytes() == b"xyz"


def test_file_to_file_and_host_copies(tmp_path: Path) -> None:
    host = umem.Host()
    with umem.File(tmp_path / "a", "w+") as fa, umem.File(tmp_path / "b", "w+") as fb:
        a, b = fa.alloc(10), fb.calloc(1, 10)
        h = host.alloc(10)
        h.view()[:] = np.arange(10)
        fa.copy_from(a, host, h, 10)
        fa.copy_to(a + 2, fb, b, 5)
        assert fb.is_ok() and (tmp_path / "b").read_bytes() == bytes([2, 3, 4, 5, 6, 0, 0, 0, 0, 0])
        with b.connect(host) as mirror:
            assert not mirror.zero_copy and mirror.view().tolist() == [2, 3, 4, 5, 6, 0, 0, 0, 0, 0]
            mirror.view()[5:] = 9
            mirror.sync()
        assert (tmp_path / "b").read_bytes()[5:] == bytes([9] * 5)
        assert fa.is_accessible_from(fa) and not fa.is_accessible_from(fb)
        assert not fa.is_accessible_from(host) and not host.is_accessible_from(fa)
        h.free()
    assert fa.is_ok() and fb.is_ok()


def test_file_free_reuses_ranges(tmp_path: Path) -> None:
    with umem.File(tmp_path / "f", "w+") as f:
        a = f.alloc(4)
        b = f.alloc(4)
        assert (int(a), int(b)) == (0, 4)
        a.free()
        c = f.alloc(2)
        assert int(c) == 0
        f.free(int(b) + 1)
        assert f.get_status() is StatusType.ValueError


def test_huge_zero_fills_of_a_sparse_file_need_no_host_memory(tmp_path: Path) -> None:
    size = 1 << 40  # 8 TiB: a fill built in host memory would raise NumPy's MemoryError
    with umem.File(tmp_path / "f", "w+") as f:
        a = f.calloc(8, size)
        assert a and f.is_ok(), f.get_message()
        middle = a + (size // 2 - 3)
        middle.copy_from(b"written!")
        f.set(a, 0, size)
        assert f.is_ok(), f.get_message()
        assert middle.read(8).value == bytes(8)  # type: ignore[attr-defined]
        assert (tmp_path / "f").stat().st_blocks * 512 < 1 << 20  # still sparse


def test_fills_larger_than_a_chunk_are_written_piece_by_piece(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(umem_context, "FILL_CHUNK", 64)
    with umem.File(tmp_path / "f", "w+") as f, umem.Host() as host:
        for ctx in (f, host):
            a = ctx.alloc(1000)
            ctx.set(a, 0xAB, 1000)
            ctx.set(a + 100, 0, 333)
            want = b"\xab" * 100 + bytes(333) + b"\xab" * 567
            assert ctx.is_ok(), ctx.get_message()
            assert a.read(1000).value == want  # type: ignore[attr-defined]
            c = ctx.calloc(10, 99)
            assert c.read(990).value == bytes(990)  # type: ignore[attr-defined]


def test_empty_aligned_blocks_do_not_share_an_address(tmp_path: Path) -> None:
    # aligned_alloc(8, 0) after a 1-byte block reserves [1, 8) and starts at 8: the next block
    # (at 8) and it used to share a start, so one of them could no longer be freed
    with umem.File(tmp_path / "f", "w+") as f:
        a = f.alloc(1)
        empty = f.aligned_alloc(8, 0)
        b = f.alloc(1)
        assert (int(a), int(empty)) == (0, 8) and int(b) not in (0, 8)
        origin = f.aligned_origin(empty)
        assert origin <= int(empty) < int(b) or int(b) < origin
        f.aligned_free(empty)
        f.free(b)
        f.free(a)
        assert f.is_ok(), f.get_message()


# -- extending ------------------------------------------------------------------------------------
class _Scratch(umem.Context):
    """A toy context: 64 bytes of scratch memory, a bump allocator."""

    device_name = "Scratch"  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.mem = bytearray(64)
        self.top = 0

    def _alloc(self, nbytes: int) -> int:
        if self.top + nbytes > len(self.mem):
            raise umem.UmemError(StatusType.MemoryError, "scratch memory is full")
        self.top += nbytes
        return self.top - nbytes

    def _read(self, adr: int, nbytes: int) -> Any:
        return self.mem[adr : adr + nbytes]

    def _write(self, adr: int, data: Any) -> None:
        self.mem[adr : adr + len(data)] = bytes(data)


def test_a_new_context_in_a_few_lines() -> None:
    s, host = _Scratch(), umem.Host()
    a = s.calloc(4, 4)
    assert int(a) == 0 and s.mem[:16] == bytes(16)
    a.copy_from(b"0123456789abcdef")
    with a.connect(host) as mirror:  # connect, sync and update come from the base class
        assert not mirror.zero_copy and mirror.view().tobytes() == b"0123456789abcdef"
        mirror.view()[:4] = np.frombuffer(b"WXYZ", np.uint8)
        mirror.sync(4)
    assert bytes(s.mem[:16]) == b"WXYZ456789abcdef"
    b = s.aligned_alloc(16, 16)  # the default aligned allocation over-allocates
    assert int(b) % 16 == 0 and s.aligned_origin(b) <= int(b)
    s.set(b, 0xAB, 16)
    assert bytes(s.mem[int(b) : int(b) + 16]) == b"\xab" * 16
    assert not s.alloc(64) and s.get_status() is StatusType.MemoryError
    assert "scratch memory is full" in s.get_message()
    assert s.device_name == "Scratch" and s.is_accessible_from(s) and not s.is_accessible_from(host)
    b.free()
    a.free()
    assert s.get_status() is StatusType.MemoryError and "changed" not in s.get_message()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_file_os_errors_are_io_errors() -> None:
    full = umem.File("/dev/full", "r+b")
    assert full.is_ok()
    assert not full.alloc(8)
    assert full.get_status() is StatusType.IOError and "cannot grow" in full.get_message()
    full.close()
