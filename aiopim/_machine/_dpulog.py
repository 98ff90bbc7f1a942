"""The DPU log: where ``printf`` writes, and the byte format the host decodes.

A message is stored as a format section (``%s`` for every run of plain text, the conversion
specifications otherwise), a NUL, then the arguments in binary (text runs and ``%s`` strings
NUL-terminated, ``%c`` one byte, integers 4 bytes or 8 with ``l``, floating point 8), written
through an 8-byte cache to the MRAM ring ``__stdout_buffer``; the write pointer and the wrapped
flag live in WRAM (``__stdout_buffer_state``). The DPU runtime's ``printf`` encodes
(:func:`encode_printf`), ``dpu_log_read`` decodes (:func:`decode_log`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

STDOUT_BUFFER = "__stdout_buffer"
STDOUT_BUFFER_STATE = "__stdout_buffer_state"


@dataclass(frozen=True)
class LogBuffer:
    """Where a program keeps its log: MRAM ring (address, size) and WRAM state address."""

    buffer: int
    size: int
    state: int


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
