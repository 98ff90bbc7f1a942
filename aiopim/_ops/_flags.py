"""The SDK's flag values (``dpu.h``) and the options they stand for.

``aiopim.sdk`` decodes C flags into these options once, at the call; ``DpuSet`` builds them from
keywords; the operations and the rank see only the options.
"""

from __future__ import annotations

from dataclasses import dataclass

DPU_ASYNCHRONOUS = 0
DPU_SYNCHRONOUS = 1
DPU_XFER_TO_DPU = 0
DPU_XFER_FROM_DPU = 1
DPU_XFER_DEFAULT = 0
DPU_XFER_NO_RESET = 1
DPU_XFER_ASYNC = 2
DPU_XFER_PARALLEL = 4
DPU_CALLBACK_DEFAULT = 0
DPU_CALLBACK_ASYNC = 1
DPU_CALLBACK_NONBLOCKING = 2
DPU_CALLBACK_SINGLE_CALL = 4
DPU_CALLBACK_PARALLEL = 8
DPU_ALLOCATE_ALL = 0xFFFFFFFF
ALL_RANKS_ID = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class XferMode:
    """How a transfer runs: ``wait`` for it to end (no ``DPU_XFER_ASYNC``), ``parallel`` with
    the running DPUs (``DPU_XFER_PARALLEL``), ``reset`` the prepared buffers afterwards (no
    ``DPU_XFER_NO_RESET``)."""

    wait: bool = True
    parallel: bool = False
    reset: bool = True

    @classmethod
    def from_flags(cls, flags: int) -> XferMode:
        """Decode ``dpu_xfer_flags_t`` bits."""
        return cls(
            wait=not flags & DPU_XFER_ASYNC,
            parallel=bool(flags & DPU_XFER_PARALLEL),
            reset=not flags & DPU_XFER_NO_RESET,
        )

    @property
    def flags(self) -> int:
        """The SDK flag bits (what traces show)."""
        return (
            (0 if self.wait else DPU_XFER_ASYNC)
            | (DPU_XFER_PARALLEL if self.parallel else 0)
            | (0 if self.reset else DPU_XFER_NO_RESET)
        )


@dataclass(frozen=True, slots=True)
class CallbackMode:
    """How a callback runs: ``wait`` for it (no ``DPU_CALLBACK_ASYNC``), ``blocking`` the rank
    while it runs (no ``DPU_CALLBACK_NONBLOCKING``), once for the whole set (``single_call``),
    alongside running DPUs (``parallel``)."""

    wait: bool = True
    blocking: bool = True
    single_call: bool = False
    parallel: bool = False

    @classmethod
    def from_flags(cls, flags: int) -> CallbackMode:
        """Decode ``dpu_callback_flags_t`` bits."""
        return cls(
            wait=not flags & DPU_CALLBACK_ASYNC,
            blocking=not flags & DPU_CALLBACK_NONBLOCKING,
            single_call=bool(flags & DPU_CALLBACK_SINGLE_CALL),
            parallel=bool(flags & DPU_CALLBACK_PARALLEL),
        )

    @property
    def flags(self) -> int:
        """The SDK flag bits (what traces show)."""
        return (
            (0 if self.wait else DPU_CALLBACK_ASYNC)
            | (0 if self.blocking else DPU_CALLBACK_NONBLOCKING)
            | (DPU_CALLBACK_SINGLE_CALL if self.single_call else 0)
            | (DPU_CALLBACK_PARALLEL if self.parallel else 0)
        )
