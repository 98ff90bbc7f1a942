"""Decoder/encoder of the DPU instruction set: every signature round-trips, bad words are
reported as undecodable or illegal, the vectorised decoder agrees with the scalar one."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from isa_helpers import random_instruction

from aiopim.isa import (
    FIELD_NAMES,
    DecodeStatus,
    EncodeError,
    Instruction,
    decode,
    decode_program,
    encode,
    signature_index,
)
from aiopim.isa import _tables as T
from aiopim.isa._codec import BUCKETS

NSIGS = len(T.SIG_KEYWORD)


def test_tables_shape() -> None:
    assert NSIGS == 973
    assert len(T.SUGARS) == 105
    assert len(T.CONDITION_MAP_NAMES) == 22
    assert len(T.CONDITION_NAMES) == 48
    assert "UPMEM" in T.NOTICE
    # every signature sits in the buckets of its own fixed key bits; at most 54 per key
    assert max(len(b) for b in BUCKETS) <= 54
    assert sum(len(b) for b in BUCKETS) / len(BUCKETS) < 5


@pytest.mark.parametrize("chunk", range(8))
def test_every_signature_round_trips(chunk: int) -> None:
    rng = random.Random(chunk)
    words: list[int] = []
    sigs: list[int] = []
    for sig in range(chunk, NSIGS, 8):
        for _ in range(12):
            ins = random_instruction(sig, rng)
            word = encode(ins)
            assert word >> 48 == 0
            got = decode(word)
            assert got is not None, ins.signature
            assert got.sig == sig and got.fields == ins.fields
            assert got.illegal is None
            assert encode(got) == word
            words.append(word)
            sigs.append(sig)
    prog = decode_program(np.array(words, np.uint64))
    assert prog.sig.tolist() == sigs
    assert (prog.status == DecodeStatus.OK).all()


@settings(max_examples=150, deadline=None)
@given(st.integers(0, (1 << 48) - 1))
def test_vector_decoder_agrees_with_scalar(word: int) -> None:
    ins = decode(word)
    prog = decode_program(np.array([word], np.uint64))
    if ins is None:
        assert prog.sig[0] == -1 and prog.status[0] == DecodeStatus.UNDECODABLE
        return
    assert prog.sig[0] == ins.sig
    assert prog.status[0] == ins.status
    for name, value in ins.values().items():
        assert prog.values[0, FIELD_NAMES.index(name)] == value


def test_random_words_batch_agrees() -> None:
    rng = random.Random(7)
    words = [rng.getrandbits(48) for _ in range(3000)]
    prog = decode_program(np.array(words, np.uint64))
    decodable = 0
    for i, w in enumerate(words):
        ins = decode(w)
        assert (prog.sig[i] == -1) == (ins is None)
        if ins is not None:
            decodable += 1
            assert prog.sig[i] == ins.sig and prog.status[i] == ins.status
    assert 0.15 < decodable / len(words) < 0.30  # about 22 % of all 48-bit words


def test_undecodable_words() -> None:
    assert decode(0xFFFFFFFFFFFF) is None
    prog = decode_program(np.array([0xFFFFFFFFFFFF, 1 << 48], np.uint64))
    assert prog.sig.tolist() == [-1, -1]
    assert prog.status.tolist() == [DecodeStatus.UNDECODABLE] * 2
    with pytest.raises(ValueError):
        decode(1 << 48)
    with pytest.raises(TypeError):
        decode_program(np.zeros((2, 2), np.uint64))


def test_condition_missing_from_its_map_is_illegal() -> None:
    sig = signature_index("add:rrrci")
    cmap = next(op[8] for op in T.SIG_OPERANDS[sig] if op[1] == T.KIND_COND)
    assert T.CONDITION_MAP_NAMES[cmap] == "add_nz_cc"
    word = encode(Instruction.make(sig, rc=1, ra=2, rb=3, cc=17, pc=5))  # 17: unnamed
    ins = decode(word)
    assert ins is not None and ins.sig == sig
    assert ins.status == DecodeStatus.ILLEGAL_CONDITION
    assert ins.illegal is not None and "17" in ins.illegal
    prog = decode_program(np.array([word], np.uint64))
    assert prog.status[0] == DecodeStatus.ILLEGAL_CONDITION and prog.sig[0] == sig


def test_odd_pair_is_illegal() -> None:
    sig = signature_index("movd:rrci")
    word = encode(Instruction.make(sig, dc=3, db=4, cc=1, pc=0))
    ins = decode(word)
    assert ins is not None and ins.status == DecodeStatus.ILLEGAL_PAIR
    assert decode_program(np.array([word])).status[0] == DecodeStatus.ILLEGAL_PAIR
    even = decode(encode(Instruction.make(sig, dc=2, db=4, cc=1, pc=0)))
    assert even is not None and even.illegal is None


def test_decoded_values_are_sign_extended() -> None:
    word = encode(Instruction.make("add:rrici", rc=0, ra=1, imm=-3, cc=2, pc=9))
    prog = decode_program(np.array([word]))
    row = dict(zip(FIELD_NAMES, prog.values[0].tolist(), strict=True))
    assert row["imm"] == -3 and row["pc"] == 9 and row["ra"] == 1 and row["cc"] == 2
    assert decode(word) is not None and decode(word).values()["imm"] == -3  # type: ignore[union-attr]
    # implicit fields carry their forced value
    stop = decode_program(np.array([encode(Instruction.make("stop:ci", cc=1, pc=4))]))
    assert stop.values[0, FIELD_NAMES.index("ra")] == 28  # stop fixes ra = id


def test_encode_rejects_bad_fields() -> None:
    with pytest.raises(EncodeError, match="does not fit"):
        ins = Instruction.make("add:rrici", rc=0, ra=1, imm=0, cc=2, pc=0)
        fields = list(ins.fields)
        fields[FIELD_NAMES.index("pc")] = 1 << 16
        encode(Instruction(ins.sig, tuple(fields)))
    with pytest.raises(EncodeError, match="not encodable"):
        encode(Instruction.make("add:rri", rc=24, ra=1, imm=0))  # rc cannot be a constant
    with pytest.raises(EncodeError, match="no field"):
        Instruction.make("nop:", rc=1)
    with pytest.raises(KeyError):
        signature_index("add:xyz")


@settings(max_examples=150, deadline=None)
@given(st.integers(0, NSIGS - 1), st.integers(0, 2**32 - 1))
def test_round_trip_property(sig: int, seed: int) -> None:
    ins = random_instruction(sig, random.Random(seed))
    word = encode(ins)
    got = decode(word)
    assert got == ins
    assert encode(got) == word
    prog = decode_program(np.array([word], np.uint64))
    assert prog.sig[0] == sig and prog.status[0] == DecodeStatus.OK


def test_decode_program_of_an_empty_array() -> None:
    prog = decode_program(np.zeros(0, np.uint64))
    assert len(prog) == 0 and prog.values.shape == (0, len(FIELD_NAMES))


def _brute_force(word: int) -> list[int]:
    """Every signature whose fixed bits, allowed field values and constraints accept ``word``
    (no first-level table)."""
    out = []
    for s in range(NSIGS):
        if word & T.SIG_MASK[s] != T.SIG_VALUE[s]:
            continue
        ok = True
        for _fid, _w, allowed, pieces, _imp, _zero, _rep in T.SIG_FIELDS[s]:
            v = 0
            for word_lsb, field_lsb, width in pieces:
                v |= ((word >> word_lsb) & ((1 << width) - 1)) << field_lsb
            ok &= allowed < 0 or bool((allowed >> v) & 1) if v < 64 else allowed < 0
        for lsb, width, allowed in T.SIG_CONSTRAINTS[s]:
            ok &= bool((allowed >> ((word >> lsb) & ((1 << width) - 1))) & 1)
        if ok:
            out.append(s)
    return out


def test_first_level_table_finds_the_only_match() -> None:
    """Near-valid words (one-bit flips of encoded instructions) and random words: at most one
    signature accepts each, and decode finds exactly that one."""
    rng = random.Random(3)
    words = [rng.getrandbits(48) for _ in range(150)]
    for sig in rng.sample(range(NSIGS), 150):
        w = encode(random_instruction(sig, rng))
        words += [w, w ^ (1 << rng.randrange(48))]
    for w in words:
        matches = _brute_force(w)
        assert len(matches) <= 1
        ins = decode(w)
        assert (ins.sig if ins else None) == (matches[0] if matches else None)


def test_type_errors_name_the_parameter() -> None:
    with pytest.raises(TypeError, match="word"):
        decode("0x1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="instruction"):
        encode(0x1234)  # type: ignore[arg-type]
    assert decode(np.uint64(encode(Instruction.make("nop:")))) == Instruction.make("nop:")
