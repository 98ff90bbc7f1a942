"""Memclave's ``vud`` client library, emulated: secure enclaves on ranks of 64 DPUs.

The functions keep ``vud.h``'s names and argument order; the ones that touch the machine are
``async``. They run as jobs on the same rank actors, virtual clock and recorder as
:mod:`aiopim.sdk`. While Memclave holds a rank, :mod:`aiopim.sdk` calls on it fail with
``DPU_ERR_DRIVER`` (the control plane is locked). See ``docs/memclave.md``.
"""

from __future__ import annotations

from ._coreapi import Emulator, current_emulator
from ._crypto import CONFIRMATION, MODP_2048_G, MODP_2048_P
from ._enclave import (
    DEBUG_OUT,
    IME_LOAD_BUFFER,
    MSG_BUFFER,
    MSG_FLAG_USER_KEY,
    PERSIST_BYTES,
    SK_MSG,
    SK_XCHG_1,
    SK_XCHG_2,
    SK_XCHG_3,
    Msg,
    machine_of,
    persist_range,
)
from ._errors import VudError, vud_error_str
from ._sk import (
    BANNED_MNEMONICS,
    BANNED_WRITES,
    MODES,
    SK_HEADER_BYTES,
    SK_MAGIC,
    SK_UNIT,
    DecodedInstruction,
    InstructionDecoder,
    build_sk,
    isa_instruction,
    scan_banned_instructions,
)
from ._vud import (
    MAX_WORKERS,
    NR_DPUS,
    VUD_ALLOC_ANY,
    VUD_IME_SK_MSG,
    VUD_IME_SK_XCHG_1,
    VUD_IME_SK_XCHG_2,
    VUD_IME_SK_XCHG_3,
    VudImeSk,
    VudRank,
    enclave_public_keys,
    vud_broadcast_to,
    vud_broadcast_transfer,
    vud_enc_auth_sk,
    vud_gather_from,
    vud_get_symbol,
    vud_ime_install_key,
    vud_ime_launch,
    vud_ime_launch_default,
    vud_ime_load,
    vud_ime_load_auth_only,
    vud_ime_wait,
    vud_log_read,
    vud_rank_alloc,
    vud_rank_free,
    vud_rank_nr_workers,
    vud_rank_qry_mux,
    vud_rank_rel_mux,
    vud_simple_gather,
    vud_simple_transfer,
    vud_sk_from_elf,
    vud_transfer_to,
)

VUD_OK = VudError.VUD_OK
VUD_RANK_BUSY = VudError.VUD_RANK_BUSY
VUD_NOT_FOUND = VudError.VUD_NOT_FOUND
VUD_MEMORY_ERR = VudError.VUD_MEMORY_ERR
VUD_SYSTEM_ERR = VudError.VUD_SYSTEM_ERR
VUD_CI_TIMEOUT = VudError.VUD_CI_TIMEOUT
VUD_INVALID_RES = VudError.VUD_INVALID_RES
VUD_EXPECTED_FAULT = VudError.VUD_EXPECTED_FAULT
VUD_SK_NOT_FOUND = VudError.VUD_SK_NOT_FOUND
VUD_SK_TAG = VudError.VUD_SK_TAG
VUD_NOT_WAITING = VudError.VUD_NOT_WAITING
VUD_SYMBOL_NOT_FOUND = VudError.VUD_SYMBOL_NOT_FOUND
VUD_SYMBOL_NOT_MRAM = VudError.VUD_SYMBOL_NOT_MRAM
VUD_SYSTEM_THREAD = VudError.VUD_SYSTEM_THREAD
VUD_KEY_XCHG = VudError.VUD_KEY_XCHG

_UNSET = object()


def configure_enclave(
    *,
    shared_static_key: bool | None = None,
    decoder: InstructionDecoder | object | None = _UNSET,
    emulator: Emulator | None = None,
) -> None:
    """Options of the emulated enclaves of ``emulator`` (default: the running one).

    ``shared_static_key``: every DPU has the same static key pair (one ``common_pk``) instead
    of one per DPU. ``decoder``: the instruction decoder the trusted loader's banned-instruction
    scan uses (default: the DPU instruction set's; None: no scan).
    """
    machine = machine_of(emulator or current_emulator())
    if shared_static_key is not None:
        machine.shared_static_key = shared_static_key
        for enc in machine.ranks.values():
            for st in enc.dpus:
                st._keypair = None
    if decoder is not _UNSET:
        machine.decoder = decoder  # type: ignore[assignment]


__all__ = [
    "BANNED_MNEMONICS",
    "BANNED_WRITES",
    "CONFIRMATION",
    "DEBUG_OUT",
    "IME_LOAD_BUFFER",
    "MAX_WORKERS",
    "MODES",
    "MODP_2048_G",
    "MODP_2048_P",
    "MSG_BUFFER",
    "MSG_FLAG_USER_KEY",
    "NR_DPUS",
    "PERSIST_BYTES",
    "SK_HEADER_BYTES",
    "SK_MAGIC",
    "SK_MSG",
    "SK_UNIT",
    "SK_XCHG_1",
    "SK_XCHG_2",
    "SK_XCHG_3",
    "VUD_ALLOC_ANY",
    "VUD_IME_SK_MSG",
    "VUD_IME_SK_XCHG_1",
    "VUD_IME_SK_XCHG_2",
    "VUD_IME_SK_XCHG_3",
    "DecodedInstruction",
    "InstructionDecoder",
    "Msg",
    "VudError",
    "VudImeSk",
    "VudRank",
    "build_sk",
    "configure_enclave",
    "enclave_public_keys",
    "machine_of",
    "persist_range",
    "isa_instruction",
    "scan_banned_instructions",
    "vud_broadcast_to",
    "vud_broadcast_transfer",
    "vud_enc_auth_sk",
    "vud_error_str",
    "vud_gather_from",
    "vud_get_symbol",
    "vud_ime_install_key",
    "vud_ime_launch",
    "vud_ime_launch_default",
    "vud_ime_load",
    "vud_ime_load_auth_only",
    "vud_ime_wait",
    "vud_log_read",
    "vud_rank_alloc",
    "vud_rank_free",
    "vud_rank_nr_workers",
    "vud_rank_qry_mux",
    "vud_rank_rel_mux",
    "vud_simple_gather",
    "vud_simple_transfer",
    "vud_sk_from_elf",
    "vud_transfer_to",
    "VUD_OK",
    "VUD_RANK_BUSY",
    "VUD_NOT_FOUND",
    "VUD_MEMORY_ERR",
    "VUD_SYSTEM_ERR",
    "VUD_CI_TIMEOUT",
    "VUD_INVALID_RES",
    "VUD_EXPECTED_FAULT",
    "VUD_SK_NOT_FOUND",
    "VUD_SK_TAG",
    "VUD_NOT_WAITING",
    "VUD_SYMBOL_NOT_FOUND",
    "VUD_SYMBOL_NOT_MRAM",
    "VUD_SYSTEM_THREAD",
    "VUD_KEY_XCHG",
]
