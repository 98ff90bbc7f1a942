"""What an untrusted host sees on a Memclave rank, the sealed-subkernel format and the vectors."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from hypothesis import given, settings
from hypothesis import strategies as st
from memclave_helpers import ADD, KEY, OTHER_KEY, N, add_program, ready_rank, run, run_add

import aiopim
from aiopim import memclave as mc
from aiopim.isa import Instruction, assemble, encode
from aiopim.isa.elfwriter import sample_dpu_elf
from aiopim.memclave._crypto import (
    MODP_2048_P,
    DhKeyPair,
    aead_open,
    aead_seal,
    session_key,
)
from aiopim.memclave._sk import Opened, open_sealed
from aiopim.sdk import (
    DPU_SYNCHRONOUS,
    dpu_alloc_ranks,
    dpu_copy_to,
    dpu_free,
    dpu_launch,
    dpu_load,
    dpu_sync,
)

E = mc.VudError
DpuError = aiopim.DpuError
DPU_ERR_DRIVER = aiopim.DpuErrorCode.DPU_ERR_DRIVER


def _ran(program: str) -> bool:
    rec = aiopim.current_emulator().recorder
    assert rec is not None
    return any(k == "dpu_run" and f["program"] == program for _, k, f in rec.iter_events())


# --- 1. the SDK cannot touch a Memclave rank ------------------------------------------------------
def test_sdk_calls_on_a_memclave_rank_fail(backend: str) -> None:
    async def main() -> None:
        r = await mc.vud_rank_alloc(0)
        await mc.vud_ime_wait(r)
        emu = aiopim.current_emulator()
        before = [bytes(d.mram.read(0, 4096)) for d in emu.rank(0).dpus]
        stolen = aiopim.DpuSet(emu, [emu.rank(0)], root=True)  # a host forging a handle
        calls = [
            lambda: dpu_load(stolen, ADD),
            lambda: dpu_copy_to(stolen, "a", 0, np.ones(N, dtype=np.uint64), 8 * N),
            lambda: dpu_launch(stolen, DPU_SYNCHRONOUS),
            lambda: dpu_sync(stolen),
            lambda: dpu_free(stolen),
        ]
        for call in calls:
            with pytest.raises(DpuError) as info:
                await call()
            assert info.value.code == DPU_ERR_DRIVER
            assert "control plane is locked" in str(info.value)
        assert [bytes(d.mram.read(0, 4096)) for d in emu.rank(0).dpus] == before
        assert r.err == E.VUD_OK
        await mc.vud_rank_free(r)
        sdk = await dpu_alloc_ranks(1)  # released: the SDK may use the rank again
        assert sdk.rank_list[0].index == 0
        await dpu_load(sdk, ADD)
        await dpu_free(sdk)

    run(backend, main, ranks=1)


# --- 2. a modified sealed subkernel is rejected ---------------------------------------------------
@pytest.mark.parametrize("auth_only", [False, True])
def test_tampered_subkernel_is_rejected(backend: str, auth_only: bool) -> None:
    async def main() -> None:
        r = await ready_rank()
        load = mc.vud_ime_load_auth_only if auth_only else mc.vud_ime_load
        await load(r, ADD)
        at = mc.IME_LOAD_BUFFER + mc.SK_HEADER_BYTES + 8  # a word of the text section
        word = np.zeros((64, 1), dtype=np.uint64)
        await mc.vud_simple_gather(r, 1, at, word)
        word[5, 0] ^= np.uint64(1 << 13)  # one bit on one DPU
        await mc.vud_simple_transfer(r, 1, word, at)
        await mc.vud_broadcast_to(r, N, np.arange(N, dtype=np.uint64), "a")
        await mc.vud_ime_launch(r)
        await mc.vud_ime_wait(r)
        assert r.err == E.VUD_NOT_WAITING
        assert r.detail.startswith("DPU 5: authentication failed"), r.detail
        assert _ran("add")  # the 63 untouched DPUs ran it
        r.err = E.VUD_OK
        await mc.vud_ime_load(r, ADD)  # DPU 5 is not waiting: the host has to recover it
        assert r.err == E.VUD_NOT_WAITING
        r.err = E.VUD_OK
        await mc.vud_rank_rel_mux(r)
        await mc.vud_ime_wait(r)
        assert (await run_add(r) == 3 * np.arange(N, dtype=np.uint64)).all()

    run(backend, main)


def test_subkernel_sealed_with_another_key_is_rejected(backend: str) -> None:
    async def main() -> None:
        r = await ready_rank(KEY)
        await mc.vud_ime_load(r, ADD)  # sealed under KEY
        await mc.vud_ime_install_key(r, OTHER_KEY)  # the DPUs now hold OTHER_KEY
        assert r.err == E.VUD_OK and r.key == OTHER_KEY
        await mc.vud_ime_launch(r)
        await mc.vud_ime_wait(r)
        assert r.err == E.VUD_NOT_WAITING
        assert "authentication failed" in r.detail
        assert not _ran("add")

    run(backend, main)


def test_load_before_key_exchange_uses_the_old_key(backend: str) -> None:
    """The seed's add.c loads before install_key: the subkernel is sealed with the zero key."""

    async def main() -> None:
        r = await mc.vud_rank_alloc(0)
        await mc.vud_ime_wait(r)
        await mc.vud_ime_load(r, ADD)
        await mc.vud_ime_install_key(r, KEY)
        await mc.vud_ime_launch(r)
        await mc.vud_ime_wait(r)
        assert r.err == E.VUD_NOT_WAITING and not _ran("add")

    run(backend, main)


