"""``printf`` into the MRAM log buffer and its host-side reader ``dpu_log_read`` (spec §5.10).

The DPU side follows the runtime's ``stdio.c``: a message is stored as a format section
(``%s`` for every run of plain text, the conversion specifications otherwise), a NUL, then the
arguments in binary (text runs and ``%s`` strings NUL-terminated, ``%c`` one byte, integers 4
bytes or 8 with ``l``, floating point 8), written through an 8-byte cache to the ring
``__stdout_buffer``; the write pointer and the wrapped flag live in WRAM
(``__stdout_buffer_state``) and are zeroed at every boot. The host side follows ``dpu_log.c``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import timing
from .._errors import DpuError, DpuErrorCode
from .._machine._program import MRAM_BIT
from ._base import TaskletBase
from ._runner import DpuFault

if TYPE_CHECKING:
    from .._machine._dpu import Dpu

#: software fault of a ``printf`` that overwrote its own start (dpufault.h)
FAULT_PRINTF_OVERFLOW = 5
#: ``__stdout_buffer`` size when the program does not override it (stdio.c)
DEFAULT_STDOUT_BUFFER_SIZE = 1 << 20
#: bytes moved per flush of the printf cache (``STDOUT_CACHE_BUFFER_SIZE``)
STDOUT_CACHE_SIZE = 8

STDOUT_BUFFER = "__stdout_buffer"
STDOUT_BUFFER_STATE = "__stdout_buffer_state"


@dataclass(frozen=True)
class StdioContext:
    """Where a program keeps its log: MRAM buffer (address, size) and WRAM state address."""

    buffer: int
    size: int
    state: int


def stdio_context(program: object) -> StdioContext | None:
    """The log context of a loaded program, or None if it does not link stdio."""
    from ._program import Program

    if isinstance(program, Program):
        return program.stdio_context()
    lookup = getattr(program, "symbol", None)
    if lookup is None:
        return None
    try:
        buf, state = lookup(STDOUT_BUFFER), lookup(STDOUT_BUFFER_STATE)
    except DpuError:
        return None
    return StdioContext(int(buf.address), int(buf.size), int(state.address))


def _is_letter(c: int) -> bool:
    return 65 <= c <= 90 or 97 <= c <= 122


def encode_printf(fmt: str, args: tuple[Any, ...]) -> bytes:
    """The bytes ``printf(fmt, args...)`` appends to the log (before the cache padding)."""
    f = fmt.encode()
    section = bytearray()  # the format section: "%s" per text run, the specifications
    values = bytearray()  # then the text runs and the arguments, in order
    i, in_text, arg = 0, False, 0
    while i < len(f):
        c = f[i]
        if c == 0x25 and i + 1 < len(f) and f[i + 1] != 0x25:  # '%', not '%%'
            if in_text:
                values.append(0)
                in_text = False
            section.append(0x25)
            wide = False
            i += 1
            while i < len(f):
                c = f[i]
                if c == 0x6C:  # 'l'
                    section.append(c)
                    wide = True
                elif c in (0x4C, 0x7A):  # 'L', 'z' dropped ('L' still widens the argument)
                    wide = wide or c == 0x4C
                elif c == 0x69:  # 'i' -> 'd'
                    section.append(0x64)
                    break
                else:
                    section.append(c)
                    if _is_letter(c):
                        break
                i += 1
            conv = chr(f[i]) if i < len(f) else ""
            if arg >= len(args):
                raise TypeError(f"printf({fmt!r}): not enough arguments")
            value = args[arg]
            arg += 1
            if conv == "s":
                data = value if isinstance(value, bytes) else str(value).encode()
                values += data.split(b"\0", 1)[0] + b"\0"
            elif conv == "c":
                values.append((ord(value) if isinstance(value, str) else int(value)) & 0xFF)
            elif conv in "feEgG":
                values += struct.pack("<d", float(value))
            else:
                n = 8 if wide else 4
                values += (int(value) & ((1 << (8 * n)) - 1)).to_bytes(n, "little")
        elif c == 0x25 and i + 1 >= len(f):
            break
        else:
            if c == 0x25:
                i += 1  # '%%' is one plain '%'
            if not in_text:
                section += b"%s"
                in_text = True
            values.append(c)
        i += 1
    if in_text:
        values.append(0)
    return bytes(section) + b"\0" + bytes(values)


class StdioMixin(TaskletBase):
    """``printf`` for :class:`Tasklet`."""

    def printf(self, fmt: str, *args: Any) -> None:
        """``printf`` into ``__stdout_buffer`` (thread-safe: a message is written whole).
        The 8-byte MRAM writes are charged at this tasklet's next runtime call. Fault 5 if this
        one message wraps past its own start."""
        ctx = stdio_context(self.program)
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
            self._deferred_dma.append(STDOUT_CACHE_SIZE)
        self._pending += timing.PRINTF_INSTRUCTIONS + timing.PRINTF_PER_BYTE_INSTRUCTIONS * len(
            payload
        )
        if wraps > 1 or (wraps == 1 and int(state[0]) > initial):
            raise DpuFault("printf message is bigger than the printf buffer", FAULT_PRINTF_OVERFLOW)


def reset_stdio(dpu: Dpu, program: object) -> None:
    """Bootstrap: zero ``__stdout_buffer_state`` (write pointer and wrapped flag)."""
    ctx = stdio_context(program)
    if ctx is not None:
        dpu.wram[ctx.state : ctx.state + 8] = 0


# --- host side: dpu_log_read -------------------------------------------------------------------
def _c_format(spec: str, value: Any, wide: bool) -> str:
    """Format one value as the C library would for ``spec``."""
    conv = spec[-1]
    flags = "".join(ch for ch in spec[1:-1] if ch not in "lhLzjtq")
    bits = 64 if wide else 32
    if conv == "p":
        v = int(value) & ((1 << bits) - 1)
        return str(("%" + flags + "s") % ("(nil)" if v == 0 else f"0x{v:x}"))
    if conv in "uxXo":
        value = int(value) & ((1 << bits) - 1)
        conv = "d" if conv == "u" else conv
    elif conv == "i":
        conv = "d"
    try:
        return str(("%" + flags + conv) % value)
    except (TypeError, ValueError):
        return spec


def decode_log(data: bytes) -> str:
    """Render a log buffer as ``dpulog_read_and_display_contents_of`` does."""
    out: list[str] = []
    pos, end = 0, len(data)
    while True:
        start = data.find(b"%", pos)
        if start < 0:
            return "".join(out)
        nul = data.find(b"\0", start)
        if nul < 0:
            return "".join(out)
        section = data[start:nul].decode("latin-1")
        specs = ["%" + s for s in section.split("%")[1:]]
        pos = nul + 1
        for spec in specs:
            conv = spec[-1] if spec else ""
            if conv == "s":
                stop = data.find(b"\0", pos)
                stop = end if stop < 0 else stop
                out.append(_c_format(spec, data[pos:stop].decode("utf-8", "replace"), False))
                pos = stop + 1
            elif conv == "c":
                out.append(_c_format(spec, data[pos] if pos < end else 0, False))
                pos += 1
            elif conv == "b":
                (v,) = struct.unpack_from("<I", data.ljust(pos + 4, b"\0"), pos)
                out.append("".join(str((v >> bit) & 1) for bit in range(32)))
                pos += 4
            elif conv in "dixXopu":
                wide = "l" in spec[:-1]
                n = 8 if wide else 4
                v = int.from_bytes(data[pos : pos + n].ljust(n, b"\0"), "little", signed=True)
                out.append(_c_format(spec, v, wide))
                pos += n
            elif conv in "eEf":
                (d,) = struct.unpack_from("<d", data.ljust(pos + 8, b"\0"), pos)
                out.append(_c_format(spec, d, False))
                pos += 8
            else:  # unsupported (g, G, a, ...): the SDK prints the specification itself
                out.append(spec)
                pos += 4


def read_log(dpu: Dpu) -> str:
    """``dpulog_read_for_dpu``: the text of ``dpu``'s log buffer."""
    ctx = None if dpu.program is None else stdio_context(dpu.program)
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
