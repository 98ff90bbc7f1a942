"""The table generator on a small hand-written input: deterministic, notice kept, pseudo-code
dropped, columns as the decoder expects them; and the committed tables' invariants."""

from __future__ import annotations

import copy
from typing import Any

from aiopim.isa import _tables as T
from aiopim.isa._generate import FIELD_NAMES, generate

NOTICE = "Copyright 2020 Someone. All rights reserved."
SECRET = "rc = ra + imm   (pseudo-code that must not be copied)"


def _spec() -> dict[str, Any]:
    reg = {"kind": "reg", "bits": 32, "pair": False, "safe": False}
    return {
        "metadata": {"licence": {"notice": NOTICE}, "source": {"sdk": "Test SDK 1.0"}},
        "condition_names": ["false", "true", "z"],
        "condition_maps": {"m": {"1": "true", "2": "z"}},
        "registers": {"constant": [{"code": 24, "name": "zero", "value": "0"}]},
        "machine": {
            "chips": {
                "v1B": {
                    "threads": 16,
                    "iram_instructions": 3968,
                    "wram_bytes": 63488,
                    "frequency_mhz": 400,
                    "user_mutexes": 64,
                }
            },
            "mram_bytes": 1 << 26,
            "atomic_bits": 256,
        },
        "instructions": [
            {
                "signature": "add:rric",
                "keyword": "add",
                "mnemonic": "add",
                "form": "rric",
                "documented": True,
                "operands": [
                    {"name": "rc", "field": "rc", "ro_allowed": False, **reg},
                    {"name": "ra", "field": "ra", "ro_allowed": True, **reg},
                    {"name": "imm", "kind": "imm", "field": "imm", "bits": 8, "signed": True},
                    {"name": "m", "kind": "cond", "field": "cc", "map": "m"},
                ],
                "semantics": SECRET,
                "flags_written": ["ZF", "CF"],
                "fixed": {"mask": "0xff0000000000", "value": "0x120000000000"},
                "fields": {
                    "rc": {"pieces": [[0, 0, 5]], "width": 5, "allowed": list(range(24))},
                    "ra": {"pieces": [[5, 0, 5]], "width": 5},
                    "imm": {"pieces": [[10, 0, 4], [20, 4, 4]], "width": 8},
                    "cc": {"pieces": [[14, 0, 2]], "width": 2, "allowed": [1, 2]},
                },
                "ignored_bits": "0x0000000c0000",
                "sugars": ["inc:r"],
            },
            {
                "signature": "nop:",
                "keyword": "nop",
                "mnemonic": "nop",
                "form": "",
                "documented": False,
                "operands": [],
                "semantics": "no effect",
                "flags_written": [],
                "fixed": {"mask": "0xffffffffffff", "value": "0x000000000001"},
                "fields": {},
                "opcode_constraints": [{"word_lsb": 32, "width": 2, "allowed": [0, 1, 2]}],
            },
        ],
        "sugars": [
            {
                "signature": "inc:r",
                "keyword": "inc",
                "target": "add:rric",
                "when": {"mask": "0x000000003c00", "value": "0x000000000400"},
                "implied_fields": {"imm": 1},
                "operands": [{"name": "rc", "field": "rc", "ro_allowed": False, **reg}],
                "documented": True,
                "semantics": SECRET,
            }
        ],
    }


def test_generator_output() -> None:
    spec = _spec()
    text = generate(spec)
    assert text == generate(copy.deepcopy(spec))  # deterministic
    assert SECRET not in text and "no effect" not in text
    header = text.split('"""', 1)[0]
    assert NOTICE in header and "Keep this notice" in header
    ns: dict[str, Any] = {}
    exec(compile(text, "<tables>", "exec"), ns)
    assert ns["SIG_KEYWORD"] == ("add", "nop")
    assert ns["SIG_MASK"] == (0xFF0000000000, 0xFFFFFFFFFFFF)
    assert ns["SIG_IGNORED"] == (0xC0000, 0)
    assert ns["SIG_FLAGS"] == (3, 0)
    rc, ra, cc, imm = ns["SIG_FIELDS"][0]  # in FIELD_NAMES order
    assert rc == (FIELD_NAMES.index("rc"), 5, (1 << 24) - 1, ((0, 0, 5),), -1, 0, 0)
    assert ra[2] == -1 and imm[3] == ((10, 0, 4), (20, 4, 4)) and cc[2] == 0b110
    ops = ns["SIG_OPERANDS"][0]
    assert [o[0] for o in ops] == ["rc", "ra", "imm", "m"]
    assert ops[2][3:5] == (8, 1) and ops[3][8] == ns["CONDITION_MAP_NAMES"].index("m")
    assert ns["SIG_CONSTRAINTS"] == ((), ((32, 2, 0b111),))
    assert ns["SIG_SUGARS"] == ((0,), ())
    kw, form, target, mask, value, implied, sugar_ops, doc = ns["SUGARS"][0]
    assert (kw, form, target, mask, value) == ("inc", "r", 0, 0x3C00, 0x400)
    assert implied == ((FIELD_NAMES.index("imm"), 1),) and len(sugar_ops) == 1 and doc == 1
    assert ns["CONDITION_MAPS"][0] == ((1, 1), (2, 2))
    assert ns["CHIPS"]["v1B"] == (16, 3968, 63488, 400, 64)


def test_committed_tables_invariants() -> None:
    n = len(T.SIG_KEYWORD)
    columns = (T.SIG_FORM, T.SIG_FAMILY, T.SIG_MASK, T.SIG_VALUE, T.SIG_IGNORED, T.SIG_FLAGS)
    assert all(len(c) == n for c in (*columns, T.SIG_FIELDS, T.SIG_OPERANDS, T.SIG_SUGARS))
    flags = [T.SIG_FLAGS.count(k) for k in (1, 3, 0)]
    assert flags == [743, 158, 72]  # ZF only, ZF and CF, none
    for s in range(n):
        assert T.SIG_VALUE[s] & ~T.SIG_MASK[s] == 0
        covered = T.SIG_MASK[s] | T.SIG_IGNORED[s]
        for f in T.SIG_FIELDS[s]:
            for word_lsb, _field_lsb, width in f[3]:
                covered |= ((1 << width) - 1) << word_lsb
        for lsb, width, _allowed in T.SIG_CONSTRAINTS[s]:
            covered |= ((1 << width) - 1) << lsb
        assert covered == (1 << 48) - 1, T.SIG_KEYWORD[s]  # every bit has a role
    assert len({f"{k}:{f}" for k, f in zip(T.SIG_KEYWORD, T.SIG_FORM, strict=True)}) == n
