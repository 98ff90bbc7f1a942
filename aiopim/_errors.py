"""SDK error codes, job types and the exceptions aiopim raises."""

from __future__ import annotations

from enum import IntEnum

from ._dpulist import group_blocked


class DpuErrorCode(IntEnum):
    """``dpu_error_t`` of SDK 2025.1.0 (values exact)."""

    DPU_OK = 0
    DPU_ERR_INTERNAL = 1
    DPU_ERR_SYSTEM = 2
    DPU_ERR_DRIVER = 3
    DPU_ERR_ALLOCATION = 4
    DPU_ERR_INVALID_DPU_SET = 5
    DPU_ERR_INVALID_THREAD_ID = 6
    DPU_ERR_INVALID_NOTIFY_ID = 7
    DPU_ERR_INVALID_WRAM_ACCESS = 8
    DPU_ERR_INVALID_IRAM_ACCESS = 9
    DPU_ERR_INVALID_MRAM_ACCESS = 10
    DPU_ERR_INVALID_SYMBOL_ACCESS = 11
    DPU_ERR_MRAM_BUSY = 12
    DPU_ERR_TRANSFER_ALREADY_SET = 13
    DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER = 14
    DPU_ERR_WRAM_FIFO_FULL = 15
    DPU_ERR_NO_PROGRAM_LOADED = 16
    DPU_ERR_DIFFERENT_DPU_PROGRAMS = 17
    DPU_ERR_CORRUPTED_MEMORY = 18
    DPU_ERR_DPU_DISABLED = 19
    DPU_ERR_DPU_ALREADY_RUNNING = 20
    DPU_ERR_INVALID_MEMORY_TRANSFER = 21
    DPU_ERR_INVALID_LAUNCH_POLICY = 22
    DPU_ERR_DPU_FAULT = 23
    DPU_ERR_ELF_INVALID_FILE = 24
    DPU_ERR_ELF_NO_SUCH_FILE = 25
    DPU_ERR_ELF_NO_SUCH_SECTION = 26
    DPU_ERR_TIMEOUT = 27
    DPU_ERR_INVALID_PROFILE = 28
    DPU_ERR_UNKNOWN_SYMBOL = 29
    DPU_ERR_LOG_FORMAT = 30
    DPU_ERR_LOG_CONTEXT_MISSING = 31
    DPU_ERR_LOG_BUFFER_TOO_SMALL = 32
    DPU_ERR_VPD_INVALID_FILE = 33
    DPU_ERR_VPD_NO_REPAIR = 34
    DPU_ERR_NO_THREAD_PER_RANK = 35
    DPU_ERR_INVALID_BUFFER_SIZE = 36
    DPU_ERR_NONBLOCKING_SYNC_CALLBACK = 37
    DPU_ERR_TOO_MANY_TASKLETS = 38
    DPU_ERR_SG_TOO_MANY_BLOCKS = 39
    DPU_ERR_SG_LENGTH_MISMATCH = 40
    DPU_ERR_SG_NOT_ACTIVATED = 41
    DPU_ERR_SG_NOT_MRAM_SYMBOL = 42
    DPU_ERR_ASYNC_JOBS = 0x80000000


class JobType(IntEnum):
    """``dpu_job_type`` numbers of the host library (they appear in async error values)."""

    INVALID = 0
    LAUNCH_RANK = 1
    LAUNCH_DPU = 2
    SYNC = 3
    SYNC_PARALLEL = 4
    COPY_WRAM_TO_MATRIX = 5
    PARALLEL_COPY_WRAM_TO_MATRIX = 6
    PARALLEL_FIFO_PUSH = 7
    COPY_IRAM_TO_MATRIX = 8
    COPY_MRAM_TO_MATRIX = 9
    COPY_WRAM_FROM_MATRIX = 10
    PARALLEL_COPY_WRAM_FROM_MATRIX = 11
    PARALLEL_FIFO_FLUSH = 12
    COPY_IRAM_FROM_MATRIX = 13
    COPY_MRAM_FROM_MATRIX = 14
    COPY_WRAM_TO_RANK = 15
    COPY_IRAM_TO_RANK = 16
    COPY_MRAM_TO_RANK = 17
    CALLBACK = 18
    CALLBACK_PARALLEL = 19
    LOAD = 20


