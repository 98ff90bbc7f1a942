"""``dpu_log_read``: the DPU's printf output, read back from its MRAM log buffer."""

from __future__ import annotations

from typing import TextIO

import numpy as np

from .._errors import DpuError, DpuErrorCode
from .._machine._dpu import Dpu
from .._machine._dpulog import STDOUT_BUFFER, decode_log
from .._machine._program import MRAM_BIT
from ._set import DpuSetBase
from ._validate import check_set, check_text_stream

E = DpuErrorCode


def read_log(dpu: Dpu) -> str:
    """``dpulog_read_for_dpu``: the text of ``dpu``'s log buffer."""
    ctx = None if dpu.program is None else dpu.program.log_buffer()
    if ctx is None:
        raise DpuError(
            DpuErrorCode.DPU_ERR_LOG_CONTEXT_MISSING,
            f"DPU {dpu.name}: the program does not use printf (no {STDOUT_BUFFER} symbols)",
        )
    wp, wrapped = (int(x) for x in dpu.wram[ctx.state : ctx.state + 8].view(np.uint32))
    if wrapped:
        raise DpuError(
            DpuErrorCode.DPU_ERR_LOG_BUFFER_TOO_SMALL,
            f"DPU {dpu.name}: the log buffer ({ctx.size} bytes) wrapped; enlarge it "
            "(Program(stdout_buffer_size=...)) or print less",
        )
    return decode_log(dpu.mram.read(ctx.buffer & ~MRAM_BIT, wp).tobytes())


def log_read(dset: DpuSetBase, stream: TextIO | None = None) -> str:
    """``dpu_log_read``: the header and the DPU's printf output, decoded from the program's
    MRAM log buffer (single DPU only). With ``stream``, the header is written first, as the SDK
    does, even when reading the buffer then fails (``DPU_ERR_LOG_*``)."""
    check_set(dset)
    if stream is not None:
        stream = check_text_stream(stream, "stream")
    header = f"=== DPU#0x{dset.dpu_list[0].dpu_id if dset.dpu_list else 0:x} ===\n"
    if stream is not None:
        stream.write(header)
    if not dset.is_single_dpu:
        raise DpuError(E.DPU_ERR_INVALID_DPU_SET, "dpu_log_read needs a single-DPU set")
    text = read_log(dset.dpu_list[0])
    if stream is not None:
        stream.write(text)
    return header + text
