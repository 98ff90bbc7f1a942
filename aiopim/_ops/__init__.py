"""Layer 3, the SDK semantics: host operations (allocation, load, launch, transfers,
callbacks, WRAM FIFO links) turned into rank jobs. ``aiopim.sdk`` and ``DpuSet`` call these."""

from ._alloc import alloc, free
from ._callback import callback
from ._flags import (
    ALL_RANKS_ID,
    DPU_ALLOCATE_ALL,
    DPU_ASYNCHRONOUS,
    DPU_CALLBACK_ASYNC,
    DPU_CALLBACK_DEFAULT,
    DPU_CALLBACK_NONBLOCKING,
    DPU_CALLBACK_PARALLEL,
    DPU_CALLBACK_SINGLE_CALL,
    DPU_SYNCHRONOUS,
    DPU_XFER_ASYNC,
    DPU_XFER_DEFAULT,
    DPU_XFER_FROM_DPU,
    DPU_XFER_NO_RESET,
    DPU_XFER_PARALLEL,
    DPU_XFER_TO_DPU,
    CallbackMode,
    XferMode,
)
from ._launch import launch, status, sync
from ._load import common_program, get_symbol, load
from ._log import log_read
from ._oplog import OpLog
from ._submit import prepared_buffers
from ._xfer import (
    broadcast_to,
    copy_from,
    host_view,
    prepare_xfer,
    push_xfer,
    require_parallel_wram,
)

__all__ = [
    "ALL_RANKS_ID",
    "DPU_ALLOCATE_ALL",
    "DPU_ASYNCHRONOUS",
    "DPU_CALLBACK_ASYNC",
    "DPU_CALLBACK_DEFAULT",
    "DPU_CALLBACK_NONBLOCKING",
    "DPU_CALLBACK_PARALLEL",
    "DPU_CALLBACK_SINGLE_CALL",
    "DPU_SYNCHRONOUS",
    "DPU_XFER_ASYNC",
    "DPU_XFER_DEFAULT",
    "DPU_XFER_FROM_DPU",
    "DPU_XFER_NO_RESET",
    "DPU_XFER_PARALLEL",
    "DPU_XFER_TO_DPU",
    "CallbackMode",
    "OpLog",
    "XferMode",
    "alloc",
    "broadcast_to",
    "callback",
    "common_program",
    "copy_from",
    "free",
    "get_symbol",
    "host_view",
    "launch",
    "load",
    "log_read",
    "prepare_xfer",
    "prepared_buffers",
    "push_xfer",
    "require_parallel_wram",
    "status",
    "sync",
]
