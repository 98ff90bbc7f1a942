"""Exact decoder and encoder of DPU instruction words, and the flat decoded program.

A DPU instruction is a 48-bit word. Each of the 973 encodable *signatures* (``keyword:form``,
e.g. ``add:rrici``) owns a set of words: fixed opcode bits, operand fields spread over one or
more bit pieces, and sometimes restrictions on the values a field may take. A word belongs to
at most one signature; a word that belongs to none is *undecodable*. Two kinds of decodable
words are *illegal*: a condition code that the signature's condition map does not name, and
an odd register-pair number (``d1``, ``d3``…) in a 5-bit pair field. The toolchain never emits
either; an interpreter must fault on them.

Decoded program layout (:func:`decode_program`), for ``n`` words:

* ``sig``: ``int32[n]``, the signature index (into the ``SIG_*`` tables of
  :mod:`aiopim.isa._tables`), ``-1`` for an undecodable word;
* ``status``: ``int8[n]``: ``OK`` (0), ``UNDECODABLE`` (1), ``ILLEGAL_CONDITION`` (2),
  ``ILLEGAL_PAIR`` (3);
* ``values``: ``int64[n, 12]``, one column per field name of ``FIELD_NAMES`` (``rc ra rb dc db
  cc imm off pc shift endian immDma``). A column holds the *operand value*: sign-extended for
  signed immediates and offsets, the plain code for registers (0-23, 24-31 for the constant
  registers), conditions and the endianness, the instruction index for ``pc``. Implicit fields
  (e.g. the ``ra`` that ``fault`` or ``stop`` fix at 24) hold their forced value; fields the
  signature does not have are 0.

All tables are tuples of ints, so an interpreter can turn them into NumPy arrays once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from functools import cached_property
from typing import Final

import numpy as np
import numpy.typing as npt

from . import _tables as T

__all__ = [
    "FIELD_NAMES",
    "NFIELDS",
    "DecodeStatus",
    "DecodedProgram",
    "EncodeError",
    "Instruction",
    "decode",
    "decode_program",
    "encode",
    "signature_index",
]

FIELD_NAMES: Final = T.FIELD_NAMES
NFIELDS: Final = len(T.FIELD_NAMES)
NSIGS: Final = len(T.SIG_KEYWORD)
WORD_MASK: Final = (1 << 48) - 1

#: the twelve word bits that select the first-level decode bucket
KEY_BITS: Final = (16, 22, 25, 28, 29, 30, 31, 42, 44, 45, 46, 47)
F_CC: Final = FIELD_NAMES.index("cc")
F_DC: Final = FIELD_NAMES.index("dc")
F_DB: Final = FIELD_NAMES.index("db")


class DecodeStatus(IntEnum):
    """What :func:`decode_program` found for one word."""

    OK = 0
    UNDECODABLE = 1
    ILLEGAL_CONDITION = 2
    ILLEGAL_PAIR = 3


class EncodeError(ValueError):
    """An instruction whose fields cannot be encoded (value out of range or not allowed)."""


def _key(word: int) -> int:
    k = 0
    for i, b in enumerate(KEY_BITS):
        k |= ((word >> b) & 1) << i
    return k


def _build_buckets() -> tuple[tuple[int, ...], ...]:
    buckets: list[list[int]] = [[] for _ in range(1 << len(KEY_BITS))]
    for s in range(NSIGS):
        mask, value = T.SIG_MASK[s], T.SIG_VALUE[s]
        fixed_key = _key(value)
        free = [i for i, b in enumerate(KEY_BITS) if not (mask >> b) & 1]
        for combo in range(1 << len(free)):
            k = fixed_key
            for j, i in enumerate(free):
                if (combo >> j) & 1:
                    k |= 1 << i
            buckets[k].append(s)
    return tuple(tuple(b) for b in buckets)


#: candidate signatures per first-level key
BUCKETS: Final = _build_buckets()
_COND_OK: Final = tuple(sum(1 << c for c, _ in m) for m in T.CONDITION_MAPS)
_SIG_BY_NAME: Final = {f"{k}:{f}": i for i, (k, f) in enumerate(zip(T.SIG_KEYWORD, T.SIG_FORM))}


def signature_index(name: str) -> int:
    """Index of the signature ``keyword:form`` (``KeyError`` if there is none)."""
    return _SIG_BY_NAME[name]


def _extract(word: int, pieces: tuple[tuple[int, int, int], ...]) -> int:
    v = 0
    for word_lsb, field_lsb, width in pieces:
        v |= ((word >> word_lsb) & ((1 << width) - 1)) << field_lsb
    return v


def _sign(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _illegal(sig: int, raw: tuple[int, ...]) -> DecodeStatus:
    for op in T.SIG_OPERANDS[sig]:
        kind, field, cmap = op[1], op[2], op[8]
        if kind == T.KIND_COND and field >= 0 and not (_COND_OK[cmap] >> raw[field]) & 1:
            return DecodeStatus.ILLEGAL_CONDITION
    for fid, width, *_rest in T.SIG_FIELDS[sig]:
        if fid in (F_DC, F_DB) and width == 5 and raw[fid] & 1:
            return DecodeStatus.ILLEGAL_PAIR
    return DecodeStatus.OK


@dataclass(frozen=True)
class Instruction:
    """One decoded (or to-be-encoded) instruction: a signature and its raw field values.

    ``fields`` has one raw (unsigned, as stored) value per name of :data:`FIELD_NAMES`; fields
    the signature does not have are 0. Build one from operand values with :meth:`make`.
    """

    sig: int
    fields: tuple[int, ...]

    @classmethod
    def make(cls, signature: str | int, **operands: int) -> Instruction:
        """``Instruction.make("add:rri", rc=0, ra=1, imm=-5)``: operand values by field name
        (signed values are accepted for signed fields); implicit fields take their value."""
        sig = signature if isinstance(signature, int) else signature_index(signature)
        raw = [0] * NFIELDS
        names = set(operands)
        for fid, width, _allowed, _pieces, implicit, _zero, _rep in T.SIG_FIELDS[sig]:
            name = FIELD_NAMES[fid]
            if name in operands:
                raw[fid] = operands[name] & ((1 << width) - 1)
                names.discard(name)
            elif implicit >= 0:
                raw[fid] = implicit
        if names:
            raise EncodeError(f"{T.SIG_KEYWORD[sig]}:{T.SIG_FORM[sig]} has no field {sorted(names)}")
        return cls(sig, tuple(raw))

    @property
    def keyword(self) -> str:
        """Assembler keyword (``add``, ``lw.s``…)."""
        return T.SIG_KEYWORD[self.sig]

    @property
    def form(self) -> str:
        """Operand form (``rri``, ``zrici``…)."""
        return T.SIG_FORM[self.sig]

    @property
    def signature(self) -> str:
        """``keyword:form``."""
        return f"{self.keyword}:{self.form}"

    @cached_property
    def status(self) -> DecodeStatus:
        """``OK``, or why this decodable instruction is illegal."""
        return _illegal(self.sig, self.fields)

    @property
    def illegal(self) -> str | None:
        """None for a legal instruction, else the reason."""
        st = self.status
        if st == DecodeStatus.ILLEGAL_CONDITION:
            return f"condition code {self.fields[F_CC]} is not in the condition map"
        if st == DecodeStatus.ILLEGAL_PAIR:
            return "odd register pair number"
        return None

    def values(self) -> dict[str, int]:
        """Operand values by field name (signed immediates sign-extended), implicit fields
        included."""
        out: dict[str, int] = {}
        for fid, _width, _a, _p, _i, _z, _r in T.SIG_FIELDS[self.sig]:
            out[FIELD_NAMES[fid]] = self.fields[fid]
        for op in T.SIG_OPERANDS[self.sig]:
            kind, fid, bits, signed = op[1], op[2], op[3], op[4]
            if fid >= 0 and kind == T.KIND_IMM and signed:
                out[FIELD_NAMES[fid]] = _sign(self.fields[fid], bits)
        return out


def decode(word: int) -> Instruction | None:
    """The instruction of a 48-bit word, or None when no signature owns the word.

    An illegal but decodable word (condition code outside its map, odd pair) is returned with
    :attr:`Instruction.illegal` set.
    """
    if not 0 <= word <= WORD_MASK:
        raise ValueError(f"an instruction word has 48 bits, got {word:#x}")
    for sig in BUCKETS[_key(word)]:
        if word & T.SIG_MASK[sig] != T.SIG_VALUE[sig]:
            continue
        raw = [0] * NFIELDS
        ok = True
        for fid, _width, allowed, pieces, _implicit, _zero, _rep in T.SIG_FIELDS[sig]:
            v = _extract(word, pieces)
            if allowed >= 0 and not (allowed >> v) & 1:
                ok = False
                break
            raw[fid] = v
        if not ok:
            continue
        for lsb, width, allowed in T.SIG_CONSTRAINTS[sig]:
            if not (allowed >> ((word >> lsb) & ((1 << width) - 1))) & 1:
                ok = False
        if ok:
            return Instruction(sig, tuple(raw))
    return None


def encode(instruction: Instruction) -> int:
    """The 48-bit word of ``instruction`` (ignored bits 0); :class:`EncodeError` if a field
    value does not fit its width or is not one the signature allows."""
    sig = instruction.sig
    if not 0 <= sig < NSIGS:
        raise EncodeError(f"no signature {sig}")
    word = T.SIG_VALUE[sig]
    for fid, width, allowed, pieces, implicit, zero, _rep in T.SIG_FIELDS[sig]:
        v = instruction.fields[fid]
        name = FIELD_NAMES[fid]
        if not 0 <= v < (1 << width):
            raise EncodeError(f"{instruction.signature}: {name}={v} does not fit {width} bits")
        if v & zero:
            raise EncodeError(f"{instruction.signature}: {name}={v} must be even")
        if allowed >= 0 and not (allowed >> v) & 1:
            raise EncodeError(f"{instruction.signature}: {name}={v} is not encodable here")
        if implicit >= 0 and v != implicit:
            raise EncodeError(f"{instruction.signature}: {name} is fixed at {implicit}")
        for word_lsb, field_lsb, pwidth in pieces:
            word |= ((v >> field_lsb) & ((1 << pwidth) - 1)) << word_lsb
        fmask, fval = fixed_field_bits(sig, fid)
        if v & fmask != fval:
            raise EncodeError(f"{instruction.signature}: {name}={v} is not encodable here")
    return word


def fixed_field_bits(sig: int, fid: int) -> tuple[int, int]:
    """``(mask, value)`` of the bits of field ``fid`` that signature ``sig`` fixes (e.g. the
    top bits of an ``ra`` that must name a constant register)."""
    fmask = fval = 0
    for f in T.SIG_FIELDS[sig]:
        if f[0] != fid:
            continue
        for word_lsb, field_lsb, width in f[3]:
            for b in range(width):
                if (T.SIG_MASK[sig] >> (word_lsb + b)) & 1:
                    fmask |= 1 << (field_lsb + b)
                    fval |= ((T.SIG_VALUE[sig] >> (word_lsb + b)) & 1) << (field_lsb + b)
    return fmask, fval


# ================================================================================================
# the vectorised decoder
# ================================================================================================
@dataclass(frozen=True)
class DecodedProgram:
    """Flat decoded program (layout in the module docstring)."""

    sig: npt.NDArray[np.int32]
    status: npt.NDArray[np.int8]
    values: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return len(self.sig)


def _keys(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    k = np.zeros(words.shape, np.int64)
    for i, b in enumerate(KEY_BITS):
        k |= ((words >> np.uint64(b)) & np.uint64(1)).astype(np.int64) << i
    return k


def decode_program(words: npt.ArrayLike) -> DecodedProgram:
    """Decode an array of 48-bit words (any integer dtype; bits above 47 make a word
    undecodable) into flat arrays, without a Python loop per word."""
    w = np.asarray(words)
    if w.ndim != 1 or not np.issubdtype(w.dtype, np.integer):
        raise TypeError("words must be a 1-D integer array")
    w = w.astype(np.uint64)
    n = len(w)
    sig = np.full(n, -1, np.int32)
    status = np.full(n, DecodeStatus.UNDECODABLE, np.int8)
    values = np.zeros((n, NFIELDS), np.int64)
    in_range = (w >> np.uint64(48)) == 0
    keys = _keys(w)
    for key in np.unique(keys[in_range]):
        idx = np.nonzero((keys == key) & in_range)[0]
        for s in BUCKETS[int(key)]:
            if not len(idx):
                break
            sub = w[idx]
            hit = (sub & np.uint64(T.SIG_MASK[s])) == np.uint64(T.SIG_VALUE[s])
            raw = np.zeros((len(idx), NFIELDS), np.int64)
            for fid, _width, allowed, pieces, _imp, _zero, _rep in T.SIG_FIELDS[s]:
                v = np.zeros(len(idx), np.uint64)
                for word_lsb, field_lsb, width in pieces:
                    part = (sub >> np.uint64(word_lsb)) & np.uint64((1 << width) - 1)
                    v |= part << np.uint64(field_lsb)
                if allowed >= 0:
                    hit &= ((np.uint64(allowed) >> (v & np.uint64(63))) & np.uint64(1)) == 1
                    hit &= v < 64
                raw[:, fid] = v.astype(np.int64)
            for lsb, width, allowed in T.SIG_CONSTRAINTS[s]:
                g = (sub >> np.uint64(lsb)) & np.uint64((1 << width) - 1)
                hit &= ((np.uint64(allowed) >> g) & np.uint64(1)) == 1
            if not hit.any():
                continue
            rows = idx[hit]
            r = raw[hit]
            st = np.full(len(rows), DecodeStatus.OK, np.int8)
            for op in T.SIG_OPERANDS[s]:
                kind, fid, bits, signed, cmap = op[1], op[2], op[3], op[4], op[8]
                if fid < 0:
                    continue
                if kind == T.KIND_COND:
                    bad = ((np.uint64(_COND_OK[cmap]) >> r[:, fid].astype(np.uint64)) & np.uint64(1)) == 0
                    st[bad & (st == DecodeStatus.OK)] = DecodeStatus.ILLEGAL_CONDITION
            for fid, width, *_rest in T.SIG_FIELDS[s]:
                if fid in (F_DC, F_DB) and width == 5:
                    bad = (r[:, fid] & 1) == 1
                    st[bad & (st == DecodeStatus.OK)] = DecodeStatus.ILLEGAL_PAIR
            for op in T.SIG_OPERANDS[s]:
                kind, fid, bits, signed = op[1], op[2], op[3], op[4]
                if fid >= 0 and kind == T.KIND_IMM and signed:
                    col = r[:, fid] & ((1 << bits) - 1)
                    r[:, fid] = np.where(col >> (bits - 1), col - (1 << bits), col)
            sig[rows] = s
            status[rows] = st
            values[rows] = r
            idx = idx[~hit]
    return DecodedProgram(sig, status, values)


def operand_fields(sig: int) -> Mapping[str, int]:
    """Field name -> width of signature ``sig``."""
    return {FIELD_NAMES[f[0]]: f[1] for f in T.SIG_FIELDS[sig]}