# --- 3. WRAM is wiped on a subkernel switch except .data.persist; MRAM is not ---------------------
def _persist_programs() -> tuple[aiopim.Program, aiopim.Program]:
    lo, _ = mc.persist_range(aiopim.timing.V1B.wram_size)

    def make(name: str, writer: bool) -> aiopim.Program:
        prog = aiopim.Program(name, nr_tasklets=1)
        m = prog.mram("m", np.uint64, 1)
        out = prog.mram("out", np.uint64, 4)

        @prog.main
        async def main(t: aiopim.Tasklet) -> None:
            buf = t.mem_alloc(32)
            persist = t.view(lo, np.uint64, 1)
            if writer:
                t.view(buf, np.uint64, 1)[0] = 0x1111
                persist[0] = 0x2222
                await t.mram_write(buf, t.mram_address(m), 8)
                return
            seen = t.view(buf + 8, np.uint64, 2)
            seen[0] = t.view(buf, np.uint64, 1)[0]
            seen[1] = persist[0]
            await t.mram_read(t.mram_address(m), buf + 24, 8)
            await t.mram_write(buf + 8, t.mram_address(out), 24)

        return prog

    return make("writer", True), make("reader", False)


def test_wram_wiped_on_switch_but_persist_and_mram_kept(backend: str) -> None:
    writer, reader = _persist_programs()

    async def main() -> np.ndarray:
        r = await ready_rank()
        for prog in (writer, reader):
            await mc.vud_ime_load(r, prog)
            await mc.vud_ime_launch(r)
            await mc.vud_ime_wait(r)
        out = np.zeros((64, 3), dtype=np.uint64)
        await mc.vud_gather_from(r, 3, "out", out)
        assert r.err == E.VUD_OK, r.detail
        return out

    out = run(backend, main)
    assert (out == [0, 0x2222, 0x1111]).all()


# --- 4. the loader's banned-instruction scan ------------------------------------------------------
BOOT, WRITES_R21, PLAIN = 0x0B00_7000_0000_0001, 0x0000_0021_0000_0002, 0x1234


def fake_decoder(word: int) -> mc.DecodedInstruction | None:
    """A stand-in for the DPU instruction decoder that flags chosen words."""
    if word == BOOT:
        return mc.DecodedInstruction("boot")
    if word == WRITES_R21:
        return mc.DecodedInstruction("move", frozenset({"r21"}))
    if word == 0:
        return None
    return mc.DecodedInstruction("add", frozenset({"r0"}))


def _elf_subkernel(words: list[int], name: str) -> aiopim.ElfProgram:
    data, _ = sample_dpu_elf(
        nr_tasklets=1,
        text=struct.pack(f"<{len(words)}Q", *words),
        mram_vars={"out": bytes(8)},
    )
    prog = aiopim.load_elf(data, name=name)

    async def model(t: aiopim.Tasklet) -> None:
        buf = t.mem_alloc(8)
        t.view(buf, np.uint64, 1)[0] = 77
        await t.mram_write(buf, prog.address_of("out"), 8)

    return prog.bind(model)


