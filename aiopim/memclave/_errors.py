"""``enum vud_error`` of the Memclave client library and ``vud_error_str``."""

from __future__ import annotations

from enum import IntEnum


class VudError(IntEnum):
    """The 15 values of ``vud_error``, in the library's order."""

    VUD_OK = 0
    VUD_RANK_BUSY = 1
    VUD_NOT_FOUND = 2
    VUD_MEMORY_ERR = 3
    VUD_SYSTEM_ERR = 4
    VUD_CI_TIMEOUT = 5
    VUD_INVALID_RES = 6
    VUD_EXPECTED_FAULT = 7
    VUD_SK_NOT_FOUND = 8
    VUD_SK_TAG = 9
    VUD_NOT_WAITING = 10
    VUD_SYMBOL_NOT_FOUND = 11
    VUD_SYMBOL_NOT_MRAM = 12
    VUD_SYSTEM_THREAD = 13
    VUD_KEY_XCHG = 14


_STRINGS: dict[VudError, str] = {
    VudError.VUD_OK: "success",
    VudError.VUD_RANK_BUSY: "rank is busy",
    VudError.VUD_NOT_FOUND: "no rank found",
    VudError.VUD_MEMORY_ERR: "cannot map rank memory",
    VudError.VUD_SYSTEM_ERR: "cannot open rank device",
    VudError.VUD_CI_TIMEOUT: "control interface timed out",
    VudError.VUD_INVALID_RES: "invalid control interface response",
    VudError.VUD_EXPECTED_FAULT: "DPUs are not all in fault",
    VudError.VUD_SK_NOT_FOUND: "subkernel not found",
    VudError.VUD_SK_TAG: "cannot encrypt and tag subkernel",
    VudError.VUD_NOT_WAITING: "DPUs are not waiting for a message",
    VudError.VUD_SYMBOL_NOT_FOUND: "symbol not found",
    VudError.VUD_SYMBOL_NOT_MRAM: "symbol is not in MRAM",
    VudError.VUD_SYSTEM_THREAD: "cannot create worker thread",
    VudError.VUD_KEY_XCHG: "key exchange failed",
}


def vud_error_str(err: int) -> str:
    """The message of ``err`` (``"unknown error"`` for a value outside the enum)."""
    try:
        return _STRINGS[VudError(err)]
    except ValueError:
        return "unknown error"
