"""The compiled batch loop over DPUs given by the addresses of their arrays (numba only).

:func:`_interp.run_dpus` takes lists of arrays; compiled, lists would be numba typed lists,
whose methods numba compiles again in every process. Here each DPU is one row of an int64
address table (:func:`_interp.address_row`) and the arrays are rebuilt in the loop from those
addresses, so the whole batch is one function numba loads from its disk cache. The caller keeps
every array alive while the table is in use.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic, register_jitable
from numba.np.numpy_support import carray

from . import _interp as I
from ._semantics import NCOL

for _fn in (I.cycles_ps, I.first_cycle, I.dma_request):
    register_jitable(_fn)


def _drop_stale_cache(cache: Path | None = None) -> None:
    """numba keys a function's disk cache on its own file alone, but the functions below compile
    :mod:`._interp`'s loop into themselves, and the loop compiles :mod:`._specialize`'s call of
    a program's step into itself: when one of those files (or ``_semantics.py``) changes, the
    cached machine code of both modules must go, or an old loop would run. ``cache``: numba's
    cache directory of this package (found when not given)."""
    here = Path(__file__)
    sources = [Path(I.__file__), here.with_name("_semantics.py"), here.with_name("_specialize.py")]
    stamp = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()
    if cache is None:
        try:
            # where numba keeps this package's cache (``NUMBA_CACHE_DIR`` moves it)
            cache = Path(I.jit_dispatcher()._cache._cache_path)  # type: ignore[attr-defined]
        except AttributeError:
            cache = here.with_name("__pycache__")
    marker = cache / "_jitptr.sources-sha256"
    try:
        if marker.read_text() == stamp:
            return
    except OSError:
        pass
    try:
        for pattern in ("_jitptr.*.nb[ic]", "_interp.*.nb[ic]"):
            for stale in cache.glob(pattern):
                stale.unlink(missing_ok=True)
        cache.mkdir(parents=True, exist_ok=True)
        marker.write_text(stamp)
    except OSError:
        pass  # a read-only install: numba falls back to its own cache directory


_drop_stale_cache()

_loop = I.jit_dispatcher()


def _pointer_intrinsic(dtype: Any) -> Any:
    @intrinsic
    def pointer(typingctx: Any, addr: Any) -> Any:
        if not isinstance(addr, types.Integer):
            return None
        ptr = types.CPointer(dtype)  # type: ignore[no-untyped-call]

        def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
            return builder.inttoptr(args[0], context.get_value_type(ptr))

        return ptr(addr), codegen

    return pointer


_i64 = _pointer_intrinsic(types.int64)
_u8 = _pointer_intrinsic(types.uint8)
_PAGE = 1 << I.PAGE_SHIFT


@numba.njit(cache=True, nogil=True)
def _serve_dma_at(th: Any, dv: Any, dma: Any, wram: Any, pages: Any, pmap: Any) -> bool:
    """:func:`_interp.serve_dma` with the pages given by address; an ``ldma`` first keeps the
    WRAM blocks it writes (:func:`_interp.keep_wram`: only this batch's checkpoints keep WRAM by
    blocks, the pure-Python batch copies all of it)."""
    c = dv[I.D_CYCLE]
    nxt = I.BIG
    for t in range(dv[I.D_NTHREADS]):
        if th[t, I.T_RUN] != I.RUN_DMA:
            continue
        due = th[t, I.T_NEXT]
        if due > c:
            if due < nxt:
                nxt = due
            continue
        kind = dma[t, 0]
        if kind == I.DMA_LDMAI:
            return False
        waddr = dma[t, 1]
        maddr = dma[t, 2]
        size = dma[t, 3]
        for p in range(maddr >> I.PAGE_SHIFT, ((maddr + size - 1) >> I.PAGE_SHIFT) + 1):
            e = pmap[p]
            if e == I.PM_UNKNOWN or (kind == I.DMA_SDMA and (e < 0 or (e & 1) == 0)):
                return False
        if kind == I.DMA_LDMA:
            I.keep_wram(dv, wram, waddr, waddr + size)
        pos = 0
        while pos < size:
            a = maddr + pos
            off = a & (_PAGE - 1)
            nb = _PAGE - off
            if nb > size - pos:
                nb = size - pos
            e = pmap[a >> I.PAGE_SHIFT]
            w = waddr + pos
            # whole words (a DMA's addresses and size are multiples of 8): 8 times fewer steps
            # than a byte slice, which numba copies one byte at a time
            words = carray(_i64(wram.ctypes.data + w), nb >> 3)
            if kind == I.DMA_LDMA:
                if e == I.PM_ZERO:
                    words[:] = 0
                else:
                    words[:] = carray(_i64(pages[e >> 1] + off), nb >> 3)
            else:
                carray(_i64(pages[e >> 1] + off), nb >> 3)[:] = words
            pos += nb
        th[t, I.T_RUN] = I.RUN_READY
    dv[I.D_DMA_MIN] = nxt
    return True


@numba.njit(cache=True, nogil=True)
def _host_writes(hw: Any, dv: Any, wram: Any) -> None:
    """Copy into WRAM the host writes scheduled at or before the DPU's cycle, in order: the
    host's bytes as they are now (no host code runs while the batch does)."""
    c = dv[I.D_CYCLE]
    i = dv[I.D_HW_DONE]
    while i < hw.shape[0] and hw[i, 0] <= c:
        w = hw[i, 1]
        n = hw[i, 3]
        I.keep_wram(dv, wram, w, w + n)
        wram[w : w + n] = carray(_u8(hw[i, 2]), n)
        i += 1
    dv[I.D_HW_DONE] = i


