"""Emulated DPU memories holding real bytes (NumPy).

MRAM is kept as 64 KiB pages: a page costs host memory only once written with something other
than zeros. Pages are either private to one bank (writable arrays) or shared read-only by many
banks (an :class:`MramImage`, e.g. a broadcast): a bank replaces a shared page by a private copy
the first time anything writes into it, so a broadcast to thousands of DPUs holds its bytes once.
"""

from __future__ import annotations

import mmap
import sys
from typing import ClassVar

import numpy as np
import numpy.typing as npt

Bytes = npt.NDArray[np.uint8]

MRAM_PAGE_SHIFT = 16
MRAM_PAGE = 1 << MRAM_PAGE_SHIFT
_PAGE_MASK = MRAM_PAGE - 1
#: bytes compared at a time when checking that an image still holds a buffer's bytes
_COMPARE_CHUNK = 1 << 20


def _nonzero_pages(src: Bytes) -> npt.NDArray[np.bool_]:
    """For ``src`` of whole pages: which pages hold a non-zero byte."""
    rows = src.reshape(-1, MRAM_PAGE)
    # most data pages are told apart by their first or last byte; scan only the others
    mask: npt.NDArray[np.bool_] = (rows[:, 0] != 0) | (rows[:, -1] != 0)
    for i in np.flatnonzero(~mask):
        mask[i] = bool(rows[i].any())
    return mask