def test_scan_rules() -> None:
    words = [PLAIN, BOOT, 0, WRITES_R21]
    assert mc.scan_banned_instructions(words, fake_decoder) == [
        (1, "banned instruction 'boot'"),
        (3, "'move' writes privileged register(s) r21"),
    ]
    for mnemonic in ("boot", "resume", "clr_run", "ldmai"):
        assert mc.scan_banned_instructions([1], lambda w, m=mnemonic: mc.DecodedInstruction(m))
    for reg in ("r20", "r21", "d20"):
        ins = mc.DecodedInstruction("lw", frozenset({reg}))
        assert mc.scan_banned_instructions([1], lambda w, i=ins: i)
    ok = mc.DecodedInstruction("sd", frozenset({"d22", "r19"}))
    assert mc.scan_banned_instructions(np.arange(5, dtype=np.uint64), lambda w: ok) == []


@pytest.mark.parametrize(
    ("words", "refused"),
    [
        ([PLAIN, PLAIN], None),
        ([PLAIN, BOOT], "instruction 1 of the subkernel: banned instruction 'boot'"),
        ([WRITES_R21, PLAIN], "instruction 0 of the subkernel: 'move' writes privileged"),
    ],
)
def test_loader_scan_rejects_banned_instructions(
    backend: str, words: list[int], refused: str | None
) -> None:
    sk = _elf_subkernel(words, f"scan{len(words)}{refused}")

    async def main() -> None:
        mc.configure_enclave(decoder=fake_decoder)
        r = await ready_rank()
        await mc.vud_ime_load(r, sk)
        await mc.vud_ime_launch(r)
        await mc.vud_ime_wait(r)
        if refused is None:
            assert r.err == E.VUD_OK, r.detail
            out = np.zeros((64, 1), dtype=np.uint64)
            await mc.vud_gather_from(r, 1, "out", out)
            assert (out == 77).all()
        else:
            assert r.err == E.VUD_NOT_WAITING
            assert refused in r.detail, r.detail
            assert not _ran(sk.name)

    run(backend, main)


# --- the .sk format -------------------------------------------------------------------------------
TOOLS_KEY = bytes(range(0x80, 0xA0))
TOOLS_IV = bytes.fromhex("000000000001020304050607")


@pytest.mark.parametrize("mode", ["auth", "data", "all"])
def test_sk_layout_and_sealing(mode: str) -> None:
    prog = add_program(f"layout-{mode}")
    plain = mc.build_sk(prog, mode)
    assert plain[:4] == b"\xa5\xa5\xa5\xa5" and plain[4:32] == bytes(28)
    size_aad, size, text_units, data_units = struct.unpack_from("<IIII", plain, 32)
    assert plain[48:64] == bytes(16)
    assert size == len(plain) == 64 + 2048 * (text_units + data_units)
    text_end = 64 + 2048 * text_units
    assert size_aad == {"auth": size, "data": text_end, "all": 64}[mode]
    sealed = bytearray(plain)
    assert mc.vud_enc_auth_sk(sealed, TOOLS_KEY, TOOLS_IV) == E.VUD_OK
    # recompute independently: AAD = header (MAC/IV zero) + clear part, the rest encrypted
    expect = ChaCha20Poly1305(TOOLS_KEY).encrypt(TOOLS_IV, plain[size_aad:], plain[:size_aad])
    assert bytes(sealed[4:20]) == expect[-16:]
    assert bytes(sealed[20:32]) == TOOLS_IV
    assert bytes(sealed[size_aad:]) == expect[:-16]
    assert bytes(sealed[32:size_aad]) == plain[32:size_aad]
    if mode != "auth":
        assert bytes(sealed[size_aad:]) != plain[size_aad:]


def test_sk_from_elf_errors_and_symbols(tmp_path: object) -> None:
    assert mc.vud_sk_from_elf("/no/such/file.dpu") == (E.VUD_SK_NOT_FOUND, b"")
    assert mc.vud_get_symbol("/no/such/file.dpu", "a") == (E.VUD_SK_NOT_FOUND, 0)
    assert mc.vud_get_symbol(ADD, "a") == (E.VUD_OK, ADD.address_of("a") & 0x07FFFFFF)
    assert mc.vud_get_symbol(ADD, "zz") == (E.VUD_SYMBOL_NOT_FOUND, 0)
    assert mc.vud_get_symbol(ADD, "flag")[0] == E.VUD_SYMBOL_NOT_MRAM


