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
  (e.g. the ``ra`` that ``fault`` fixes at 24, ``stop`` at 28) hold their forced value; fields the
  signature does not have are 0.

All tables are tuples of ints, so an interpreter can turn them into NumPy arrays once.
"""

from __future__ import annotations

import operator
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
_SIG_BY_NAME: Final = {
    f"{k}:{f}": i for i, (k, f) in enumerate(zip(T.SIG_KEYWORD, T.SIG_FORM, strict=True))
}


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
            raise EncodeError(
                f"{T.SIG_KEYWORD[sig]}:{T.SIG_FORM[sig]} has no field {sorted(names)}"
            )
        return cls(sig, tuple(raw))

    @property
    def keyword(self) -> str:
        """Assembler keyword (``add``, ``lw.s``…)."""
        return T.SIG_KEYWORD[self.sig]

    @property
    def mnemonic(self) -> str:
        """The operation whatever the form (``add`` for ``add.s:rrici``)."""
        return T.MNEMONICS[T.SIG_FAMILY[self.sig]]

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
    try:
        word = operator.index(word)
    except TypeError:
        raise TypeError(f"word must be an int, not {type(word).__name__}") from None
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
    if not isinstance(instruction, Instruction):
        raise TypeError(f"instruction must be an Instruction, not {type(instruction).__name__}")
    sig = instruction.sig
    if not 0 <= sig < NSIGS or len(instruction.fields) != NFIELDS:
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


def _flat_buckets() -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    starts = np.zeros(len(BUCKETS) + 1, np.int64)
    starts[1:] = np.cumsum([len(b) for b in BUCKETS])
    sigs = np.array([s for b in BUCKETS for s in b], np.int64)
    counts = np.diff(starts)
    return starts[:-1], counts, sigs


_B_START, _B_COUNT, _B_SIGS = _flat_buckets()
_MASKS: Final = np.array(T.SIG_MASK, np.uint64)
_VALUES: Final = np.array(T.SIG_VALUE, np.uint64)


class _Layout:
    """The signature tables as padded arrays, for decoding many words in a few NumPy calls."""

    def __init__(self) -> None:
        nf = max(len(f) for f in T.SIG_FIELDS)
        npc = max(len(p[3]) for f in T.SIG_FIELDS for p in f)
        nc = max(1, max(len(c) for c in T.SIG_CONSTRAINTS))
        shape = (NSIGS, nf, npc)
        self.wlsb = np.zeros(shape, np.uint64)
        self.flsb = np.zeros(shape, np.uint64)
        self.pmask = np.zeros(shape, np.uint64)
        self.fid = np.full((NSIGS, nf), NFIELDS, np.int64)  # NFIELDS: a scratch column
        self.allowed = np.full((NSIGS, nf), (1 << 64) - 1, np.uint64)
        self.clsb = np.zeros((NSIGS, nc), np.uint64)
        self.cmask = np.zeros((NSIGS, nc), np.uint64)
        self.callowed = np.ones((NSIGS, nc), np.uint64)
        self.cond_fid = np.full(NSIGS, NFIELDS, np.int64)
        self.cond_ok = np.full(NSIGS, (1 << 64) - 1, np.uint64)
        self.pair5 = np.zeros((NSIGS, NFIELDS + 1), bool)
        self.sign_bits = np.zeros((NSIGS, NFIELDS + 1), np.int64)
        for s in range(NSIGS):
            for k, (fid, width, allowed, pieces, _imp, _zero, _rep) in enumerate(T.SIG_FIELDS[s]):
                self.fid[s, k] = fid
                if allowed >= 0:
                    self.allowed[s, k] = allowed
                for j, (word_lsb, field_lsb, pwidth) in enumerate(pieces):
                    self.wlsb[s, k, j] = word_lsb
                    self.flsb[s, k, j] = field_lsb
                    self.pmask[s, k, j] = (1 << pwidth) - 1
                if fid in (F_DC, F_DB) and width == 5:
                    self.pair5[s, fid] = True
            for c, (lsb, width, allowed) in enumerate(T.SIG_CONSTRAINTS[s]):
                self.clsb[s, c] = lsb
                self.cmask[s, c] = (1 << width) - 1
                self.callowed[s, c] = allowed
            for op in T.SIG_OPERANDS[s]:
                kind, fid, bits, signed, cmap = op[1], op[2], op[3], op[4], op[8]
                if kind == T.KIND_COND and fid >= 0:
                    self.cond_fid[s] = fid
                    self.cond_ok[s] = _COND_OK[cmap]
                if kind == T.KIND_IMM and signed and fid >= 0:
                    self.sign_bits[s, fid] = bits


_L: Final = _Layout()
_ONE: Final = np.uint64(1)


def decode_program(words: npt.ArrayLike) -> DecodedProgram:
    """Decode an array of 48-bit words (any integer dtype; bits above 47 make a word
    undecodable) into flat arrays, in a fixed number of NumPy operations."""
    w = np.asarray(words)
    if w.ndim != 1 or not np.issubdtype(w.dtype, np.integer):
        raise TypeError("words must be a 1-D integer array")
    w = w.astype(np.uint64)
    n = len(w)
    sig = np.full(n, -1, np.int32)
    status = np.full(n, DecodeStatus.UNDECODABLE, np.int8)
    values = np.zeros((n, NFIELDS), np.int64)
    if n == 0:
        return DecodedProgram(sig, status, values)
    # every candidate of every word, from the first-level table, tested on its fixed bits
    keys = _keys(w)
    counts = np.where((w >> np.uint64(48)) == 0, _B_COUNT[keys], 0)
    width = max(int(counts.max()), 1)
    j = np.arange(width)
    valid = j[None, :] < counts[:, None]
    cand = _B_SIGS[np.where(valid, _B_START[keys][:, None] + j[None, :], 0)]
    hit = valid & ((w[:, None] & _MASKS[cand]) == _VALUES[cand])
    rows, cols = np.nonzero(hit)
    sigs = cand[rows, cols]
    sw = w[rows]
    # fields of every (word, candidate) pair: OR of the pieces
    parts = (sw[:, None, None] >> _L.wlsb[sigs]) & _L.pmask[sigs]
    fields = np.bitwise_or.reduce(parts << _L.flsb[sigs], axis=2)
    ok = (fields < 64) | (_L.allowed[sigs] == np.uint64((1 << 64) - 1))
    ok &= ((_L.allowed[sigs] >> (fields & np.uint64(63))) & _ONE) == _ONE
    ok = ok.all(axis=1)
    group = (sw[:, None] >> _L.clsb[sigs]) & _L.cmask[sigs]
    ok &= (((_L.callowed[sigs] >> group) & _ONE) == _ONE).all(axis=1)
    rows, sigs, fields = rows[ok], sigs[ok], fields[ok].astype(np.int64)
    # at most one signature accepts a word: scatter the fields into their columns
    full = np.zeros((len(rows), NFIELDS + 1), np.int64)
    np.put_along_axis(full, _L.fid[sigs], fields, axis=1)
    st = np.full(len(rows), DecodeStatus.OK, np.int8)
    code = full[np.arange(len(rows)), _L.cond_fid[sigs]].astype(np.uint64)
    st[((_L.cond_ok[sigs] >> (code & np.uint64(63))) & _ONE) == 0] = DecodeStatus.ILLEGAL_CONDITION
    odd = (_L.pair5[sigs] & ((full & 1) == 1)).any(axis=1)
    st[odd & (st == DecodeStatus.OK)] = DecodeStatus.ILLEGAL_PAIR
    bits = _L.sign_bits[sigs]
    neg = (bits > 0) & ((full >> np.maximum(bits - 1, 0)) & 1 == 1)
    full = np.where(neg, full - (np.int64(1) << bits), full)
    sig[rows] = sigs
    status[rows] = st
    values[rows] = full[:, :NFIELDS]
    return DecodedProgram(sig, status, values)
