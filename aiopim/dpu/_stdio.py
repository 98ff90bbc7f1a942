"""``printf`` for Python kernels, as the runtime's ``stdio.c`` writes it: the message is
encoded in the DPU log format (:mod:`aiopim._machine._dpulog`) into the MRAM ring
``__stdout_buffer``, whose state in WRAM is zeroed at every boot."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .. import timing
from .._machine._dpulog import STDOUT_BUFFER, STDOUT_BUFFER_STATE, encode_printf
from .._machine._program import MRAM_BIT
from ._base import TaskletBase
from ._runner import DpuFault

if TYPE_CHECKING:
    from .._machine._dpu import Dpu
    from .._machine._dpulog import LogBuffer

#: software fault of a ``printf`` that overwrote its own start (dpufault.h)
FAULT_PRINTF_OVERFLOW = 5
#: ``__stdout_buffer`` size when the program does not override it (stdio.c)
DEFAULT_STDOUT_BUFFER_SIZE = 1 << 20
#: bytes moved per flush of the printf cache (``STDOUT_CACHE_BUFFER_SIZE``)
STDOUT_CACHE_SIZE = 8


class StdioMixin(TaskletBase):
    """``printf`` for :class:`Tasklet`."""

    def printf(self, fmt: str, *args: Any) -> None:
        """``printf`` into ``__stdout_buffer`` (thread-safe: a message is written whole).
        The 8-byte MRAM writes are charged at this tasklet's next runtime call. Fault 5 if this
        one message wraps past its own start."""
        ctx = self.program.log_buffer()
        if ctx is None:
            raise RuntimeError(
                f"printf: {self.program!r} does not link stdio (no {STDOUT_BUFFER} and "
                f"{STDOUT_BUFFER_STATE} symbols)"
            )
        payload = encode_printf(fmt, args)
        # the closing flush zero-fills the cache and writes it even when it is empty
        data = payload + bytes(STDOUT_CACHE_SIZE - len(payload) % STDOUT_CACHE_SIZE)
        state = self.view(ctx.state, np.uint32, 2)
        initial = int(state[0])
        wraps = 0
        mram = self.dpu.mram
        base = ctx.buffer & ~MRAM_BIT
        for k in range(0, len(data), STDOUT_CACHE_SIZE):
            wp = int(state[0])
            nxt = wp + STDOUT_CACHE_SIZE
            if nxt >= ctx.size:
                nxt = 0
                state[1] = 1
                wraps += 1
            state[0] = nxt
            mram.write(base + wp, np.frombuffer(data[k : k + STDOUT_CACHE_SIZE], np.uint8))
            # a new list: the tasklet's first one is shared (and empty)
            self._deferred_dma = [*self._deferred_dma, STDOUT_CACHE_SIZE]
        self._pending += timing.PRINTF_INSTRUCTIONS + timing.PRINTF_PER_BYTE_INSTRUCTIONS * len(
            payload
        )
        if wraps > 1 or (wraps == 1 and int(state[0]) > initial):
            raise DpuFault("printf message is bigger than the printf buffer", FAULT_PRINTF_OVERFLOW)


def reset_stdio(dpu: Dpu, ctx: LogBuffer | None) -> None:
    """Bootstrap: zero ``__stdout_buffer_state`` (write pointer and wrapped flag)."""
    if ctx is not None:
        dpu.wram[ctx.state : ctx.state + 8] = 0