def test_host_and_dpu_nonces_cannot_collide() -> None:
    emu = aiopim.Emulator()
    m = mc.machine_of(emu)
    assert all(m.random_iv(dpu_chosen=False)[0] & 1 == 0 for _ in range(50))
    assert all(m.random_iv(dpu_chosen=True)[0] & 1 == 1 for _ in range(50))


# --- public test vectors --------------------------------------------------------------------------
RFC8439_PT = (
    b"Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the "
    b"future, sunscreen would be it."
)
RFC8439_CT = bytes.fromhex(
    "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d6"
    "3dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b36"
    "92ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc"
    "3ff4def08e4b7a9de576d26586cec64b6116"
)
RFC8439_TAG = bytes.fromhex("1ae10b594f09e26a7e902ecbd0600691")


def test_rfc8439_aead_vector() -> None:
    nonce = bytes.fromhex("070000004041424344454647")
    aad = bytes.fromhex("50515253c0c1c2c3c4c5c6c7")
    sealed = aead_seal(TOOLS_KEY, nonce, RFC8439_PT, aad)
    assert sealed == RFC8439_CT + RFC8439_TAG
    assert aead_open(TOOLS_KEY, nonce, sealed, aad) == RFC8439_PT
    assert aead_open(TOOLS_KEY, nonce, sealed[:-1] + b"\0", aad) is None


def test_memclave_dpu_aead_vector() -> None:
    """memclave-ime's src/user-crypto test: key, IV, 512-byte buffer and the expected tag."""
    key = struct.pack("<8I", 0x77B07D50, 0x740A81AC, 0xA78FCB5B, 0x74DBBE6A,
                      0x9AABB9D8, 0xEDD28E42, 0xEE673B8A, 0x589C2063)  # fmt: skip
    iv = struct.pack("<3I", 0x765CE0F6, 0x213C6CAE, 0x6B290646)
    words = [0xD6A3FA7C, 0x968F2A09, 0xCA412F52, 0x7455BCD3, 0x5D6AE523, 0x57F7DD02, 0x29C0F00B,
             0x0E5CDC81, 0x81B0246D, 0x8A2BDE70, 0xE939B6E2, 0xAE1FE967, 0xB1C3AE83, 0x0D266115,
             0x8AA95F3D, 0x6423AD9F, 0x300D7B04, 0x9FBC5950, 0x0F64A22E, 0xCE4C046B, 0x288070FD,
             0xC819AB9D, 0x49435D80, 0xC36AD0CF, 0x9AF1788F, 0xD852A5C7, 0xA7D02532, 0xB18ED38F,
             0x8FBC71D5, 0xD8DA605D, 0xE20C4239, 0x9B80C680, 0xD9AFFD6C, 0xAC0B6D8E, 0xB8005D3E,
             0xA107E21E, 0x705A485D, 0xFED26F03, 0x57D37A76, 0x955D9F1F, 0x7EDDEFAA, 0x868D4CE0,
             0x8DE83708, 0xF3D9F3FB, 0x0D00FDD4, 0x91E22F2A, 0x1B5C9461, 0xEEC96698, 0xD1FC0FD9,
             0xACA86A7C, 0xC281B9CB, 0x3D6803DD, 0x56BA9DA9, 0x14B5DEA8, 0x59706E65, 0x421D2EDD,
             0x105499A8, 0x9722E09D, 0xE3A9478A, 0xC9107311, 0xACF4E85E, 0x719860FE, 0x9A7F72FF,
             0xA3908CCD, 0x4C2D9A3D, 0xFA8F40F0, 0xCE853A69, 0x2F4669A0, 0x8D6ED7B0, 0x25DCFAA4,
             0xA1E25702, 0x9780472B, 0x67B9A9A9, 0xAA69CBF5, 0x4D3BC7B1, 0x04BD294B, 0x5ED69561,
             0x075DA280, 0xBDFD8C96, 0x97474F0A, 0x35E33E72, 0x0354EA16, 0xF104393B, 0x15D6A935,
             0x7DB9B74E, 0xAAB02422, 0xE63A8226, 0x8E26B46B, 0xFAB3E3E1, 0xBCAFFD01, 0x3706E15A,
             0x04456F58, 0x3AF550CF, 0x7E489E62, 0x52047A4E, 0xAE749E96, 0x5AF4B96B, 0xD1A0F764,
             0xC0159902, 0x16E4695F, 0x5C8F7283, 0x132BF0D1, 0x9050198B, 0x24F1FD3F, 0xE070652E,
             0xCBA1B59E, 0x25A83BF6, 0x923D9DBF, 0x1652DD10, 0xFB5CB270, 0xD730001B, 0x9103DDDF,
             0x03F7F00A, 0xAD1DC70F, 0xAC9B1DD1, 0x1442FA20, 0x1159F45D, 0x9F8A8448, 0xB348BCF6,
             0xD9963624, 0x66808B6B, 0x21DAF620, 0x3945A637, 0x8B40B7FE, 0x580C35EF, 0xAFA42FE5,
             0x3BE35716, 0x0B3C7253]  # fmt: skip
    tag = struct.pack("<4I", 0x880F11F4, 0x3FB42706, 0x06D91677, 0xCF90A314)
    sealed = aead_seal(key, iv, struct.pack("<128I", *words))
    assert sealed[-16:] == tag


