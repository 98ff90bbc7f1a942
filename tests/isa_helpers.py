"""Random instructions for the instruction-set tests."""

from __future__ import annotations

import random

from aiopim.isa import FIELD_NAMES, Instruction
from aiopim.isa import _tables as T
from aiopim.isa._codec import fixed_field_bits


def random_instruction(sig: int, rng: random.Random) -> Instruction:
    """Random legal field values for ``sig`` (allowed, consistent with its fixed bits, pairs
    even, conditions named by the map)."""
    cond_fields = {
        op[2]: {c for c, _ in T.CONDITION_MAPS[op[8]]}
        for op in T.SIG_OPERANDS[sig]
        if op[1] == T.KIND_COND and op[2] >= 0
    }
    values: dict[str, int] = {}
    for fid, width, allowed, _pieces, implicit, zero, _rep in T.SIG_FIELDS[sig]:
        if implicit >= 0:
            continue
        fmask, fval = fixed_field_bits(sig, fid)
        name = FIELD_NAMES[fid]
        if allowed >= 0 or fid in cond_fields:
            pool = [
                v
                for v in range(min(64, 1 << width))
                if (allowed < 0 or (allowed >> v) & 1)
                and v & fmask == fval
                and not v & zero
                and (fid not in cond_fields or v in cond_fields[fid])
                and not (name in ("dc", "db") and v & 1)
            ]
            values[name] = rng.choice(pool)
        else:
            v = (rng.getrandbits(width) & ~fmask | fval) & ~zero
            if name in ("dc", "db"):
                v &= ~1
            values[name] = v
    return Instruction.make(sig, **values)
