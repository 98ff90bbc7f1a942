"""Pythonic WRAM FIFO links: push NumPy elements, drain results, stream them asynchronously."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .. import timing
from .._errors import DpuError, DpuErrorCode
from .._ops import XferMode, _fifo

if TYPE_CHECKING:
    from .._machine._dpu import Dpu
    from .._machine._rank import Rank
    from ._dpuset import DpuSet


class _FifoBase:
    def __init__(self, dpus: DpuSet, link: _fifo.FifoLink, dtype: npt.DTypeLike) -> None:
        self.dpus = dpus
        self.link = link
        self.dtype = np.dtype(dtype)
        if link.data_size % self.dtype.itemsize:
            raise ValueError(
                f"FIFO {link.name!r} elements are {link.data_size} bytes, not a whole number of "
                f"{self.dtype} items"
            )

    @property
    def items_per_element(self) -> int:
        """How many ``dtype`` items one FIFO element holds."""
        return self.link.data_size // self.dtype.itemsize

    @property
    def capacity(self) -> int:
        """Elements per DPU FIFO."""
        return self.link.capacity

    def sizes(self) -> list[int]:
        """Per DPU, ``get_fifo_size`` as captured by the last push/drain."""
        return [_fifo.fifo_size(self.link, d) for d in self.dpus.dpu_list]

    def free(self) -> None:
        """``dpu_fifo_link_free``."""
        _fifo.link_free(self.link)


class InputFifo(_FifoBase):
    """A link to an input FIFO of every DPU of a set (``dpu_link_input_fifo``)."""

    @property
    def max_retries(self) -> int:
        """Push retries before ``DPU_ERR_WRAM_FIFO_FULL`` (per rank; 1000 by default)."""
        return self.link.rank_fifo(self.dpus.rank_list[0]).max_retries

    @max_retries.setter
    def max_retries(self, value: int) -> None:
        _fifo.set_push_max_retries(self.link, self.dpus, value)

    @property
    def time_for_retry_us(self) -> int:
        """Microseconds between two push attempts (10 by default)."""
        return self.link.rank_fifo(self.dpus.rank_list[0]).time_for_retry_us

    @time_for_retry_us.setter
    def time_for_retry_us(self, value: int) -> None:
        _fifo.set_time_for_push_retries(self.link, self.dpus, value)

    async def push(self, elements: Any, *, wait: bool = True) -> None:
        """Push one element to every DPU: a single element (same for all) or one per DPU.

        An element is ``items_per_element`` items of the link's dtype (or ``data_size`` bytes).
        A DPU whose element is ``None`` (in a list) gets nothing. Raises ``DpuError`` with
        ``DPU_ERR_WRAM_FIFO_FULL`` when some DPUs stay full; those that had room keep theirs.
        """
        link, n = self.link, len(self.dpus)
        per_dpu = self._split(elements, n)
        if per_dpu is None:
            _fifo.fifo_prepare_xfer(self.dpus, link, self._element(elements))
        else:
            for one, element in zip(self.dpus.iter_dpus(), per_dpu, strict=True):
                buf = None if element is None else self._element(element)
                _fifo.fifo_prepare_xfer(one, link, buf)
        await _fifo.fifo_push_xfer(self.dpus, link, XferMode(wait=wait))

    def _element(self, element: Any) -> np.ndarray:
        arr = np.ascontiguousarray(element, dtype=self.dtype).reshape(-1)
        if arr.nbytes != self.link.data_size:
            raise DpuError(
                DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER,
                f"an element of FIFO {self.link.name!r} is {self.items_per_element} "
                f"{self.dtype} item(s); got {arr.size}",
            )
        return arr

    def _split(self, elements: Any, n: int) -> list[Any] | None:
        if isinstance(elements, list | tuple):
            if len(elements) != n:
                raise DpuError(
                    DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER,
                    f"{len(elements)} elements for {n} DPUs; give one per DPU (None skips one)",
                )
            return list(elements)
        arr = np.asarray(elements, dtype=self.dtype)
        if arr.size == self.items_per_element:
            return None
        if arr.size == n * self.items_per_element:
            return list(arr.reshape(n, self.items_per_element))
        raise DpuError(
            DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER,
            f"give one element ({self.items_per_element} {self.dtype} items) or one per DPU "
            f"({n} x {self.items_per_element}); got {arr.size} items",
        )


class OutputFifo(_FifoBase):
    """A link to an output FIFO of every DPU of a set (``dpu_link_output_fifo``)."""

    def __init__(self, dpus: DpuSet, link: _fifo.FifoLink, dtype: npt.DTypeLike) -> None:
        super().__init__(dpus, link, dtype)
        self._rings = np.zeros((len(dpus), link.ring_bytes), dtype=np.uint8)
        #: per DPU, what flushes took out of it and no drain has returned yet: (the flush's
        #: number on the DPU's rank, its elements), oldest first
        self._held: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(len(dpus))]
        #: per rank, its DPUs as (position in the set, DPU)
        self._members: dict[int, list[tuple[int, Dpu]]] = {}
        for i, d in enumerate(dpus.dpu_list):
            self._members.setdefault(d.rank.index, []).append((i, d))

    async def drain(self) -> list[np.ndarray]:
        """Empty every DPU's FIFO: per DPU, an array ``(k, items_per_element)``, oldest first.

        What a flush takes out of the DPUs is kept as it happens. If the drain fails on some
        rank (e.g. its queue was flushed by an earlier asynchronous failure) or is cancelled,
        the error or cancellation is raised, and what the flushes took out (those that ran,
        and those that run after a cancellation) is returned first by the next ``drain``.
        """
        await self._flush()
        return self.take_held()

    async def _flush(self) -> None:
        """The flush of :meth:`drain`, its elements kept for :meth:`take_held`."""
        for one, ring in zip(self.dpus.iter_dpus(), self._rings, strict=True):
            _fifo.fifo_prepare_xfer(one, self.link, ring)
        await _fifo.fifo_push_xfer(self.dpus, self.link, XferMode(), on_flushed=self._flushed)

    def take_held(self) -> list[np.ndarray]:
        """Per DPU, the elements flushed and not yet returned, from a failed or cancelled
        ``drain`` (and forget them)."""
        return [self._rows([rows for _, rows in held]) for held in self._take_flushes()]

    def _take_flushes(self) -> list[list[tuple[int, np.ndarray]]]:
        """:meth:`take_held` flush by flush: per DPU, ``(n, elements)`` for the ``n``-th flush
        of the link on the DPU's rank (numbers every link object to the same FIFO shares)."""
        held, self._held = self._held, [[] for _ in self._held]
        return held

    def _flushed(self, rank: Rank, rf: _fifo.RankFifo) -> None:
        """A flush of this link object ended on ``rank``: keep what it took out."""
        for i, d in self._members.get(rank.index, ()):
            rows = _fifo.flushed_elements(self.link, rf, d, self._rings[i])
            if len(rows):
                self._held[i].append((rf.flushes, rows.view(self.dtype).reshape(len(rows), -1)))

    def _rows(self, parts: list[np.ndarray]) -> np.ndarray:
        if not parts:
            return np.zeros((0, self.items_per_element), dtype=self.dtype)
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    async def stream(self, *, poll_us: float = 10.0) -> AsyncIterator[tuple[int, np.ndarray]]:
        """Drain until the DPUs have stopped and nothing is left: ``(dpu_index, element)``.

        Waits ``poll_us`` of virtual time between drains that brought nothing.
        """
        emu = self.dpus.emulator
        while True:
            stopped = not any(r.dpus_running for r in self.dpus.rank_list)
            got = False
            for i, elements in enumerate(await self.drain()):
                for element in elements:
                    got = True
                    yield i, element
            if not got:
                if stopped:
                    return
                await emu.delay(round(poll_us * timing.PS_PER_US), "the next output FIFO drain")