@numba.njit(cache=True, nogil=True)
def _copy_words(to: int, source: int, count: int) -> None:
    carray(_i64(to), count)[:] = carray(_i64(source), count)


@numba.njit(cache=True, nogil=True)
def _save_state(row: Any, n: int, to: Any) -> None:
    """``IsaRunner.save_state`` in the batch: the DPU's arrays copied word by word to the
    checkpoint's copies at ``to`` (in ``IsaRunner._state``'s order), and its MRAM write marks
    cleared. WRAM is copied block by block before its bytes change (:func:`_interp.keep_wram`):
    a run of a few microseconds writes a few of its 64 KiB."""
    _copy_words(to[0], row[I.A_REGS], n * 32)
    _copy_words(to[1], row[I.A_TH], n * I.NTH)
    dv = carray(_i64(row[I.A_DV]), I.ND)
    dv[I.D_WKEEP] = 0  # the copy does not keep WRAM: a rollback ends the keeping
    _copy_words(to[2], row[I.A_DV], I.ND)
    _copy_words(to[3], row[I.A_ATOMIC], 256 >> 3)
    _copy_words(to[4], row[I.A_DMA], n * 4)
    dv[I.D_WKEEP] = to[5]
    dv[I.D_WKEPT] = 0
    pmap = carray(_i64(row[I.A_PMAP]), row[I.A_NPMAP])
    for p in range(min(dv[I.D_PAGES], pmap.shape[0])):
        if pmap[p] >= 0:
            pmap[p] &= ~1


@numba.njit(cache=True, nogil=True)
def run_dpus_at(tab: Any, pages: Any, sel: Any, until_ps: int, reasons: Any) -> int:
    """:func:`_interp.run_dpus` over the address table ``tab`` (rows ``sel``) and the page
    address list ``pages``."""
    need = 0
    for j in range(sel.shape[0]):
        row = tab[sel[j]]
        dv = carray(_i64(row[I.A_DV]), I.ND)
        n = dv[I.D_NTHREADS]
        code = carray(_i64(row[I.A_CODE]), (row[I.A_NCODE], NCOL))
        regs = carray(_i64(row[I.A_REGS]), (n, 32))
        th = carray(_i64(row[I.A_TH]), (n, I.NTH))
        atomic = carray(_u8(row[I.A_ATOMIC]), 256)
        wram = carray(_u8(row[I.A_WRAM]), row[I.A_NWRAM])
        dma = carray(_i64(row[I.A_DMA]), (n, 4))
        pmap = carray(_i64(row[I.A_PMAP]), row[I.A_NPMAP])
        work = carray(_i64(row[I.A_SCRATCH]), (n, I.NSCR))
        if row[I.A_SAVE] != 0:
            _save_state(row, n, carray(_i64(row[I.A_SAVE]), 6))
            row[I.A_SAVE] = 0
        limit = I.first_cycle(until_ps, dv[I.D_BOOT_PS], dv[I.D_PS_NUM], dv[I.D_PS_DEN])
        nhw = dv[I.D_HW_N]
        hw = carray(_i64(row[I.A_HW]), (nhw, 4))
        while True:
            stop = limit
            if dv[I.D_HW_DONE] < nhw and hw[dv[I.D_HW_DONE], 0] < stop:
                stop = hw[dv[I.D_HW_DONE], 0]  # a host write before the limit: run to it first
            r = _loop(code, regs, th, dv, atomic, wram, dma, stop, I.BIG, work)
            if r == I.R_DMA_REQUEST:
                I.dma_request(th, dv, dma)
                continue
            if r == I.R_DMA_DUE and _serve_dma_at(th, dv, dma, wram, pages, pmap):
                continue
            if r == I.R_LIMIT and stop < limit:
                _host_writes(hw, dv, wram)
                continue
            break
        reasons[j] = r
        if r != I.R_LIMIT:
            need += 1
    return need


@numba.njit(cache=True, nogil=True, parallel=True)
def run_dpus_parallel(
    tab: Any, pages: Any, sel: Any, until_ps: int, reasons: Any, parts: int
) -> int:
    """:func:`run_dpus_at` with the DPUs of ``sel`` split in ``parts`` contiguous shares, one
    per numba worker thread (a DPU runs on one thread: results do not depend on the split)."""
    n = sel.shape[0]
    need = np.zeros(parts, np.int64)
    for p in numba.prange(parts):
        a = n * p // parts
        b = n * (p + 1) // parts
        need[p] = run_dpus_at(tab, pages, sel[a:b], until_ps, reasons[a:b])
    return int(need.sum())