def test_modp_2048_group_and_key_agreement() -> None:
    p = MODP_2048_P
    assert (
        p.bit_length() == 2048
        and p >> 1984 == (1 << 64) - 1
        and p & ((1 << 64) - 1) == (1 << 64) - 1
    )
    assert p % 8 == 7  # a safe prime of RFC 3526's form: 2 generates the prime-order subgroup
    a, b = DhKeyPair(12345), DhKeyPair(2**200 + 7)
    assert int.from_bytes(a.public, "big") == pow(2, 12345 % (p - 3) + 2, p)
    s1, s2 = a.shared_secret(b.public), b.shared_secret(a.public)
    assert s1 is not None and s1 == s2 and len(s1) == 256
    assert a.shared_secret((1).to_bytes(256, "big")) is None
    assert a.shared_secret((p - 1).to_bytes(256, "big")) is None
    k = session_key(s1, bytes(16))
    assert len(k) == 32 and k != session_key(s1, (1).to_bytes(16, "little"))


def test_counter_is_monotonic_across_exchanges_and_allocations(backend: str) -> None:
    async def main() -> list[int]:
        seen = []
        for _ in range(2):
            r = await ready_rank()
            await mc.vud_ime_install_key(r, OTHER_KEY)
            counters = np.zeros((64, 2), dtype=np.uint64)
            await mc.vud_ime_launch_default(r, mc.VUD_IME_SK_XCHG_1)
            await mc.vud_ime_wait(r)
            await mc.vud_simple_gather(r, 2, 0, counters)
            assert r.err == E.VUD_OK
            seen.append(int(counters[0, 0]))
            await mc.vud_rank_rel_mux(r)  # let stage 2 run out (it fails: no wrapped key)
            await mc.vud_ime_wait(r)
            await mc.vud_rank_free(r)
        return seen

    assert run(backend, main) == [3, 6]


@settings(max_examples=200, deadline=None)
@given(
    mode=st.sampled_from(["auth", "data", "all"]),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), min_size=1, max_size=3),
)
def test_loader_rejects_any_modified_bit(mode: str, flips: list[tuple[int, int]]) -> None:
    sk = bytearray(mc.build_sk(ADD, mode))
    assert mc.vud_enc_auth_sk(sk, KEY, TOOLS_IV) == E.VUD_OK
    assert isinstance(open_sealed(bytes(sk), KEY), Opened)
    bad = bytearray(sk)
    for pos, bit in flips:
        bad[pos % len(bad)] ^= 1 << bit
    if bad == sk:
        return  # the flips cancelled out
    assert isinstance(open_sealed(bytes(bad), KEY), str)
    assert isinstance(open_sealed(bytes(sk[: len(sk) - 1]), KEY), str)
    assert isinstance(open_sealed(bytes(sk), OTHER_KEY), str)


# --- the scan with the real instruction decoder (the default) ------------------------------------
def _word(signature: str, **operands: int) -> int:
    return encode(Instruction.make(signature, **operands))