PARALLEL_JOB_TYPES = frozenset(
    {
        JobType.PARALLEL_COPY_WRAM_TO_MATRIX,
        JobType.PARALLEL_COPY_WRAM_FROM_MATRIX,
        JobType.PARALLEL_FIFO_PUSH,
        JobType.PARALLEL_FIFO_FLUSH,
        JobType.CALLBACK_PARALLEL,
        JobType.SYNC_PARALLEL,
    }
)

ASYNC_JOB_TYPE_SHIFT = 16
_ASYNC_FLAG = 0x80000000

_MESSAGES: dict[DpuErrorCode, str] = {
    DpuErrorCode.DPU_OK: "success",
    DpuErrorCode.DPU_ERR_INTERNAL: "internal error",
    DpuErrorCode.DPU_ERR_SYSTEM: "system error",
    DpuErrorCode.DPU_ERR_DRIVER: "driver error",
    DpuErrorCode.DPU_ERR_ALLOCATION: "allocation error",
    DpuErrorCode.DPU_ERR_INVALID_DPU_SET: "invalid DPU set",
    DpuErrorCode.DPU_ERR_INVALID_THREAD_ID: "invalid thread id",
    DpuErrorCode.DPU_ERR_INVALID_NOTIFY_ID: "invalid notify id",
    DpuErrorCode.DPU_ERR_INVALID_WRAM_ACCESS: "invalid WRAM access",
    DpuErrorCode.DPU_ERR_INVALID_IRAM_ACCESS: "invalid IRAM access",
    DpuErrorCode.DPU_ERR_INVALID_MRAM_ACCESS: "invalid MRAM access",
    DpuErrorCode.DPU_ERR_INVALID_SYMBOL_ACCESS: "invalid symbol access",
    DpuErrorCode.DPU_ERR_MRAM_BUSY: "MRAM is busy",
    DpuErrorCode.DPU_ERR_TRANSFER_ALREADY_SET: "transfer already set",
    DpuErrorCode.DPU_ERR_INVALID_PARALLEL_MEMORY_TRANSFER: "invalid parallel memory transfer",
    DpuErrorCode.DPU_ERR_WRAM_FIFO_FULL: "WRAM FIFO is full",
    DpuErrorCode.DPU_ERR_NO_PROGRAM_LOADED: "no program loaded",
    DpuErrorCode.DPU_ERR_DIFFERENT_DPU_PROGRAMS: "different programs loaded",
    DpuErrorCode.DPU_ERR_CORRUPTED_MEMORY: "corrupted memory",
    DpuErrorCode.DPU_ERR_DPU_DISABLED: "DPU is disabled",
    DpuErrorCode.DPU_ERR_DPU_ALREADY_RUNNING: "DPU is already running",
    DpuErrorCode.DPU_ERR_INVALID_MEMORY_TRANSFER: "invalid memory transfer",
    DpuErrorCode.DPU_ERR_INVALID_LAUNCH_POLICY: "invalid launch policy",
    DpuErrorCode.DPU_ERR_DPU_FAULT: "DPU is in fault",
    DpuErrorCode.DPU_ERR_ELF_INVALID_FILE: "invalid ELF file",
    DpuErrorCode.DPU_ERR_ELF_NO_SUCH_FILE: "no such ELF file",
    DpuErrorCode.DPU_ERR_ELF_NO_SUCH_SECTION: "no such ELF section",
    DpuErrorCode.DPU_ERR_TIMEOUT: "timeout",
    DpuErrorCode.DPU_ERR_INVALID_PROFILE: "invalid profile",
    DpuErrorCode.DPU_ERR_UNKNOWN_SYMBOL: "unknown symbol",
    DpuErrorCode.DPU_ERR_LOG_FORMAT: "log format error",
    DpuErrorCode.DPU_ERR_LOG_CONTEXT_MISSING: "log context missing",
    DpuErrorCode.DPU_ERR_LOG_BUFFER_TOO_SMALL: "log buffer too small",
    DpuErrorCode.DPU_ERR_VPD_INVALID_FILE: "invalid VPD file",
    DpuErrorCode.DPU_ERR_VPD_NO_REPAIR: "no repair in VPD",
    DpuErrorCode.DPU_ERR_NO_THREAD_PER_RANK: "no thread per rank",
    DpuErrorCode.DPU_ERR_INVALID_BUFFER_SIZE: "invalid buffer size",
    DpuErrorCode.DPU_ERR_NONBLOCKING_SYNC_CALLBACK: "non-blocking synchronous callback",
    DpuErrorCode.DPU_ERR_TOO_MANY_TASKLETS: "too many tasklets",
    DpuErrorCode.DPU_ERR_SG_TOO_MANY_BLOCKS: "too many scatter/gather blocks",
    DpuErrorCode.DPU_ERR_SG_LENGTH_MISMATCH: "scatter/gather length mismatch",
    DpuErrorCode.DPU_ERR_SG_NOT_ACTIVATED: "scatter/gather not activated",
    DpuErrorCode.DPU_ERR_SG_NOT_MRAM_SYMBOL: "scatter/gather on a non-MRAM symbol",
    DpuErrorCode.DPU_ERR_ASYNC_JOBS: "asynchronous jobs error",
}


