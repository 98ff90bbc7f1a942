"""The memory-context base class: allocation, copies between any two contexts, connect/sync."""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Awaitable, Coroutine, Generator
from enum import IntEnum
from types import TracebackType
from typing import Any, ClassVar, Generic, Self, TypeVar

import numpy as np
import numpy.typing as npt

from .. import DpuError
from ._address import Address as Address
from ._address import Ownership
from ._blocks import Block, BlockTable, align_up
from ._status import Status, StatusType, UmemError, get_status_name

T = TypeVar("T")
Bytes = npt.NDArray[np.uint8]


class DeviceType(IntEnum):
    """``umemDeviceType``, extended with the DPU memories."""

    Virtual = 0
    Host = 1
    File = 2
    Cuda = 3
    CudaHost = 4
    CudaManaged = 5
    MMap = 6
    RMM = 7
    Mram = 8
    Wram = 9


_DEVICE_NAMES = {
    DeviceType.Virtual: "Virtual",
    DeviceType.Host: "Host",
    DeviceType.File: "FILE",
    DeviceType.Cuda: "CUDA",
    DeviceType.CudaHost: "CUDAHOST",
    DeviceType.CudaManaged: "CUDAMANAGED",
    DeviceType.MMap: "MMAP",
    DeviceType.RMM: "RMM",
    DeviceType.Mram: "MRAM",
    DeviceType.Wram: "WRAM",
}


def get_device_name_from_type(device: DeviceType) -> str:
    """``umem_get_device_name_from_type``."""
    return _DEVICE_NAMES[DeviceType(device)]


class Done(Generic[T]):
    """An awaitable that is already complete: what host-side calls return."""

    __slots__ = ("value",)

    def __init__(self, value: T) -> None:
        self.value = value

    def __await__(self) -> Generator[Any, None, T]:
        yield from ()
        return self.value

    def __repr__(self) -> str:
        return f"Done({self.value!r})"


class _Stop(Exception):
    """The operation stopped after recording a status."""