def test_isa_instruction_reads_mnemonics_and_written_registers() -> None:
    boot = mc.isa_instruction(_word("boot:rici", ra=24, imm=1, cc=1, pc=0))
    assert boot is not None and boot.mnemonic == "boot" and boot.writes == frozenset()
    move = mc.isa_instruction(_word("add:rri", rc=21, ra=24, imm=5))  # move r21, 5
    assert move is not None and move.mnemonic == "add" and move.writes == {"r21"}
    load = mc.isa_instruction(_word("ld:erri", endian=0, dc=20, ra=0, off=0))
    assert load is not None and load.writes == {"d20", "r20", "r21"}
    store = mc.isa_instruction(_word("sd:erir", endian=0, ra=22, off=0, db=20))
    assert store is not None and store.writes == frozenset()  # reads d20, writes no register
    assert mc.isa_instruction((1 << 48) - 1) is None  # not an instruction
    assert mc.isa_instruction(1 << 50) is None  # bits above the 48-bit word


@pytest.mark.parametrize(
    ("banned", "why"),
    [
        (None, None),
        ("boot", "banned instruction 'boot'"),
        ("resume", "banned instruction 'resume'"),
        ("r20", "'add' writes privileged register(s) r20"),
        ("d20", "'ld' writes privileged register(s) d20, r20, r21"),
    ],
)
def test_default_scan_decodes_real_instructions(
    backend: str, banned: str | None, why: str | None
) -> None:
    plain = [_word("add:rrr", rc=0, ra=1, rb=2), _word("stop:ci", cc=1, pc=0)]
    extra = {
        "boot": _word("boot:rici", ra=24, imm=1, cc=1, pc=0),
        "resume": _word("resume:rici", ra=24, imm=1, cc=1, pc=0),
        "r20": _word("add:rri", rc=20, ra=24, imm=5),
        "d20": _word("ld:erri", endian=0, dc=20, ra=0, off=0),
    }
    words = plain if banned is None else [*plain[:1], extra[banned], *plain[1:]]
    sk = _elf_subkernel(words, f"isa-scan-{banned}")

    async def main() -> None:
        r = await ready_rank()  # no configure_enclave: the default decoder scans
        await mc.vud_ime_load(r, sk)
        await mc.vud_ime_launch(r)
        await mc.vud_ime_wait(r)
        if why is None:
            assert r.err == E.VUD_OK, r.detail
        else:
            assert r.err == E.VUD_NOT_WAITING
            assert f"instruction 1 of the subkernel: {why}" in r.detail, r.detail
            assert not _ran(sk.name)

    run(backend, main)


# --- a binary subkernel runs on the instruction-set interpreter (no Python model) -----------
SUBKERNEL_S = """
        .set NR_TASKLETS, 1
        .text
__bootstrap:
        move r0, value          // WRAM address of the value
        move r1, out            // MRAM offset of the result
        sdma r0, r1, 0          // 8 bytes WRAM -> MRAM
        stop true, __bootstrap
        .data
        .balign 8
value:
        .quad 0x1234567890
        .mram
        .globl out
out:
        .zero 8
        .size out, 8
"""


def test_binary_subkernel_runs_on_the_interpreter(backend: str) -> None:
    sk = aiopim.load_elf(assemble(SUBKERNEL_S, "v1B"), name="interp-subkernel")
    assert sk.model is None  # nothing stands in for the instructions

    async def main() -> None:
        r = await ready_rank()
        await mc.vud_ime_load(r, sk)
        await mc.vud_ime_launch(r)
        await mc.vud_ime_wait(r)
        assert r.err == E.VUD_OK, r.detail
        out = np.zeros((64, 1), dtype=np.uint64)
        await mc.vud_gather_from(r, 1, "out", out)
        assert (out == 0x1234567890).all()

    run(backend, main)


def test_a_shared_secret_is_the_same_computed_or_remembered() -> None:
    from aiopim.memclave import _crypto

    host, dpu = _crypto.DhKeyPair(12345), _crypto.DhKeyPair(67890)
    p = _crypto.MODP_2048_P
    expected = pow(int.from_bytes(dpu.public, "big"), 12345 % (p - 3) + 2, p)
    expected_bytes = expected.to_bytes(_crypto.DH_BYTES, "big")
    _crypto._SECRETS.clear()
    assert host.shared_secret(dpu.public) == expected_bytes  # computed
    assert len(_crypto._SECRETS) == 1
    assert dpu.shared_secret(host.public) == expected_bytes  # remembered: the other side's
    _crypto._SECRETS.clear()
    assert dpu.shared_secret(host.public) == expected_bytes  # computed on this side
    assert host.shared_secret((1).to_bytes(_crypto.DH_BYTES, "big")) is None  # out of range
    assert len(_crypto._SECRETS) == 1