def encode_async_error(job_type: JobType, code: DpuErrorCode) -> int:
    """The value the SDK stores for a failed asynchronous job."""
    return _ASYNC_FLAG | (int(job_type) << ASYNC_JOB_TYPE_SHIFT) | (int(code) & 0xFFFF)


def decode_error(value: int) -> tuple[DpuErrorCode, JobType | None]:
    """Split a C return value into its base code and (for async errors) the job type."""
    if value & _ASYNC_FLAG:
        base = value & 0xFFFF
        jt = (value >> ASYNC_JOB_TYPE_SHIFT) & 0x7FFF
        return _code_of(base), (
            JobType(jt) if jt in JobType._value2member_map_ else JobType.INVALID
        )
    return _code_of(value), None


def _code_of(value: int) -> DpuErrorCode:
    if value in DpuErrorCode._value2member_map_:
        return DpuErrorCode(value)
    return DpuErrorCode.DPU_ERR_INTERNAL


def dpu_error_to_string(value: int) -> str:
    """Render an error value as ``dpu_error_to_string`` does."""
    code, job_type = decode_error(int(value))
    if job_type is not None:
        return (
            f"asynchronous operation error ({job_type.name}): "
            f"{_MESSAGES.get(code, 'unknown error')} (0x{int(value):08x})"
        )
    return _MESSAGES.get(code, "unknown error")


class DpuError(Exception):
    """An SDK error: ``.code`` is the base :class:`DpuErrorCode`, ``.value`` the C return value."""

    def __init__(self, value: int, message: str = "") -> None:
        self.value = int(value)
        self.code, self.job_type = decode_error(self.value)
        self.detail = message
        text = f"{self.code.name} ({self.value if self.job_type is None else hex(self.value)})"
        if self.job_type is not None:
            text = f"{self.code.name} in asynchronous {self.job_type.name} job ({self.value:#010x})"
        super().__init__(f"{text}: {message}" if message else text)

    @property
    def is_async(self) -> bool:
        """True for a sticky asynchronous-job error (``DPU_ERR_ASYNC_JOBS`` bit set)."""
        return self.job_type is not None


class DeadlockError(RuntimeError):
    """Nothing can ever wake the blocked host tasks: raised instead of hanging."""

    def __init__(self, blocked: list[str], now_ps: int) -> None:
        #: every blocked host task, rank and tasklet, one line each
        self.blocked = blocked
        self.now_ps = now_ps
        #: :attr:`blocked` with identical states grouped and long lists cut (the message's)
        self.summary = group_blocked(blocked)
        lines = "\n  ".join(self.summary) if blocked else "(no emulator actor is waiting)"
        super().__init__(
            f"deadlock at t={now_ps / 1e12:.9f}s: every host task is blocked and no emulated "
            f"event can ever wake them. Blocked:\n  {lines}"
        )


class TimeLimitError(RuntimeError):
    """The run reached its virtual-time limit (``aiopim.run(..., time_limit=)``, ``--time-limit``)
    before the host program returned: raised instead of running on."""

    def __init__(self, limit_ps: int, now_ps: int, running: list[str], blocked: list[str]) -> None:
        self.limit_ps = limit_ps
        self.now_ps = now_ps
        #: where each DPU still running was (grouped: DPUs at the same place share a line)
        self.running = running
        #: what the host tasks were waiting for (``host task waiting for ...``)
        self.blocked = blocked
        dpus = "\n  ".join(running) if running else "(no DPU is running)"
        waits = "".join(f"\n  {line}" for line in blocked)
        super().__init__(
            f"time limit of {limit_ps / 1e12:.9f}s of virtual time reached at "
            f"t={now_ps / 1e12:.9f}s: the run stopped. DPUs still running:\n  {dpus}{waits}\n"
            "Make the DPU program stop, or give the run more virtual time (time_limit=)."
        )
