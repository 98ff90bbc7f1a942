"""The rank actor: the SDK's strict FIFO job queue with job slots and sticky async errors.

Rules (sdk-reference.md §3.2): only the head job runs; a parallel head job runs even while DPUs of
the rank run, any other head job waits until no DPU of the rank is running. A failed job stores
``0x80000000 | type << 16 | err`` on the rank and flushes the queue; SYNC jobs in the flushed queue
wake their waiters with that error."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import timing
from .._dpulist import format_dpu_ranges
from .._errors import DpuError, DpuErrorCode, JobType, encode_async_error
from .._runtime._kernel import PRIO_LATE, HostWaiter, Kernel
from ._jobs import Job, JobFailed
from ._memory import RowMemory

if TYPE_CHECKING:
    from ._dpu import Dpu
    from ._machine import Machine


class Rank:
    """One rank of 64 DPUs (or fewer) with its job queue."""

    def __init__(self, machine: Machine, index: int, chip: timing.ChipProfile, nr_dpus: int):
        from ._dpu import Dpu

        self.machine = machine
        self.kernel: Kernel = machine.kernel
        self.index = index
        self.chip = chip
        self.actor = (index + 1) << 16
        #: the WRAM and IRAM of the rank's DPUs, a row per DPU (``Dpu.wram`` is row ``index``)
        self.wram_memory = RowMemory(nr_dpus, chip.wram_size)
        self.iram_memory = RowMemory(nr_dpus, chip.iram_instructions * 8)
        self.dpus: list[Dpu] = [Dpu(self, i, chip, self.kernel) for i in range(nr_dpus)]
        for d in self.dpus:
            d.on_stop = self._dpu_stopped
        self.allocated = False
        #: the allocation (a host-side token) that holds this rank; None while free
        self.owner: object | None = None
        #: non-blocking callbacks of this rank still running (dpu_free waits for them)
        self.running_callbacks = 0
        #: the host library that owns the control plane (None: the SDK); other callers are refused
        self.control_owner: str | None = None
        self.nr_job_slots = 16
        self.free_slots = 16
        self.queue: deque[Job] = deque()
        self.current: Job | None = None
        self.job_error = 0
        self.job_error_message = ""
        self.running_dpus = 0
        #: as seen by the host library (cleared after the polling latency)
        self.dpus_running = False
        self.last_launch_type = JobType.LAUNCH_RANK
        self._fault_reported = False
        self._slot_waiters: deque[HostWaiter] = deque()
        self._seq = 0
        #: host pointers per DPU index, recorded by dpu_prepare_xfer
        self.xfer_matrix: dict[int, Any] = {}
        self.callback_matrix: dict[int, Any] = {}
        #: a blocking callback holds the rank (inline execution of its sync calls)
        self._holds: deque[Callable[[Rank], None]] = deque()
        self.held = False
        #: host waiters resolved when the rank has no running DPU and no running job
        self.stop_waiters: list[HostWaiter] = []
        #: host waiters resolved when no DPU of the rank runs (inline launches)
        self.dpu_stop_waiters: list[HostWaiter] = []
        self.kernel.blocked_reporters.append(self.describe_blocked)

    @property
    def enabled_dpus(self) -> list[Dpu]:
        """DPUs visible to iteration and counting."""
        return [d for d in self.dpus if d.enabled]

    # -- submission (host side) ---------------------------------------------------------------
    def submit(self, job: Job) -> None:
        """Append ``job`` (a slot must have been reserved)."""
        self._seq += 1
        job.seq = self._seq
        job.submit_ps = self.kernel.now
        self.queue.append(job)
        rec = self.machine.recorder
        if rec is not None:
            rec.job_submitted(job)
        if self.current is None and len(self.queue) == 1:
            self.kernel.call_soon(self._try_start, None, self.actor)

    def slot_waiter(self) -> HostWaiter:
        """A waiter resolved when a job slot of this rank is freed."""
        w = self.kernel.new_waiter(f"a free job slot on rank {self.index}")
        self._slot_waiters.append(w)
        return w

    # -- execution (kernel side) --------------------------------------------------------------
    def _try_start(self, _: Any = None) -> None:
        if self.current is None and self._holds and not self.held:
            self.held = True
            self._holds.popleft()(self)
        if self.current is not None or self.held or not self.queue:
            self.notify_stopped()
            return
        job = self.queue[0]
        if not job.parallel and self.dpus_running:
            return
        self.current = job
        job.start_ps = self.kernel.now
        rec = self.machine.recorder
        if rec is not None:
            rec.job_started(job)
        try:
            duration = job.start()
        except JobFailed as failure:
            job.info["error"] = failure.message
            self.finish(job, failure.code)
            return
        if duration == 0:
            self._end(job)  # SYNC and other instant jobs: no heap round trip
        elif duration is not None:
            self.kernel.call_at(self.kernel.now + duration, self._end, job, self.actor)

    def _end(self, job: Job) -> None:
        try:
            job.complete()
        except JobFailed as failure:
            job.info["error"] = failure.message
            self.finish(job, failure.code)
            return
        self.finish(job, DpuErrorCode.DPU_OK)

    def finish(self, job: Job, code: DpuErrorCode) -> None:
        """The running head job ended with ``code``."""
        self._retire(job, code)
        if code != DpuErrorCode.DPU_OK:
            self.fail(encode_async_error(job.type, code), job.info.get("error", code.name))
        elif job.sync_group is not None:
            job.sync_group.rank_done(self, 0)
        self._try_start()

    def detach_current(self, job: Job) -> None:
        """Let later jobs run while ``job`` continues (non-blocking callbacks)."""
        self._retire(job, DpuErrorCode.DPU_OK)
        self.kernel.call_soon(self._try_start, None, self.actor)

    def _retire(self, job: Job, code: DpuErrorCode) -> None:
        """Take the running head job off the queue and give its slot back."""
        assert self.current is job
        self.current = None
        if self.queue and self.queue[0] is job:
            self.queue.popleft()
        job.end_ps = self.kernel.now
        self._free_slots(1)
        rec = self.machine.recorder
        if rec is not None:
            rec.job_finished(job, int(code))

    def fail(self, encoded: int, message: str = "") -> None:
        """Store a sticky async error and flush the pending queue (sdk-reference.md §2.2)."""
        self.job_error = encoded
        self._flush(encoded, message)

    def fail_queue_on_free(self) -> None:
        """``dpu_free``: queued jobs are abandoned; waiters learn the set was freed."""
        self._flush(int(DpuErrorCode.DPU_ERR_INVALID_DPU_SET), "the DPU set was freed")

    def _flush(self, error: int, message: str) -> None:
        """Drop every queued job but the running one; SYNC waiters get ``error``."""
        self.job_error_message = message
        keep = self.current
        flushed = [j for j in self.queue if j is not keep]
        self.queue.clear()
        if keep is not None:
            self.queue.append(keep)
        rec = self.machine.recorder
        if rec is not None:
            for j in flushed:
                rec.job_flushed(j, error)
        self._free_slots(len(flushed))
        for j in flushed:
            if j.sync_group is not None:
                j.sync_group.rank_done(self, error)

    def request_hold(self, granted: Callable[[Rank], None]) -> None:
        """Lock the rank once its current job is done (single-call callbacks)."""
        self._holds.append(granted)
        self.kernel.call_soon(self._try_start, None, self.actor)

    def release_hold(self) -> None:
        """Undo :meth:`request_hold`."""
        self.held = False
        self.kernel.call_soon(self._try_start, None, self.actor)

    def notify_stopped(self) -> None:
        """Wake the ``dpu_free`` waiting for this rank if nothing runs on it any more."""
        if (
            self.stop_waiters
            and self.current is None
            and self.running_dpus == 0
            and self.running_callbacks == 0
        ):
            waiters, self.stop_waiters = self.stop_waiters, []
            for w in waiters:
                w.resolve()

    def _free_slots(self, n: int) -> None:
        self.free_slots += n
        while self._slot_waiters and n > 0:
            w = self._slot_waiters.popleft()
            if w.pending:
                w.resolve()
                n -= 1

    # -- DPU run state ---------------------------------------
    def boot_dpus(self, dpus: list[Dpu], launch_type: JobType) -> None:
        """Boot ``dpus`` (the end of a launch job): the rank is running until they stop."""
        self.last_launch_type = launch_type
        self._fault_reported = False
        for d in dpus:
            self.running_dpus += 1
            self.dpus_running = True
            try:
                d.boot()
            except DpuError as err:  # e.g. a binary with no model bound
                d.running = False
                self.running_dpus -= 1
                self.dpus_running = self.running_dpus > 0
                raise JobFailed(err.code, err.detail or str(err)) from err

    def _dpu_stopped(self, dpu: Dpu) -> None:
        self.running_dpus -= 1
        rec = self.machine.recorder
        if rec is not None:
            rec.dpu_stopped(dpu)
        report_fault = dpu.fault is not None and not self._fault_reported
        if report_fault:
            self._fault_reported = True  # the host learns "a DPU is in fault" once per launch
        if report_fault or self.running_dpus == 0:
            self.kernel.call_at(
                self.kernel.now + timing.COMPLETION_POLL_LATENCY_PS,
                self._poll,
                report_fault,
                self.actor,
                PRIO_LATE,
            )

    def _poll(self, fault_seen: bool) -> None:
        if fault_seen:
            self.fail(
                encode_async_error(self.last_launch_type, DpuErrorCode.DPU_ERR_DPU_FAULT),
                self.fault_message(),
            )
        if self.running_dpus == 0:
            self.dpus_running = False
            waiters, self.dpu_stop_waiters = self.dpu_stop_waiters, []
            for w in waiters:
                w.resolve()
        self._try_start()

    # -- diagnostics ---------------------------------------
    def fault_message(self) -> str:
        """The earliest fault of the rank's DPUs in full (where, why), then how many others
        are in fault and where to read their reasons."""
        faults = sorted(
            (d.fault.time_ps, d.index, d.fault) for d in self.dpus if d.fault is not None
        )
        if not faults:
            return "no DPU is in fault"
        text = faults[0][2].describe()
        others = [self.dpus[i] for _t, i, _f in faults[1:]]
        if others:
            n = len(others)
            text += (
                f"; {n} more DPU{'s' if n > 1 else ''} in fault ({format_dpu_ranges(others)}): "
                "DpuSet.faults has the reason of each DPU"
            )
        return text

    def describe_blocked(self) -> list[str]:
        """What this rank is stuck on (for deadlock reports)."""
        lines: list[str] = []
        if self.queue:
            head = self.queue[0]
            state = "running" if self.current is head else "waiting for the rank's DPUs to stop"
            lines.append(
                f"rank {self.index}: head job {head.type.name} {state}; "
                f"{len(self.queue)} job(s) queued"
            )
        if self.running_dpus:
            for d in self.dpus:
                if d.running:
                    blocked = d.blocked_tasklets()
                    if blocked:
                        lines.extend(blocked)
                    else:
                        lines.append(f"DPU {d.name} running")
        return lines
