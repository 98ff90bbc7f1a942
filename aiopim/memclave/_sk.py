"""Sealed subkernels (``.sk``): the 64-byte header, sealing, verification, the banned scan.

Layout: header (64 B), text (IRAM image, padded to 2048 B), data (WRAM image, padded to
2048 B). Header fields, little-endian: magic ``A5A5A5A5`` (0), MAC (4, 16 B), IV (20, 12 B),
``size_aad`` (32), ``size`` (36), text size (40) and data size (44) in 2048-byte units.
ChaCha20-Poly1305 encrypts bytes ``[size_aad, size)`` with bytes ``[0, size_aad)`` as
associated data, computed with the MAC and IV fields zeroed.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._coreapi import (
    FIELD_NAMES,
    SIG_OPERANDS,
    DpuError,
    DpuErrorCode,
    DpuProgram,
    MemorySpace,
    decode,
    load_elf,
    space_offset,
)
from ._crypto import KEY_BYTES, NONCE_BYTES, TAG_BYTES, aead_open, aead_seal
from ._errors import VudError

SK_MAGIC = b"\xa5\xa5\xa5\xa5"
SK_HEADER_BYTES = 64
SK_UNIT = 2048
MODES = ("auth", "data", "all")
_FIELDS = struct.Struct("<III")  # size_aad, size, text units, data units at 32..48

#: code identities of programs aiopim can run, by digest of their text and data
_CATALOG: dict[bytes, DpuProgram] = {}


def _pad(data: bytes) -> bytes:
    return data + bytes(-len(data) % SK_UNIT)


def program_sections(program: DpuProgram) -> tuple[bytes, bytes]:
    """``(text, data)``: the IRAM and WRAM images a trusted loader writes.

    A Python kernel has no instructions; its text is a tag naming it, so that two kernels with
    the same data are still different subkernels.
    """
    iram: list[tuple[int, bytes]] = []
    wram: list[tuple[int, bytes]] = []
    for im in program.images():
        space = MemorySpace.of(im.address)
        if space is MemorySpace.IRAM:
            iram.append((space_offset(im.address), im.data))
        elif space is MemorySpace.WRAM:
            wram.append((im.address, im.data))

    def flat(parts: list[tuple[int, bytes]]) -> bytes:
        end = max((off + len(d) for off, d in parts), default=0)
        out = bytearray(end)
        for off, d in parts:
            out[off : off + len(d)] = d
        return bytes(out)

    text = flat(iram) or f"aiopim python kernel {program.name}".encode()
    return text, flat(wram)


def build_sk(program: DpuProgram, mode: str = "all") -> bytes:
    """The plaintext ``.sk`` of ``program`` (MAC and IV zero), registered for loading."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    text, data = (_pad(s) for s in program_sections(program))
    size = SK_HEADER_BYTES + len(text) + len(data)
    size_aad = {"auth": size, "data": SK_HEADER_BYTES + len(text), "all": SK_HEADER_BYTES}[mode]
    header = bytearray(SK_HEADER_BYTES)
    header[0:4] = SK_MAGIC
    units = (len(text) // SK_UNIT, len(data) // SK_UNIT)
    struct.pack_into("<IIII", header, 32, size_aad, size, *units)
    _CATALOG[hashlib.sha256(text + data).digest()] = program
    return bytes(header) + text + data


def resolve_program(source: object) -> DpuProgram:
    """A DPU program from a path to a DPU ELF (with a bound model) or a program object."""
    if isinstance(source, DpuProgram):
        return source
    if isinstance(source, str | os.PathLike):
        return load_elf(Path(source))
    kind = type(source).__name__
    raise TypeError(f"path must be a path to a DPU ELF or a DpuProgram, not {kind}")


def sk_from_program(source: object, auth_only: bool = False) -> tuple[VudError, bytes]:
    """``vud_sk_from_elf``: ``(VUD_OK, sk)`` or ``(VUD_SK_NOT_FOUND, b"")``."""
    err, sk, _ = read_sk(source, auth_only)
    return err, sk


def read_sk(source: object, auth_only: bool = False) -> tuple[VudError, bytes, str]:
    """:func:`sk_from_program` and, when it fails, why: a file that cannot be read, or one
    that is not a DPU ELF file."""
    try:
        program = resolve_program(source)
    except DpuError as exc:
        reason = (exc.detail or str(exc)).removeprefix(f"{source}: ")
        if exc.code is DpuErrorCode.DPU_ERR_ELF_INVALID_FILE:
            why = f"subkernel {str(source)!r} is not a DPU ELF file ({reason})"
        else:
            why = f"cannot read subkernel {str(source)!r} ({reason})"
        return VudError.VUD_SK_NOT_FOUND, b"", why
    return VudError.VUD_OK, build_sk(program, "auth" if auth_only else "all"), ""


@dataclass(frozen=True)
class SkHeader:
    """The decoded header of a ``.sk`` image."""

    mac: bytes
    iv: bytes
    size_aad: int
    size: int
    text_units: int
    data_units: int


def parse_header(sk: bytes) -> SkHeader | None:
    """The header, or None when it is malformed (bad magic, inconsistent sizes)."""
    if len(sk) < SK_HEADER_BYTES or sk[0:4] != SK_MAGIC:
        return None
    size_aad, size, tu, du = struct.unpack_from("<IIII", sk, 32)
    if size != SK_HEADER_BYTES + (tu + du) * SK_UNIT or not SK_HEADER_BYTES <= size_aad <= size:
        return None
    return SkHeader(bytes(sk[4:20]), bytes(sk[20:32]), size_aad, size, tu, du)


def _zeroed(sk: bytes | bytearray) -> bytearray:
    out = bytearray(sk)
    out[4:32] = bytes(28)
    return out


def seal(sk: bytearray, key: bytes, iv: bytes) -> VudError:
    """``vud_enc_auth_sk``: seal ``sk`` in place under ``key`` with nonce ``iv``."""
    head = parse_header(bytes(sk))
    if head is None or len(sk) < head.size or len(key) != KEY_BYTES or len(iv) != NONCE_BYTES:
        return VudError.VUD_SK_TAG
    plain = _zeroed(sk[: head.size])
    sealed = aead_seal(key, iv, bytes(plain[head.size_aad :]), bytes(plain[: head.size_aad]))
    sk[head.size_aad : head.size] = sealed[:-TAG_BYTES]
    sk[4:20] = sealed[-TAG_BYTES:]
    sk[20:32] = iv
    return VudError.VUD_OK


@dataclass(frozen=True)
class Opened:
    """A verified subkernel: its sections and the program that runs it."""

    text: bytes
    data: bytes
    program: DpuProgram | None


def open_sealed(sk: bytes, key: bytes | None) -> Opened | str:
    """Verify and decrypt ``sk`` under ``key``: an :class:`Opened`, or why it was rejected."""
    head = parse_header(sk)
    if head is None:
        return "malformed subkernel header"
    if len(sk) < head.size:
        return "subkernel is truncated"
    if key is None:
        return "no user key is installed"
    body = _zeroed(sk[: head.size])
    aad = bytes(body[: head.size_aad])
    plain = aead_open(key, head.iv, bytes(body[head.size_aad :]) + head.mac, aad)
    if plain is None:
        return "authentication failed (wrong key or modified bytes)"
    full = bytes(body[: head.size_aad]) + plain
    text_end = SK_HEADER_BYTES + head.text_units * SK_UNIT
    text, data = full[SK_HEADER_BYTES:text_end], full[text_end:]
    return Opened(text, data, _CATALOG.get(hashlib.sha256(text + data).digest()))


# --- the loader's banned-instruction scan ---------------------------------------------------------


@dataclass(frozen=True)
class DecodedInstruction:
    """What the scan needs to know of one instruction: its mnemonic and the registers it writes."""

    mnemonic: str
    writes: frozenset[str] = frozenset()


#: decodes one 64-bit IRAM word; None when the word is not a valid instruction
InstructionDecoder = Callable[[int], DecodedInstruction | None]

#: instructions a subkernel may not contain: they would let it control other threads or
#: load microcode-like state
BANNED_MNEMONICS = frozenset({"boot", "resume", "clr_run", "ldmai"})
#: privileged registers of the enclave runtime (r20/r21, and d20 which pairs them)
BANNED_WRITES = frozenset({"r20", "r21", "d20"})


def isa_instruction(word: int) -> DecodedInstruction | None:
    """The scan's view of one IRAM word, decoded with :mod:`aiopim.isa`: its mnemonic and the
    registers it writes (None when the word is not an instruction)."""
    ins = decode(word) if 0 <= word < 1 << 48 else None
    if ins is None:
        return None
    values = ins.values()
    writes: set[str] = set()
    for op in SIG_OPERANDS[ins.sig]:
        name, field = op[0], op[2]
        if field < 0 or name not in ("rc", "sc", "dc"):
            continue  # only the destination operands write registers
        reg = values[FIELD_NAMES[field]]
        if reg >= 24:
            continue  # constant registers are read-only
        if name == "dc":
            writes |= {f"d{reg}", f"r{reg}", f"r{reg + 1}"}
        else:
            writes.add(f"r{reg}")
    return DecodedInstruction(ins.mnemonic, frozenset(writes))


def scan_banned_instructions(
    words: Sequence[int] | np.ndarray, decode: InstructionDecoder
) -> list[tuple[int, str]]:
    """Every ``(index, reason)`` of ``words`` (IRAM words) that the trusted loader refuses."""
    found: list[tuple[int, str]] = []
    for i, word in enumerate(words):
        ins = decode(int(word))
        if ins is None:
            continue
        if ins.mnemonic in BANNED_MNEMONICS:
            found.append((i, f"banned instruction {ins.mnemonic!r}"))
        bad = sorted(ins.writes & BANNED_WRITES)
        if bad:
            found.append((i, f"{ins.mnemonic!r} writes privileged register(s) {', '.join(bad)}"))
    return found
