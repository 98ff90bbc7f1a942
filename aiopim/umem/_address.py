"""``umem::Address``: an address that knows its context, size and alignment."""

from __future__ import annotations

from collections.abc import Awaitable, Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from . import _context as C
from ._status import StatusType

if TYPE_CHECKING:
    from ._context import Context

Ownership = Literal["none", "alloc", "aligned", "paired"]


class Address:
    """An address in a context, with the size and alignment of the memory behind it.

    ``ctx.alloc``/``calloc``/``aligned_alloc`` and :meth:`connect` return owning addresses:
    leaving a ``with``/``async with`` block (or :meth:`free`) releases them, and a connected
    address disconnects from its mate, as the C++ destructors do. ``adr + i`` is a non-owning
    address ``i`` bytes further (``i`` bytes smaller). Host addresses are NumPy views
    (:meth:`view`, ``np.asarray(adr)``, ``adr[i]``).

    Calls that move data (:meth:`copy_to`, :meth:`copy_from`, :meth:`set`, :meth:`sync`,
    :meth:`update`, :meth:`connect`, :meth:`read`, :meth:`gather`) return awaitables: awaiting
    is required when a DPU context takes part, optional otherwise (the work is already done).
    An address is itself awaitable (it resolves to itself), so ``await ctx.calloc(…)`` works on
    every context.
    """

    __slots__ = (
        "_mirror_aligned",
        "_own",
        "_released",
        "adr",
        "alignment",
        "ctx",
        "is_null",
        "mate",
        "size",
        "zero_copy",
    )

    def __init__(
        self,
        ctx: Context,
        adr: int,
        size: int = 0,
        alignment: int = 1,
        *,
        own: Ownership = "none",
        mate: Address | None = None,
        zero_copy: bool = False,
    ) -> None:
        self.ctx = ctx
        self.adr = adr
        self.size = size
        self.alignment = alignment
        self.mate = mate
        self.zero_copy = zero_copy
        self.is_null = False
        self._own: Ownership = own
        self._released = False
        self._mirror_aligned = False

    @classmethod
    def null(cls, ctx: Context) -> Address:
        """What a failed allocation returns: false in a boolean context, size 0."""
        a = cls(ctx, 0)
        a.is_null = True
        return a

    # ---------------------------------------------------------------------------- basics
    def __index__(self) -> int:
        return self.adr

    def __int__(self) -> int:
        return self.adr

    def __bool__(self) -> bool:
        return not self.is_null

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Address):
            return self.ctx is other.ctx and self.adr == other.adr
        return NotImplemented

    def __hash__(self) -> int:
        return hash((id(self.ctx), self.adr))

    def __repr__(self) -> str:
        if self.is_null:
            return f"<Address {self.ctx.device_name} null>"
        pair = " paired" if self.mate is not None else ""
        return (
            f"<Address {self.ctx.device_name} {self.adr:#x} size={self.size} "
            f"alignment={self.alignment}{pair}>"
        )

    def __await__(self) -> Generator[Any, None, Address]:
        yield from ()
        return self

    def __add__(self, offset: int) -> Address:
        """A non-owning address ``offset`` bytes further, ``offset`` bytes smaller (an offset
        outside ``0..size`` records an IndexError and is clamped into it)."""
        i = C._count(offset, "offset")
        if i < 0 or i > self.size:
            self.ctx.status.set(
                StatusType.IndexError,
                f"{self!r} + {i}: the offset must be within 0..{self.size} (clamped)",
            )
            i = min(max(i, 0), self.size)
        low = (self.adr + i) & -(self.adr + i) if self.adr + i else self.alignment
        return Address(self.ctx, self.adr + i, max(0, self.size - i), min(self.alignment, low))

    def __mod__(self, alignment: int) -> int:
        return self.adr % C._count(alignment, "alignment")

    def origin(self) -> Address:
        """The start of the memory reserved for this (aligned) address, non-owning."""
        o = self.ctx.aligned_origin(self.adr)
        return Address(self.ctx, o, self.size + (self.adr - o), self.ctx.fundamental_alignment)

    # ---------------------------------------------------------------------------- lifetime
    def free(self) -> None:
        """Release owned memory, or disconnect a connected address (at most once)."""
        if self._released or self.is_null:
            return
        self._released = True
        if self._own == "alloc":
            self.ctx.free(self.adr)
        elif self._own == "aligned":
            self.ctx.aligned_free(self.adr)
        elif self._own == "paired" and not self.zero_copy:
            if self._mirror_aligned:
                self.ctx.aligned_free(self.adr)
            else:
                self.ctx.free(self.adr)

    def __enter__(self) -> Address:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.free()

    async def __aenter__(self) -> Address:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.free()

    def _dead(self, what: str) -> bool:
        if self.is_null:
            self.ctx.status.set(
                StatusType.ValueError,
                f"{what}: null address (its allocation failed; see the earlier message)",
            )
            return True
        if self._released:
            self.ctx.status.set(
                StatusType.ValueError,
                f"{what}: {self.adr:#x} was released (its with block ended or free() was "
                "called); allocate again",
            )
            return True
        return False

    def _n(self, nbytes: int | None, default: int | None = None) -> int:
        """``nbytes`` or the default (this size); a negative count records a ValueError and
        moves nothing."""
        if nbytes is None:
            return self.size if default is None else default
        n = C._count(nbytes, "nbytes")
        if n < 0:
            self.ctx.status.set(StatusType.ValueError, f"nbytes {n} is negative; nothing moved")
            return 0
        return n

    # ---------------------------------------------------------------------------- data
    def copy_to(self, dest: Address | Any, nbytes: int | None = None) -> Awaitable[None]:
        """Copy ``nbytes`` (default: this size) to ``dest``: an address, or a writable host
        buffer (bytearray, NumPy array). Bounds-checked: IndexError on the side too small."""
        n = self._n(nbytes)
        if isinstance(dest, Address):
            if self._dead("copy_to") or dest._dead("copy_to"):
                return C.Done(None)
            return C.copy(
                self.ctx, self.adr, self.size, dest.ctx, dest.adr, dest.size, n, "copy_to"
            )
        out = C.host_bytes(dest, writable=True, name="dest")
        if self._dead("copy_to"):
            return C.Done(None)
        return self.ctx._drive(self._read_into(out, n), self.ctx)

    async def _read_into(self, out: npt.NDArray[np.uint8], n: int) -> None:
        try:
            if n > self.size or n > len(out):
                small = "source address" if n > self.size else "destination buffer"
                raise self.ctx._fail(
                    StatusType.IndexError,
                    f"copy_to: {n} bytes do not fit the {small} ({self.size} bytes at the "
                    f"address, {len(out)} in the buffer); copy at most "
                    f"{min(self.size, len(out))}",
                )
            await C.read_into(self.ctx, self.adr, out[:n], "copy_to")
        except C._Stop:
            pass

    def copy_from(self, src: Address | Any, nbytes: int | None = None) -> Awaitable[None]:
        """Copy ``nbytes`` from ``src`` (an address, or bytes-like host data; default: its
        whole size) to this address. Bounds-checked like :meth:`copy_to`."""
        if isinstance(src, Address):
            n = self._n(nbytes, src.size)
            if self._dead("copy_from") or src._dead("copy_from"):
                return C.Done(None)
            return C.copy(src.ctx, src.adr, src.size, self.ctx, self.adr, self.size, n, "copy_from")
        data = C.host_bytes(src, writable=False, name="src")
        n = self._n(nbytes, len(data))
        if self._dead("copy_from"):
            return C.Done(None)
        return self.ctx._drive(self._write_from(data, n), self.ctx)

    async def _write_from(self, data: npt.NDArray[np.uint8], n: int) -> None:
        try:
            if n > self.size or n > len(data):
                small = "destination address" if n > self.size else "source data"
                raise self.ctx._fail(
                    StatusType.IndexError,
                    f"copy_from: {n} bytes do not fit the {small} ({self.size} bytes at the "
                    f"address, {len(data)} given); copy at most {min(self.size, len(data))}",
                )
            await C.write_from(self.ctx, self.adr, data[:n], "copy_from")
        except C._Stop:
            pass

    def read(self, nbytes: int | None = None) -> Awaitable[bytes]:
        """The first ``nbytes`` (default: all) as ``bytes`` (one DPU of a set)."""
        out = np.zeros(self._n(nbytes), np.uint8)

        async def go() -> bytes:
            await self.copy_to(out, len(out))
            return out.tobytes()

        return self.ctx._drive(go(), self.ctx)

    def gather(self, nbytes: int | None = None) -> Awaitable[npt.NDArray[np.uint8]]:
        """``nbytes`` (default: all) from every lane: shape ``(ctx.nr_lanes, nbytes)``."""
        if self._dead("gather"):
            return C.Done(np.zeros((self.ctx.nr_lanes, 0), np.uint8))
        return self.ctx.gather(self.adr, self._n(nbytes))

    def set(self, c: int, nbytes: int | None = None) -> Awaitable[None]:
        """Fill ``nbytes`` (default: all) with the byte ``c``."""
        if self._dead("set"):
            return C.Done(None)
        return self.ctx.set_safe(self.adr, self.size, c, self._n(nbytes))

    # ---------------------------------------------------------------------------- connect
    def connect(
        self, dest: Context, nbytes: int | None = None, alignment: int = 0
    ) -> Awaitable[Address]:
        """A paired address in ``dest`` holding this data (``umem_connect``).

        Zero-copy (the same address) when both contexts reach each other's addresses, both
        are OK and ``alignment`` divides the address; else a new block of ``nbytes`` in
        ``dest`` aligned to ``alignment``, filled by a copy. A failure gives a null address.
        """
        if not isinstance(dest, C.Context):
            raise TypeError(f"dest must be a umem Context, not {type(dest).__name__}")
        n, a = self._n(nbytes), C._count(alignment, "alignment")
        result = self.ctx._drive(self._connect(dest, n, a), self.ctx, dest)
        return result.value if isinstance(result, C.Done) else result

    async def _connect(self, dest: Context, n: int, a: int) -> Address:
        src = self.ctx
        if self._dead("connect"):
            return Address.null(dest)
        if a < 0 or a & (a - 1):
            dest.status.set(
                StatusType.ValueError, f"connect: alignment {a} is not 0 or a power of two"
            )
            return Address.null(dest)
        if C._mutual(src, dest) and src.is_ok() and dest.is_ok() and (a == 0 or self.adr % a == 0):
            return Address(
                dest, self.adr, n, max(a, self.alignment), own="paired", mate=self, zero_copy=True
            )
        mirror = dest.aligned_alloc(a, n) if a else dest.alloc(n)
        if not mirror:
            return mirror
        try:
            if src._check_span(self.adr, n, "connect", "source"):
                await C._move(src, self.adr, dest, mirror.adr, n, "connect")
        except C._Stop:
            mirror.free()
            return Address.null(dest)
        pair = Address(dest, mirror.adr, n, mirror.alignment, own="paired", mate=self)
        pair._mirror_aligned = bool(a)
        return pair

    def disconnect(self) -> None:
        """Release the mirror made by :meth:`connect` (same as :meth:`free`)."""
        self.free()

    def sync(self, nbytes: int | None = None) -> Awaitable[None]:
        """Push ``nbytes`` (default: all) to the mate (no-op for a zero-copy pair)."""
        mate = self._mate("sync")
        if mate is None:
            return C.Done(None)
        return self.sync_to(mate, nbytes)

    def update(self, nbytes: int | None = None) -> Awaitable[None]:
        """Pull ``nbytes`` (default: all) from the mate (no-op for a zero-copy pair)."""
        mate = self._mate("update")
        if mate is None:
            return C.Done(None)
        return self.sync_from(mate, nbytes)

    def _mate(self, what: str) -> Address | None:
        if self.mate is None:
            self.ctx.status.set(
                StatusType.ValueError,
                f"{what}: {self.adr:#x} is not connected; make the pair with connect()",
            )
        return self.mate

    def sync_to(self, dest: Address, nbytes: int | None = None) -> Awaitable[None]:
        """``umem_sync_to_safe`` from here to ``dest``."""
        if self._dead("sync_to") or dest._dead("sync_to"):
            return C.Done(None)
        return C.sync(
            self.ctx, self.adr, self.size, dest.ctx, dest.adr, dest.size, self._n(nbytes), "sync"
        )

    def sync_from(self, src: Address, nbytes: int | None = None) -> Awaitable[None]:
        """``umem_sync_from_safe`` from ``src`` to here."""
        if self._dead("sync_from") or src._dead("sync_from"):
            return C.Done(None)
        return C.sync(
            src.ctx, src.adr, src.size, self.ctx, self.adr, self.size, self._n(nbytes), "update"
        )

    # ---------------------------------------------------------------------------- host views
    def view(self, dtype: npt.DTypeLike = np.uint8) -> npt.NDArray[Any]:
        """A writable NumPy view of a host address (TypeError for other contexts)."""
        if self._dead("view"):
            raise ValueError(self.ctx.get_message().rsplit("\n", 1)[-1])
        arr = self.ctx._host_view(self.adr, self.size)
        if arr is None:
            raise TypeError(
                f"a {self.ctx.device_name} address has no host view; connect it to a "
                "umem.Host context and use the paired address"
            )
        dt = np.dtype(dtype)
        return arr[: len(arr) - len(arr) % dt.itemsize].view(dt)

    def __array__(
        self, dtype: npt.DTypeLike | None = None, copy: bool | None = None
    ) -> npt.NDArray[Any]:
        arr = self.view()
        return arr if dtype is None else arr.astype(dtype, copy=bool(copy))

    def __buffer__(self, flags: int) -> memoryview:
        return self.view().data

    def __getitem__(self, index: Any) -> Any:
        return self.view()[index]

    def __setitem__(self, index: Any, value: Any) -> None:
        self.view()[index] = value