def _runs(indices: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs ``[start, stop)`` of sorted ``indices``."""
    out: list[tuple[int, int]] = []
    for i in indices:
        if out and out[-1][1] == i:
            out[-1] = (out[-1][0], i + 1)
        else:
            out.append((i, i + 1))
    return out


class MramImage:
    """Bytes to store at ``offset`` of many banks, held once as read-only pages.

    The pages cover ``offset`` rounded down and the end rounded up to whole pages, zero outside
    the bytes: a bank whose edge page is unwritten can share it as it is."""

    __slots__ = ("_merged", "all_nonzero", "data", "first_page", "nonzero", "offset", "page_views")

    def __init__(self, offset: int, data: Bytes) -> None:
        self.offset = offset
        first, last = offset >> MRAM_PAGE_SHIFT, (offset + len(data) - 1) >> MRAM_PAGE_SHIFT
        base = np.zeros((last - first + 1) * MRAM_PAGE, dtype=np.uint8)
        start = offset - (first << MRAM_PAGE_SHIFT)
        base[start : start + len(data)] = data
        base.flags.writeable = False
        self.first_page = first
        #: the stored bytes (a read-only view of the pages)
        self.data = base[start : start + len(data)]
        self.page_views: list[Bytes] = list(base.reshape(-1, MRAM_PAGE))
        self.nonzero = _nonzero_pages(base)
        self.all_nonzero = bool(self.nonzero.all())
        #: id of a shared page an edge of this image was stored over -> (that page, kept so
        #: that its id stays its own; the page with this image's bytes over it, shared in turn)
        self._merged: dict[int, tuple[Bytes, Bytes]] = {}

    def merged(self, page: int, under: Bytes) -> Bytes:
        """Edge page ``page`` of this image stored over ``under``, a page shared by many
        banks: a read-only page made once for every bank that shares ``under``."""
        known = self._merged.get(id(under))
        if known is not None:
            return known[1]
        lo = max(self.offset, page << MRAM_PAGE_SHIFT)
        hi = min(self.offset + len(self.data), (page + 1) << MRAM_PAGE_SHIFT)
        out = under.copy()
        out[lo & _PAGE_MASK : (lo & _PAGE_MASK) + hi - lo] = self.data[
            lo - self.offset : hi - self.offset
        ]
        out.flags.writeable = False
        self._merged[id(under)] = (under, out)
        return out

    def holds(self, offset: int, data: Bytes) -> bool:
        """True if storing ``data`` at ``offset`` would store exactly this image."""
        if offset != self.offset or len(data) != len(self.data):
            return False
        mine = self.data
        for pos in range(0, len(data), _COMPARE_CHUNK):
            if not np.array_equal(
                mine[pos : pos + _COMPARE_CHUNK], data[pos : pos + _COMPARE_CHUNK]
            ):
                return False
        return True


class MramBank:
    """64 MiB of MRAM that costs host memory only for the 64 KiB pages ever written."""

    __slots__ = ("_table", "size")

    #: bumped by every change that may put a different page object in some bank's table (the
    #: instruction-set interpreter keeps its page maps while it stays the same)
    epoch: ClassVar[int] = 0

    def __init__(self, size: int) -> None:
        self.size = size
        # page index -> page (None: never written, reads as zeros); built at the first write
        self._table: list[Bytes | None] | None = None

    # -- page table ---------------------------------------
    def _table_to(self, end: int) -> list[Bytes | None]:
        """The page table, grown to cover byte ``end - 1``."""
        need = max(-(-self.size // MRAM_PAGE), -(-end // MRAM_PAGE))
        MramBank.epoch += 1
        tab = self._table
        if tab is None:
            tab = self._table = [None] * need
        elif len(tab) < need:
            tab.extend([None] * (need - len(tab)))
        return tab

    @property
    def pages(self) -> dict[int, Bytes]:
        """The written pages by page index (a snapshot; pages shared with other banks are
        read-only)."""
        tab = self._table or []
        return {i: p for i, p in enumerate(tab) if p is not None}

    @property
    def resident_bytes(self) -> int:
        """Bytes of MRAM backed by a page (shared pages count in every bank that uses them)."""
        tab = self._table
        return 0 if tab is None else sum(p is not None for p in tab) * MRAM_PAGE

    def clear(self) -> None:
        """Drop every page (the bank reads as zeros again)."""
        MramBank.epoch += 1
        self._table = None

    def zero(self, offset: int, length: int) -> None:
        """Store ``length`` zeros at ``offset``: whole pages are dropped (they read as zeros
        and cost nothing), the edges of written pages are zeroed in place."""
        tab = self._table
        if tab is None or length <= 0:
            return
        MramBank.epoch += 1
        end = min(offset + length, len(tab) << MRAM_PAGE_SHIFT)
        pos = offset
        while pos < end:
            page, off = pos >> MRAM_PAGE_SHIFT, pos & _PAGE_MASK
            n = min(MRAM_PAGE - off, end - pos)
            if n == MRAM_PAGE:
                tab[page] = None
            elif tab[page] is not None:
                self._own(tab, page)[off : off + n] = 0
            pos += n

    # -- reading ---------------------------------------
    def read_into(self, offset: int, out: Bytes) -> None:
        """Fill ``out`` with the bytes from ``offset`` (unwritten pages read as zero)."""
        length = len(out)
        tab = self._table
        if tab is None:
            out.fill(0)
            return
        page, off = offset >> MRAM_PAGE_SHIFT, offset & _PAGE_MASK
        if off + length <= MRAM_PAGE and page < len(tab):  # within one page
            data = tab[page]
            if data is None:
                out.fill(0)
            else:
                out[:] = data[off : off + length]
            return
        pos = 0
        while pos < length:
            addr = offset + pos
            page, off = addr >> MRAM_PAGE_SHIFT, addr & _PAGE_MASK
            n = min(MRAM_PAGE - off, length - pos)
            data = tab[page] if page < len(tab) else None
            if data is None:
                out[pos : pos + n] = 0
            else:
                out[pos : pos + n] = data[off : off + n]
            pos += n

    def read(self, offset: int, length: int) -> Bytes:
        """Copy ``length`` bytes starting at ``offset`` (unwritten pages read as zero)."""
        out = np.empty(length, dtype=np.uint8)
        self.read_into(offset, out)
        return out

    def own_pages(self, first: int, last: int) -> None:
        """Give pages ``first..last`` private, writable storage (zeros where never written, a
        copy where shared with other banks), so that a DPU's transfers write them in place."""
        tab = self._table_to((last + 1) << MRAM_PAGE_SHIFT)
        for p in range(first, last + 1):
            self._own(tab, p)

    @staticmethod
    def _own(tab: list[Bytes | None], page: int) -> Bytes:
        """Page ``page``'s private, writable storage (zeros if it was never written; a copy
        at the first write into a page shared with other banks)."""
        buf = tab[page]
        if buf is None:
            buf = tab[page] = np.zeros(MRAM_PAGE, dtype=np.uint8)
        elif not buf.flags.writeable:
            buf = tab[page] = buf.copy()
        return buf

    # -- writing ---------------------------------------
    def write(self, offset: int, data: Bytes) -> None:
        """Store ``data`` at ``offset``: zeros over unwritten pages allocate nothing, pages
        shared with other banks are copied before they change."""
        length = len(data)
        if length == 0:
            return
        end = offset + length
        tab = self._table_to(end)
        first, last = offset >> MRAM_PAGE_SHIFT, (end - 1) >> MRAM_PAGE_SHIFT
        full_lo = first if offset & _PAGE_MASK == 0 else first + 1
        full_hi = last + 1 if end & _PAGE_MASK == 0 else last  # whole pages [full_lo, full_hi)
        if first < full_lo:
            n = min(length, MRAM_PAGE - (offset & _PAGE_MASK))
            self._write_partial(tab, first, offset & _PAGE_MASK, data[:n])
        if full_lo < full_hi:
            start = (full_lo << MRAM_PAGE_SHIFT) - offset
            self._write_full(
                tab,
                full_lo,
                full_hi,
                data[start : start + ((full_hi - full_lo) << MRAM_PAGE_SHIFT)],
            )
        if end & _PAGE_MASK and (last != first or offset & _PAGE_MASK == 0):
            start = (last << MRAM_PAGE_SHIFT) - offset
            self._write_partial(tab, last, 0, data[start:])

    @staticmethod
    def _write_partial(tab: list[Bytes | None], page: int, off: int, chunk: Bytes) -> None:
        if tab[page] is None and not chunk.any():
            return  # writing zeros to an untouched page changes nothing
        MramBank._own(tab, page)[off : off + len(chunk)] = chunk

    @staticmethod
    def _write_full(tab: list[Bytes | None], lo: int, hi: int, src: Bytes) -> None:
        fresh: list[int] = []  # pages that need new private storage
        unwritten: list[int] = []
        for p in range(lo, hi):
            buf = tab[p]
            if buf is None:
                unwritten.append(p)
            elif buf.flags.writeable:
                s = (p - lo) << MRAM_PAGE_SHIFT
                buf[:] = src[s : s + MRAM_PAGE]
            else:
                fresh.append(p)
        if unwritten:
            rows = src.reshape(-1, MRAM_PAGE)
            if len(unwritten) == hi - lo:
                nonzero = _nonzero_pages(src)
            else:
                nonzero = _nonzero_pages(rows[np.asarray(unwritten) - lo].reshape(-1))
            fresh.extend(p for p, nz in zip(unwritten, nonzero.tolist(), strict=True) if nz)
            fresh.sort()
        for a, b in _runs(fresh):
            s = (a - lo) << MRAM_PAGE_SHIFT
            base = src[s : s + ((b - a) << MRAM_PAGE_SHIFT)].copy()
            tab[a:b] = list(base.reshape(-1, MRAM_PAGE))

    def write_image(self, image: MramImage) -> None:
        """Store ``image`` (as :meth:`write` of its bytes would), sharing its pages."""
        data = image.data
        length = len(data)
        if length == 0:
            return
        offset = image.offset
        end = offset + length
        tab = self._table_to(end)
        first, last = offset >> MRAM_PAGE_SHIFT, (end - 1) >> MRAM_PAGE_SHIFT
        views, nonzero, p0 = image.page_views, image.nonzero, image.first_page
        for p in {first, last}:
            lo = max(offset, p << MRAM_PAGE_SHIFT)
            hi = min(end, (p + 1) << MRAM_PAGE_SHIFT)
            if hi - lo == MRAM_PAGE:
                continue  # a whole page: shared below
            under = tab[p]
            if under is None:
                if nonzero[p - p0]:
                    tab[p] = views[p - p0]  # zeros around the bytes, as an unwritten page
            elif not under.flags.writeable:
                tab[p] = image.merged(p, under)  # over a shared page: shared in turn
            else:
                self._write_partial(tab, p, lo & _PAGE_MASK, data[lo - offset : hi - offset])
        full_lo = first if offset & _PAGE_MASK == 0 else first + 1
        full_hi = last + 1 if end & _PAGE_MASK == 0 else last
        if full_lo >= full_hi:
            return
        if image.all_nonzero:
            tab[full_lo:full_hi] = views[full_lo - p0 : full_hi - p0]
            return
        for p in range(full_lo, full_hi):
            if nonzero[p - p0] or tab[p] is not None:
                tab[p] = views[p - p0]


class RowMemory:
    """Equal rows of zeroed memory (one anonymous private mapping): the WRAM or IRAM of the
    DPUs of a rank, one row each. A row costs host memory only where written, and clearing
    it gives that memory back."""

    __slots__ = ("_map", "_stride", "rows")

    def __init__(self, nr_rows: int, row_bytes: int) -> None:
        # each row starts on a page of its own, so that its pages can be dropped alone
        page = mmap.PAGESIZE
        self._stride = stride = -(-row_bytes // page) * page
        flags = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
        size = nr_rows * stride
        mapped = mmap.mmap(-1, size, flags=flags) if flags and size else None
        if mapped is not None:
            whole = np.frombuffer(mapped, np.uint8).reshape(nr_rows, stride)
        else:  # no anonymous private mappings on this platform
            whole = np.zeros((nr_rows, stride), dtype=np.uint8)
        #: ``rows[i]``: row ``i`` (``row_bytes`` contiguous bytes)
        self.rows: Bytes = whole[:, :row_bytes]
        # the mapping whose pages ``clear`` drops: only Linux promises zeros after dropping the
        # pages of a private mapping
        self._map = mapped if sys.platform.startswith("linux") else None

    @property
    def nbytes(self) -> int:
        """Bytes mapped: the most host memory the rows can hold."""
        return len(self.rows) * self._stride

    def clear(self, row: int) -> None:
        """Zero row ``row``: its pages are dropped (the next read sees zeros), or, where that
        is not possible, its non-zero blocks are written with zeros."""
        if self._map is not None:
            self._map.madvise(mmap.MADV_DONTNEED, row * self._stride, self._stride)
        else:
            zero_fill(self.rows[row])


def zero_fill(arr: Bytes) -> None:
    """Set ``arr`` to zeros, writing only the 4 KiB blocks that are not zero already (so
    memory never written stays unbacked)."""
    n = len(arr) & ~4095
    if n:
        blocks = arr[:n].reshape(-1, 4096)
        dirty = np.flatnonzero(blocks.any(axis=1))
        if len(dirty) == len(blocks):
            blocks.fill(0)
        elif len(dirty):
            blocks[dirty] = 0
    arr[n:] = 0


def as_bytes(data: object, *, what: str = "buffer") -> Bytes:
    """View any bytes-like object or NumPy array as a flat uint8 array (no copy when possible)."""
    if isinstance(data, np.ndarray):
        if data.dtype == np.uint8 and data.ndim == 1 and data.flags.c_contiguous:
            return data  # already a flat byte array: no new view
        arr = data if data.flags.c_contiguous else np.ascontiguousarray(data)
        return arr.reshape(-1).view(np.uint8)
    if isinstance(data, bytes | bytearray | memoryview):
        return np.frombuffer(data, dtype=np.uint8)
    raise TypeError(f"{what} must be bytes-like or a NumPy array, not {type(data).__name__}")