def _count(value: Any, name: str) -> int:
    """``value`` as a byte count or address (TypeError naming ``name`` otherwise)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None


def host_bytes(buf: Any, *, writable: bool, name: str) -> Bytes:
    """A bytes-like object or NumPy array as a flat uint8 array (TypeError naming ``name``)."""
    arr: Bytes
    if isinstance(buf, np.ndarray):
        if not buf.flags.c_contiguous:
            if writable:
                raise TypeError(f"{name} must be a C-contiguous array to be written into")
            buf = np.ascontiguousarray(buf)
        arr = buf.reshape(-1).view(np.uint8)
    else:
        try:
            view = memoryview(buf)
        except TypeError:
            raise TypeError(
                f"{name} must be bytes-like or a NumPy array, not {type(buf).__name__}"
            ) from None
        arr = np.frombuffer(view.cast("B") if view.c_contiguous else view.tobytes(), np.uint8)
    if writable and not arr.flags.writeable:
        raise TypeError(f"{name} is read-only: pass a bytearray or a NumPy array")
    return arr


#: the largest fill (``set``, ``calloc``) written at once: larger ones go piece by piece, so a
#: fill needs no more host memory than this. The MRAM of a DPU: a DPU's fill is one transfer.
FILL_CHUNK = 64 << 20


class Context:
    """A memory context: a storage device whose addresses are integers.

    A new context subclasses this and implements three methods: ``_alloc(nbytes) -> int``
    (reserve ``nbytes``, return the start), ``_read(adr, nbytes)`` (bytes-like) and
    ``_write(adr, data)`` (``data`` a uint8 array). Optional: ``_free(block)`` (release the
    storage; the base class already forgets the block), ``is_accessible_from``, ``close``, the
    class attributes ``device``, ``device_name`` and ``fundamental_alignment``. The rest (calloc,
    aligned allocation, set, bounds checks, copies to and from every other context, connect,
    sync, status) comes from this class. Report failures by raising :class:`UmemError`.

    A context whose data moves take virtual time sets ``is_async = True`` and implements
    ``_aread``/``_awrite`` instead of ``_read``/``_write``; then every call that touches its
    data must be awaited. Calls on host-side contexts complete before they return; they
    return an already-complete awaitable, so the same code can ``await`` them too.
    """

    device: ClassVar[DeviceType] = DeviceType.Virtual
    #: alignment of every allocation (``umem_fundamental_align``)
    fundamental_alignment: ClassVar[int] = 1
    #: True when data moves are jobs in virtual time (calls must be awaited)
    is_async: ClassVar[bool] = False

    def __init__(self) -> None:
        self.status = Status()
        self._table = BlockTable()
        self._mine: set[int] = set()  # addresses this context allocated and has not freed

    # ---------------------------------------------------------------------------- to implement
    def _alloc(self, nbytes: int) -> int:
        """Reserve ``nbytes`` (at least 1) at a ``fundamental_alignment``-aligned address."""
        raise UmemError(
            StatusType.NotImplementedError, f"{type(self).__name__} does not implement _alloc"
        )

    def _free(self, block: Block) -> None:
        """Release the storage of ``block`` (already removed from the table)."""

    def _read(self, adr: int, nbytes: int) -> Any:
        """``nbytes`` at ``adr`` as a bytes-like object (inside a live block)."""
        raise UmemError(
            StatusType.NotImplementedError, f"{type(self).__name__} does not implement _read"
        )

    def _write(self, adr: int, data: Bytes) -> None:
        """Store ``data`` at ``adr`` (inside a live block)."""
        raise UmemError(
            StatusType.NotImplementedError, f"{type(self).__name__} does not implement _write"
        )

    @property
    def nr_lanes(self) -> int:
        """Copies of the memory the context writes at once (DPUs of a set; 1 elsewhere)."""
        return 1

    def _lane_keys(self) -> list[object] | None:
        """What each lane is (the DPUs of a DPU context), to pair lanes across contexts."""
        return None

    async def _aread(self, adr: int, nbytes: int, lanes: list[int] | None) -> Bytes:
        """Rows of ``nbytes`` at ``adr``: one per lane index in ``lanes``, or one row from the
        context's reading lane for ``None``."""
        row: Bytes = np.frombuffer(self._read(adr, nbytes), np.uint8)
        return row.reshape(1, nbytes)

    async def _awrite(self, adr: int, data: Bytes) -> None:
        """Store ``data`` rows at ``adr``: one row for every lane, or one row per lane."""
        self._write(adr, data[0])

    def _host_view(self, adr: int, nbytes: int) -> Bytes | None:
        """A writable NumPy view of host memory, for contexts whose addresses are host RAM."""
        return None

    # the live-block table; contexts sharing memory override these three
    def _lookup(self, adr: int, nbytes: int) -> Block | None:
        return self._table.containing(adr, nbytes)

    def _register(self, block: Block) -> None:
        self._table.add(block)

    def _unregister(self, adr: int) -> Block | None:
        return self._table.pop(adr)

    # ---------------------------------------------------------------------------- description
    @property
    def device_name(self) -> str:
        """``umem_get_device_name``."""
        return get_device_name_from_type(self.device)

    def get_device_name(self) -> str:
        """``umem_get_device_name``."""
        return self.device_name

    def fundamental_align(self) -> int:
        """``umem_fundamental_align``."""
        return self.fundamental_alignment

    def is_accessible_from(self, other: Context) -> bool:
        """True when an address of this context is usable as is from ``other`` (may be
        asymmetric; always true for the context itself)."""
        return other is self

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.device_name} status={self.status.type.name}>"

    # ---------------------------------------------------------------------------- status
    def is_ok(self) -> bool:
        """``umem_is_ok``."""
        return self.status.is_ok

    def get_status(self) -> StatusType:
        """``umem_get_status``."""
        return self.status.type

    def get_message(self) -> str:
        """``umem_get_message`` ("" when nothing was recorded)."""
        return self.status.message

    def set_status(self, type: StatusType, message: str | None = None) -> None:
        """``umem_set_status``: overwrite the type, append the message."""
        self.status.set(type, message)

    def clear_status(self) -> None:
        """``umem_clear_status``."""
        self.status.clear()

    @staticmethod
    def get_status_name(type: StatusType) -> str:
        """``umem_get_status_name``."""
        return get_status_name(type)

    def _fail(self, type: StatusType, message: str) -> _Stop:
        self.status.set(type, message)
        return _Stop(message)

    # ---------------------------------------------------------------------------- allocation
    def alloc(self, nbytes: int) -> Address:
        """``umem_alloc``: ``nbytes`` uninitialised bytes (a null address if it fails)."""
        n = _count(nbytes, "nbytes")
        try:
            return self._new_block(n, self.fundamental_alignment, aligned=False, what="alloc")
        except _Stop:
            return Address.null(self)

    def calloc(self, nmemb: int, size: int) -> Awaitable[Address]:
        """``umem_calloc``: ``nmemb * size`` zeroed bytes.

        On a host-side context the :class:`Address` itself is returned (it is awaitable).
        """
        n = _count(nmemb, "nmemb") * _count(size, "size")
        result = self._drive(self._calloc(n), self)
        return result.value if isinstance(result, Done) else result

    async def _calloc(self, nbytes: int) -> Address:
        adr = self.alloc(nbytes)
        if adr and nbytes:
            try:
                await self._set(adr.adr, 0, nbytes, "calloc")
            except _Stop:
                self.free(adr)
                return Address.null(self)
        return adr

    def aligned_alloc(self, alignment: int, size: int) -> Address:
        """``umem_aligned_alloc``: ``alignment`` a power of two (raised to
        :attr:`fundamental_alignment`); a ``size`` that is not a multiple of it is rounded up,
        as umem's own contexts reserve whole aligned blocks (the address has the rounded size).
        """
        a, n = _count(alignment, "alignment"), _count(size, "size")
        try:
            if a <= 0 or a & (a - 1):
                raise self._fail(
                    StatusType.ValueError,
                    f"aligned_alloc: alignment {a} is not a power of two; use 1, 2, 4, 8, 16…",
                )
            if n < 0:
                raise self._fail(StatusType.ValueError, f"aligned_alloc: size {n} is negative")
            block = align_up(n, a)
            return self._new_block(block, max(a, self.fundamental_alignment), True, "aligned_alloc")
        except _Stop:
            return Address.null(self)

    def _new_block(self, nbytes: int, alignment: int, aligned: bool, what: str) -> Address:
        if nbytes < 0:
            raise self._fail(StatusType.ValueError, f"{what}: size {nbytes} is negative")
        extra = max(0, alignment - self.fundamental_alignment)
        # at least one byte past the aligned start: an empty block's address must lie inside
        # its own span, or it could be the start of the next block
        span = max(nbytes, 1) + extra
        origin = self._guard_sync(what, self._alloc, span)
        adr = align_up(origin, alignment)
        assert origin <= adr < origin + span, (origin, adr, span)
        self._register(Block(adr, nbytes, origin, span, aligned))
        self._mine.add(adr)
        own: Ownership = "aligned" if aligned else "alloc"
        return Address(self, adr, nbytes, alignment, own=own)

    def free(self, adr: int | Address) -> None:
        """``umem_free``: release an address returned by :meth:`alloc` or :meth:`calloc`."""
        self._release(_count(adr, "adr"), aligned=False)

    def aligned_free(self, adr: int | Address) -> None:
        """``umem_aligned_free``: release an address returned by :meth:`aligned_alloc`."""
        self._release(_count(adr, "adr"), aligned=True)

    def _release(self, adr: int, *, aligned: bool) -> None:
        what = "aligned_free" if aligned else "free"
        block = self._unregister(adr)
        if block is None:
            self.status.set(
                StatusType.ValueError,
                f"{what}: {adr:#x} is not the start of a live allocation of {self.device_name} "
                "(freed already, never allocated here, or an address inside a block)",
            )
            return
        if block.aligned and not aligned and block.origin != block.adr:
            self._register(block)
            self.status.set(
                StatusType.ValueError,
                f"free: {adr:#x} came from aligned_alloc; release it with aligned_free",
            )
            return
        self._mine.discard(adr)
        with contextlib.suppress(_Stop):
            self._guard_sync(what, self._free, block)

    def aligned_origin(self, adr: int | Address) -> int:
        """``umem_aligned_origin``: the start of the memory reserved for an aligned address."""
        a = _count(adr, "adr")
        block = self._table_block(a)
        if block is None:
            self.status.set(
                StatusType.ValueError,
                f"aligned_origin: {a:#x} is not the start of a live allocation of "
                f"{self.device_name}",
            )
            return a
        return block.origin

    def _table_block(self, adr: int) -> Block | None:
        block = self._lookup(adr, 0)
        return block if block is not None and block.adr == adr else None

    def close(self) -> None:
        """Release every allocation this context made and still holds (``umem_dtor``)."""
        for adr in sorted(self._mine):
            block = self._table_block(adr)
            if block is None:  # freed through another context, or wiped by a new load
                self._mine.discard(adr)
            else:
                self._release(adr, aligned=block.aligned)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ---------------------------------------------------------------------------- data
    def set(self, adr: int | Address, c: int, nbytes: int) -> Awaitable[None]:
        """``umem_set``: fill ``nbytes`` at ``adr`` with the byte ``c``."""
        a, n = _count(adr, "adr"), _count(nbytes, "nbytes")
        return self._drive(self._set_op(a, _count(c, "c"), n, None), self)

    def set_safe(self, adr: int | Address, size: int, c: int, nbytes: int) -> Awaitable[None]:
        """``umem_set_safe``: like :meth:`set`, IndexError if ``nbytes > size``."""
        a, n = _count(adr, "adr"), _count(nbytes, "nbytes")
        return self._drive(self._set_op(a, _count(c, "c"), n, _count(size, "size")), self)

    async def _set_op(self, adr: int, c: int, nbytes: int, size: int | None) -> None:
        try:
            if size is not None and nbytes > size:
                raise self._fail(
                    StatusType.IndexError,
                    f"set_safe: {nbytes} bytes do not fit the {size}-byte area at {adr:#x}; "
                    f"pass nbytes <= {size}",
                )
            await self._set(adr, c, nbytes, "set_safe" if size is not None else "set")
        except _Stop:
            pass

    async def _set(self, adr: int, c: int, nbytes: int, what: str) -> None:
        if self._check_span(adr, nbytes, what, "area"):
            await self._guard(what, self._fill(adr, c & 0xFF, nbytes))

    async def _fill(self, adr: int, c: int, nbytes: int) -> None:
        """Write ``nbytes`` bytes ``c`` at ``adr`` (inside a live block), at most
        :data:`FILL_CHUNK` at a time."""
        chunk = FILL_CHUNK
        row = np.full((1, min(nbytes, chunk)), c, np.uint8)
        for start in range(0, nbytes, chunk):
            await self._awrite(adr + start, row[:, : min(chunk, nbytes - start)])

    def gather(self, adr: int | Address, nbytes: int) -> Awaitable[Bytes]:
        """``nbytes`` at ``adr`` from every lane: an array of shape ``(nr_lanes, nbytes)``."""
        a, n = _count(adr, "adr"), _count(nbytes, "nbytes")
        return self._drive(self._gather(a, n), self)

    async def _gather(self, adr: int, nbytes: int) -> Bytes:
        try:
            if self._check_span(adr, nbytes, "gather", "source"):
                return np.array(
                    await self._guard(
                        "gather", self._aread(adr, nbytes, list(range(self.nr_lanes)))
                    )
                )
        except _Stop:
            pass
        return np.zeros((self.nr_lanes, 0), np.uint8)

    def scatter(self, adr: int | Address, data: Any) -> Awaitable[None]:
        """Write row ``i`` of ``data`` (shape ``(nr_lanes, n)``, or one row for all) to lane
        ``i`` at ``adr``."""
        a = _count(adr, "adr")
        arr = np.asarray(data)
        if arr.ndim != 2 or arr.shape[0] not in (1, self.nr_lanes):
            raise TypeError(f"data must have shape ({self.nr_lanes}, n) or (1, n), not {arr.shape}")
        rows = np.ascontiguousarray(arr).view(np.uint8).reshape(arr.shape[0], -1)
        return self._drive(self._scatter(a, rows), self)

    async def _scatter(self, adr: int, rows: Bytes) -> None:
        try:
            if self._check_span(adr, rows.shape[1], "scatter", "destination"):
                await self._guard("scatter", self._awrite(adr, rows))
        except _Stop:
            pass

    def copy_to(
        self, src_adr: int | Address, dest: Context, dest_adr: int | Address, nbytes: int
    ) -> Awaitable[None]:
        """``umem_copy_to``: ``nbytes`` from ``src_adr`` here to ``dest_adr`` in ``dest``."""
        return copy(self, src_adr, None, dest, dest_adr, None, nbytes, "copy_to")

    def copy_from(
        self, dest_adr: int | Address, src: Context, src_adr: int | Address, nbytes: int
    ) -> Awaitable[None]:
        """``umem_copy_from``: ``nbytes`` from ``src_adr`` in ``src`` to ``dest_adr`` here."""
        return copy(src, src_adr, None, self, dest_adr, None, nbytes, "copy_from")

    def copy_to_safe(
        self,
        src_adr: int | Address,
        src_size: int,
        dest: Context,
        dest_adr: int | Address,
        dest_size: int,
        nbytes: int,
    ) -> Awaitable[None]:
        """``umem_copy_to_safe``: IndexError on the side whose area is smaller than nbytes."""
        return copy(self, src_adr, src_size, dest, dest_adr, dest_size, nbytes, "copy_to_safe")

    def copy_from_safe(
        self,
        dest_adr: int | Address,
        dest_size: int,
        src: Context,
        src_adr: int | Address,
        src_size: int,
        nbytes: int,
    ) -> Awaitable[None]:
        """``umem_copy_from_safe``."""
        return copy(src, src_adr, src_size, self, dest_adr, dest_size, nbytes, "copy_from_safe")

    # ---------------------------------------------------------------------------- connect / sync
    def connect(
        self, src_adr: int | Address, nbytes: int, dest: Context, dest_alignment: int = 0
    ) -> Awaitable[Address]:
        """``umem_connect``: ``src_adr`` itself when both contexts reach each other's
        addresses, both are OK and the alignment fits (zero-copy); otherwise a new block in
        ``dest`` holding a copy. The result is paired with ``src_adr`` (see :meth:`Address.sync`).
        """
        n = _count(nbytes, "nbytes")
        mate = src_adr if isinstance(src_adr, Address) else Address(self, _count(src_adr, "src"), n)
        return mate.connect(dest, n, dest_alignment)

    def disconnect(
        self,
        src_adr: int | Address,
        dest: Context,
        dest_adr: int | Address,
        dest_alignment: int = 0,
    ) -> None:
        """``umem_disconnect``: free the mirror made by :meth:`connect` (nothing if zero-copy)."""
        s, d = _count(src_adr, "src_adr"), _count(dest_adr, "dest_adr")
        if s == d and _mutual(self, dest):
            return
        if _count(dest_alignment, "dest_alignment"):
            dest.aligned_free(d)
        else:
            dest.free(d)

    def sync_to(
        self, src_adr: int | Address, dest: Context, dest_adr: int | Address, nbytes: int
    ) -> Awaitable[None]:
        """``umem_sync_to``: copy here → ``dest`` unless it is the same memory (zero-copy)."""
        return sync(self, src_adr, None, dest, dest_adr, None, nbytes, "sync_to")

    def sync_from(
        self, dest_adr: int | Address, src: Context, src_adr: int | Address, nbytes: int
    ) -> Awaitable[None]:
        """``umem_sync_from``: copy ``src`` → here unless it is the same memory."""
        return sync(src, src_adr, None, self, dest_adr, None, nbytes, "sync_from")

    def sync_to_safe(
        self,
        src_adr: int | Address,
        src_size: int,
        dest: Context,
        dest_adr: int | Address,
        dest_size: int,
        nbytes: int,
    ) -> Awaitable[None]:
        """``umem_sync_to_safe``."""
        return sync(self, src_adr, src_size, dest, dest_adr, dest_size, nbytes, "sync_to_safe")

    def sync_from_safe(
        self,
        dest_adr: int | Address,
        dest_size: int,
        src: Context,
        src_adr: int | Address,
        src_size: int,
        nbytes: int,
    ) -> Awaitable[None]:
        """``umem_sync_from_safe``."""
        return sync(src, src_adr, src_size, self, dest_adr, dest_size, nbytes, "sync_from_safe")

    # ---------------------------------------------------------------------------- helpers
    def _check_span(self, adr: int, nbytes: int, what: str, role: str) -> bool:
        """True if ``[adr, adr + nbytes)`` is live and not empty; a status and :class:`_Stop`
        if it is not live (a zero-byte access is never checked, and moves nothing)."""
        if nbytes < 0:
            raise self._fail(StatusType.ValueError, f"{what}: nbytes {nbytes} is negative")
        if nbytes == 0:
            return False
        if self._lookup(adr, nbytes) is not None:
            return True
        holder = self._lookup(adr, 0)
        if holder is None:
            raise self._fail(
                StatusType.ValueError,
                f"{what}: the {role} address {adr:#x} is not inside a live allocation of "
                f"{self.device_name} (freed already, or never allocated in this context)",
            )
        room = holder.end - adr
        raise self._fail(
            StatusType.IndexError,
            f"{what}: {nbytes} bytes at {role} address {adr:#x} overrun its allocation "
            f"[{holder.adr:#x}, {holder.end:#x}); move at most {room} bytes or allocate more",
        )

    def _guard_sync(self, what: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except UmemError as exc:
            raise self._fail(exc.status, f"{what}: {exc.message}") from None
        except DpuError as exc:
            raise self._fail(StatusType.RuntimeError, f"{what}: {exc}") from None

    async def _guard(self, what: str, aw: Awaitable[T]) -> T:
        try:
            return await aw
        except UmemError as exc:
            raise self._fail(exc.status, f"{what}: {exc.message}") from None
        except DpuError as exc:
            raise self._fail(StatusType.RuntimeError, f"{what}: {exc}") from None

    @staticmethod
    def _drive(coro: Coroutine[Any, Any, T], *contexts: Context) -> Awaitable[T]:
        """Run ``coro`` now when every context is host-side; else hand it to the caller."""
        if any(c.is_async for c in contexts):
            return coro
        try:
            coro.send(None)
        except StopIteration as stop:
            return Done(stop.value)
        coro.close()
        raise RuntimeError("a host-side umem context suspended; give it is_async = True")


def _mutual(a: Context, b: Context) -> bool:
    return a.is_accessible_from(b) and b.is_accessible_from(a)


def copy(
    src: Context,
    src_adr: int | Address,
    src_size: int | None,
    dest: Context,
    dest_adr: int | Address,
    dest_size: int | None,
    nbytes: int,
    what: str,
) -> Awaitable[None]:
    """Copy between any two contexts (the ``_safe`` forms pass the area sizes)."""
    if not isinstance(dest, Context):
        raise TypeError(f"dest must be a umem Context, not {type(dest).__name__}")
    if not isinstance(src, Context):
        raise TypeError(f"src must be a umem Context, not {type(src).__name__}")
    s, d, n = _count(src_adr, "src_adr"), _count(dest_adr, "dest_adr"), _count(nbytes, "nbytes")
    ss = None if src_size is None else _count(src_size, "src_size")
    ds = None if dest_size is None else _count(dest_size, "dest_size")
    return Context._drive(_copy(src, s, ss, dest, d, ds, n, what), src, dest)


def sync(
    src: Context,
    src_adr: int | Address,
    src_size: int | None,
    dest: Context,
    dest_adr: int | Address,
    dest_size: int | None,
    nbytes: int,
    what: str,
) -> Awaitable[None]:
    """A copy, or nothing when both sides are the same memory (a zero-copy pair)."""
    same = isinstance(dest, Context) and isinstance(src, Context) and _mutual(src, dest)
    if same and _count(src_adr, "src_adr") == _count(dest_adr, "dest_adr"):
        return Done(None)
    return copy(src, src_adr, src_size, dest, dest_adr, dest_size, nbytes, what)


async def _copy(
    src: Context,
    s: int,
    src_size: int | None,
    dest: Context,
    d: int,
    dest_size: int | None,
    n: int,
    what: str,
) -> None:
    try:
        if src_size is not None and n > src_size:
            raise src._fail(
                StatusType.IndexError,
                f"{what}: {n} bytes do not fit the {src_size}-byte source area at {s:#x}; "
                f"copy at most {src_size} bytes",
            )
        if dest_size is not None and n > dest_size:
            raise dest._fail(
                StatusType.IndexError,
                f"{what}: {n} bytes do not fit the {dest_size}-byte destination area at {d:#x}; "
                f"copy at most {dest_size} bytes",
            )
        if src._check_span(s, n, what, "source") & dest._check_span(d, n, what, "destination"):
            await _move(src, s, dest, d, n, what)
    except _Stop:
        pass


async def _move(src: Context, s: int, dest: Context, d: int, n: int, what: str) -> None:
    k, m = src.nr_lanes, dest.nr_lanes
    src_keys, dest_keys = src._lane_keys(), dest._lane_keys()
    lanes: list[int] | None = None  # the source's reading lane, for every destination lane
    if src_keys is not None and dest_keys is not None and all(key in src_keys for key in dest_keys):
        lanes = [src_keys.index(key) for key in dest_keys]  # each DPU gets its own bytes
    elif m > 1 and k == m:
        lanes = list(range(k))
    elif m > 1 and k > 1:
        raise dest._fail(
            StatusType.NotSupportedError,
            f"{what}: {src!r} has {k} DPUs and {dest!r} has {m}; copies between DPU contexts "
            "pair the DPUs one to one (use sets of the same size, or copy through a Host)",
        )
    data = await src._guard(what, src._aread(s, n, lanes))
    await dest._guard(what, dest._awrite(d, data))


async def read_into(ctx: Context, adr: int, out: Bytes, what: str) -> None:
    """Copy ``len(out)`` bytes at ``adr`` (one lane) into the host array ``out``."""
    if ctx._check_span(adr, len(out), what, "source"):
        out[:] = (await ctx._guard(what, ctx._aread(adr, len(out), None)))[0]


async def write_from(ctx: Context, adr: int, data: Bytes, what: str) -> None:
    """Store the host bytes ``data`` at ``adr`` (every lane)."""
    if ctx._check_span(adr, len(data), what, "destination"):
        await ctx._guard(what, ctx._awrite(adr, data.reshape(1, -1)))
