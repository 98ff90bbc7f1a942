"""Hardware profiles and the cost model that turns work into virtual time.

Every constant lives here, named, with its source and confidence tag from
``docs/sdk-reference.md`` §10: [V] verified first-party, [S] secondary, [R] PrIM value not checked
against the paper, [D] derived, [A] aiopim assumption (no published figure exists).
Virtual time is an integer number of picoseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PS_PER_S = 1_000_000_000_000
PS_PER_US = 1_000_000

#: units of :func:`format_ps`, smallest first
_TIME_UNITS = (("ns", 1_000), ("us", PS_PER_US), ("ms", 1_000_000_000), ("s", PS_PER_S))


def format_ps(ps: int, decimals: int = 3) -> str:
    """A virtual time for people, in the unit its magnitude calls for: ``740 ps``,
    ``192.405 us``, ``10.201 s`` (``0 s`` for zero). Every time aiopim prints for a reader goes
    through here; traces keep exact picoseconds."""
    if ps == 0:
        return "0 s"
    if abs(ps) < 1_000:
        return f"{ps} ps"
    for unit, scale in _TIME_UNITS:
        text = f"{ps / scale:.{decimals}f}"
        if unit == "s" or abs(float(text)) < 1_000:  # 999.9996 us reads 1.000 ms
            return f"{text} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


# --- DPU pipeline (sdk-reference.md §10.1) -------------------------------------------
#: A tasklet issues at most one instruction every 11 cycles (revolver scheduler). [V] uPIMulator
REVOLVER_CYCLES = 11

# --- MRAM <-> WRAM DMA: cycles = alpha + beta * size (sdk-reference.md §10.2) ---------------------
#: Fixed latency of an ``mram_read`` in DPU cycles. [S] PrIM §3.2 via two summaries
DMA_READ_ALPHA_CYCLES = 77
#: Fixed latency of an ``mram_write`` in DPU cycles. [S] PrIM §3.2
DMA_WRITE_ALPHA_CYCLES = 61
#: Cycles per byte of a DMA transfer (2 B/cycle peak). [S] PrIM §3.2
DMA_BETA_CYCLES_PER_BYTE = 0.5
# The issuing tasklet is not charged instructions for a DMA: the address arithmetic and the
# ``ldma``/``sdma`` instruction are inside alpha, which PrIM fitted from one tasklet timing
# ``mram_read`` alone (sdk-reference.md §10.2); charging them again would count them twice.

# --- Instruction costs of compiled kernel code ----------------------------------------------
# Instructions UPMEM's compiler emits per element of the inner loops of PrIM's
# microbenchmarks (one load, the operation, one store, pointer and loop control). Each cost is
# derived ONCE, from the ISA or from one published saturated figure; the curves over tasklet
# counts, DMA sizes and kernels emerge from the pipeline and DMA models. Throughput at
# saturation is f / cost, so the derivations below read "350 MHz / MOPS" (PrIM ran at 350 MHz,
# sdk-reference.md §10.1). Multiplication and division have no hardware instruction: the runtime
# calls a ``mul_step``/``div_step`` routine whose length depends on the operands (§1c, §0 #8);
# the constants are PrIM's averages over its data (``rand()`` inputs).

#: ``x[i] += s`` on 32-bit integers (lw, add, sw, pointer add, compare, branch). [S] PrIM "6 vs
#: 7 instructions"; [V] PrIM hardware log profile/ADD_INT32_tl1.txt (CMU-SAFARI/prim-benchmarks
#: Microbenchmarks/Arithmetic-Throughput): 6.929e7 cycles for 2^20 elements on one tasklet
#: = 6.008 instructions x 11 cycles per element.
LOOP_ADD_INT32_INSTRUCTIONS = 6
#: The same on 64-bit integers (add + addc). [S] PrIM; [V] profile/ADD_INT64_tl1.txt: 8.080e7
#: cycles / (2^20 x 11) = 7.005.
LOOP_ADD_INT64_INSTRUCTIONS = 7
#: Subtraction compiles like addition (sub / subc). [S] "INT32 ADD/SUB"; [R] SUB ~ ADD.
LOOP_SUB_INT32_INSTRUCTIONS = LOOP_ADD_INT32_INSTRUCTIONS
LOOP_SUB_INT64_INSTRUCTIONS = LOOP_ADD_INT64_INSTRUCTIONS
#: ``x[i] *= s``, 32-bit, through the ``mul_step`` routine. [D] from [R] PrIM Fig. 4:
#: 350 / 10.27 MOPS = 34.1.
LOOP_MUL_INT32_INSTRUCTIONS = 34
#: ``x[i] /= s``, 32-bit, through the ``div_step`` routine. [D] from [R] 350 / 11.27 = 31.1.
LOOP_DIV_INT32_INSTRUCTIONS = 31
#: 64-bit multiplication, emulated in software. [D] from [R] 350 / 2.56 = 136.7.
LOOP_MUL_INT64_INSTRUCTIONS = 137
#: 64-bit division, emulated in software. [D] from [R] 350 / 1.40 = 250.
LOOP_DIV_INT64_INSTRUCTIONS = 250

#: Instructions per element of each ``(op, element type)`` loop above (uint* cost as int*).
ARITHMETIC_LOOP_INSTRUCTIONS: dict[tuple[str, str], int] = {
    ("add", "int32"): LOOP_ADD_INT32_INSTRUCTIONS,
    ("sub", "int32"): LOOP_SUB_INT32_INSTRUCTIONS,
    ("mul", "int32"): LOOP_MUL_INT32_INSTRUCTIONS,
    ("div", "int32"): LOOP_DIV_INT32_INSTRUCTIONS,
    ("add", "int64"): LOOP_ADD_INT64_INSTRUCTIONS,
    ("sub", "int64"): LOOP_SUB_INT64_INSTRUCTIONS,
    ("mul", "int64"): LOOP_MUL_INT64_INSTRUCTIONS,
    ("div", "int64"): LOOP_DIV_INT64_INSTRUCTIONS,
}

#: A 64-bit multiplication alone: the MUL loop minus the ADD loop plus the two instructions
#: (add, addc) the call replaces. [D] 137 - 7 + 2
MUL_INT64_CALL_INSTRUCTIONS = LOOP_MUL_INT64_INSTRUCTIONS - LOOP_ADD_INT64_INSTRUCTIONS + 2
#: STREAM COPY inner loop ``b[i] = a[i]`` on uint64 in WRAM (ld, sd, unrolled loop control),
#: per element. [D] from [R] PrIM Fig. 5 WRAM COPY 1,682 MB/s: 16 B x 350 MHz / 1682 = 3.329,
#: taken as 10/3
STREAM_COPY_INSTRUCTIONS = 10 / 3
#: STREAM ADD ``c[i] = a[i] + b[i]`` on uint64 (ld, ld, add, addc, sd, loop control).
#: [D] from [R] PrIM Fig. 5 WRAM ADD 1,770 MB/s: 24 B x 350 / 1770 = 4.746, taken as 4.75
STREAM_ADD_INSTRUCTIONS = 4.75
#: STREAM SCALE ``b[i] = s * a[i]``: the COPY loop plus one 64-bit multiplication. [D]
STREAM_SCALE_INSTRUCTIONS = STREAM_COPY_INSTRUCTIONS + MUL_INT64_CALL_INSTRUCTIONS
#: STREAM TRIAD ``c[i] = a[i] + s * b[i]``: the ADD loop plus one 64-bit multiplication. [D]
STREAM_TRIAD_INSTRUCTIONS = STREAM_ADD_INSTRUCTIONS + MUL_INT64_CALL_INSTRUCTIONS


def loop_instructions(per_element: float, elements: int) -> int:
    """Instructions of a loop over ``elements`` costing ``per_element`` each (rounded)."""
    return round(per_element * elements)


# --- Host <-> DPU transfers (sdk-reference.md §10.3) ------------------------------------------
#: CPU->DPU bandwidth of one DPU, serial transfer, bytes/s. [S] PrIM Fig. 9 (0.33 GB/s)
HOST_TO_DPU_SERIAL_BPS = 0.33e9
#: DPU->CPU bandwidth of one DPU, serial transfer, bytes/s. [S]/[R] PrIM Fig. 9 (0.12 GB/s)
DPU_TO_HOST_SERIAL_BPS = 0.12e9
#: CPU->DPU bandwidth of one full rank (64 DPUs) in parallel, bytes/s. [S] PrIM Fig. 10
RANK_HOST_TO_DPU_PARALLEL_BPS = 6.68e9
#: DPU->CPU bandwidth of one full rank in parallel, bytes/s. [R] PrIM Fig. 10
RANK_DPU_TO_HOST_PARALLEL_BPS = 4.74e9
#: Broadcast bandwidth of one rank (bytes delivered to all DPUs / time). [R] PrIM Fig. 10
RANK_BROADCAST_BPS = 16.88e9
#: Fixed cost of one transfer job on a rank. [D] from Loremkang/upmem-sdk-light UPMEM_1.txt:
#: 1 KB/DPU over 32 ranks costs ~0.47 ms (send) beyond the bytes; the 32 rank jobs run in
#: parallel on worker threads sharing 2x16 cores, so we charge 30 us per rank job. [A] split
TRANSFER_JOB_LATENCY_PS = 30 * PS_PER_US
#: Extra fixed cost of a DPU->CPU job (recv costs ~0.9 ms vs 0.47 ms for send). [D] same file
FROM_DPU_EXTRA_LATENCY_PS = 30 * PS_PER_US
#: A parallel WRAM access (``DPU_XFER_PARALLEL``) goes through the v1B control interface,
#: "suitable for a few tens of bytes" (doc 263); no bandwidth is published. [A]
PARALLEL_WRAM_ACCESS_LATENCY_PS = 2 * PS_PER_US
#: Bytes/s of the parallel WRAM path per rank. [A] (limited, per doc 263)
PARALLEL_WRAM_BPS = 0.2e9

# --- WRAM FIFOs (sdk-reference.md §4) ---------------------------------------------------------
#: ``dpu_fifo_push_xfer`` retries at most this many times by default. [H] api/src/api/dpu_fifo.c
FIFO_PUSH_MAX_RETRIES = 1000
#: Sleep between two push attempts, in microseconds, by default. [H] api/src/api/dpu_fifo.c
FIFO_TIME_FOR_RETRY_US = 10
# Host side: a push/flush pass reads every DPU's pointer pair (16 B) in one parallel access, then
# writes elements and pointers, each write being one parallel access (parallel_wram_access_ps).
#: DPU side instruction counts of wramfifo.c, estimated from its C code on the 32-bit DPU ISA
#: (a 64-bit pointer compare is two loads and a compare per word). [A]
FIFO_CHECK_INSTRUCTIONS = 6
#: ``input_fifo_peek``: load, mask, scale, add. [A]
FIFO_PEEK_INSTRUCTIONS = 5
#: ``input_fifo_pop`` / ``nb_reserved`` update: 64-bit load, add with carry, store. [A]
FIFO_POP_INSTRUCTIONS = 4
#: ``output_fifo_push`` besides the copy of the element. [A]
FIFO_PUSH_INSTRUCTIONS = 8
#: One iteration of the ``process_inputs_*`` loop test / a polling loop. [A]
FIFO_POLL_LOOP_INSTRUCTIONS = 16
#: ``memcpy`` of 8 bytes (one ``ld`` and one ``sd``). [A]
MEMCPY_INSTRUCTIONS_PER_8_BYTES = 2


def memcpy_instructions(nbytes: int) -> int:
    """Instructions of a WRAM-to-WRAM copy of ``nbytes`` (multiple of 8)."""
    return MEMCPY_INSTRUCTIONS_PER_8_BYTES * (-(-nbytes // 8))


def parallel_wram_access_ps(nbytes: int) -> int:
    """One access of a rank's WRAM through the parallel (v1B control-interface) path."""
    return PARALLEL_WRAM_ACCESS_LATENCY_PS + _bytes_time(nbytes, PARALLEL_WRAM_BPS)


# --- Launch, sync, callbacks ---------------------------------------------------------------------
#: Booting the DPUs of a rank (control-interface commands). [A] no published figure
LAUNCH_BOOT_LATENCY_PS = 10 * PS_PER_US
#: Detecting that the DPUs of a rank finished (polling thread). [A]
COMPLETION_POLL_LATENCY_PS = 1 * PS_PER_US
#: Loading a program into a rank (IRAM + WRAM + MRAM images). [A] plus bytes at serial rate
LOAD_JOB_LATENCY_PS = 100 * PS_PER_US


#: v1A's linker script skips the first 200 atomic bits ("issue on ATOMIC HW buffer on v1A"),
#: leaving 56 for mutexes. [T] DPURTE.cpp (sdk-reference.md §5.1)
V1A_ATOMIC_DISPLACEMENT = 200


@dataclass(frozen=True)
class ChipProfile:
    """Characteristics of one DPU hardware version (sdk-reference.md §5.1)."""

    name: str
    frequency_hz: int
    nr_threads: int
    wram_size: int
    iram_instructions: int
    mram_size: int
    atomic_bits: int
    supports_parallel_wram: bool
    #: atomic bits the linker script keeps from programs
    reserved_atomic_bits: int = 0

    @property
    def user_atomic_bits(self) -> int:
        """Atomic bits a program may use (mutexes, locks)."""
        return self.atomic_bits - self.reserved_atomic_bits

    @property
    def cycle_ps(self) -> float:
        """Length of one DPU cycle in picoseconds."""
        return PS_PER_S / self.frequency_hz

    def cycles_to_ps(self, cycles: float) -> int:
        """Convert DPU cycles into integer picoseconds (rounded to nearest)."""
        return round(cycles * PS_PER_S / self.frequency_hz)


#: v1A: 350 MHz, 24 tasklets, 64 KiB WRAM, 4096 instructions. [V] SDK docs 03
V1A = ChipProfile(
    "v1A", 350_000_000, 24, 65536, 4096, 64 << 20, 256, False, V1A_ATOMIC_DISPLACEMENT
)
#: v1B: 400 MHz, 16 tasklets, 62 KiB WRAM, 3968 instructions, parallel WRAM access. [V] docs 03/263
V1B = ChipProfile("v1B", 400_000_000, 16, 63488, 3968, 64 << 20, 64, True)

CHIPS: dict[str, ChipProfile] = {"v1A": V1A, "v1B": V1B}


def transfer_time_ps(kind: str, bytes_per_dpu: list[int]) -> int:
    """Duration of one rank's host transfer job.

    ``kind`` is ``"to"``, ``"from"``, ``"broadcast"``, ``"parallel"`` (a parallel WRAM access)
    or ``"serial"``; ``bytes_per_dpu`` lists the bytes moved for each DPU taking part.
    Bandwidth grows with the number of DPUs (one DPU: the serial rate) up to the rank's
    parallel rate [S] PrIM Figs. 9-10.
    """
    n = len(bytes_per_dpu)
    total = sum(bytes_per_dpu)
    if n == 0:
        return TRANSFER_JOB_LATENCY_PS
    if kind == "parallel":
        return parallel_wram_access_ps(total)
    if kind == "to":
        bw = min(n * HOST_TO_DPU_SERIAL_BPS, RANK_HOST_TO_DPU_PARALLEL_BPS)
        return TRANSFER_JOB_LATENCY_PS + _bytes_time(total, bw)
    if kind == "from":
        bw = min(n * DPU_TO_HOST_SERIAL_BPS, RANK_DPU_TO_HOST_PARALLEL_BPS)
        return TRANSFER_JOB_LATENCY_PS + FROM_DPU_EXTRA_LATENCY_PS + _bytes_time(total, bw)
    if kind == "broadcast":
        bw = min(n * HOST_TO_DPU_SERIAL_BPS, RANK_BROADCAST_BPS)
        return TRANSFER_JOB_LATENCY_PS + _bytes_time(total, bw)
    raise ValueError(f"unknown transfer kind {kind!r}")


def _bytes_time(nbytes: int, bytes_per_s: float) -> int:
    return math.ceil(nbytes * PS_PER_S / bytes_per_s)


def load_time_ps(image_bytes: int) -> int:
    """Duration of loading a program of ``image_bytes`` into one rank's DPUs."""
    return LOAD_JOB_LATENCY_PS + _bytes_time(image_bytes, RANK_BROADCAST_BPS)


def dma_cycles(size: int, *, write: bool) -> tuple[float, float]:
    """(engine occupancy, latency) in cycles of one MRAM DMA of ``size`` bytes.

    The engine is busy for the bandwidth part (beta * size) and the request completes alpha
    cycles later, so DMAs of different tasklets overlap their fixed latency.
    """
    busy = DMA_BETA_CYCLES_PER_BYTE * size
    alpha = DMA_WRITE_ALPHA_CYCLES if write else DMA_READ_ALPHA_CYCLES
    return busy, alpha + busy


# --- DPU runtime library calls (aiopim.dpu) ----------------------------------------------------
# Instructions a tasklet issues inside a runtime call, charged through the pipeline like
# ``Tasklet.compute``. No hardware measurement of these calls is published; [D] figures count
# the instructions of the runtime's source path (UPMEM dpu-rt ``syslib``/``stdlib``, SDK
# 2025.1.0), including call and return; [A] figures are aiopim estimates of the same kind for
# functions whose source was not read. A spinning wait (a taken mutex, a set virtual-mutex bit)
# is modelled as parking the tasklet, so the retries themselves are not charged.

#: ``mutex_lock``: one ``acquire`` when the bit is free (inline). [D] mutex.h
MUTEX_LOCK_INSTRUCTIONS = 1
#: ``mutex_trylock``: ``acquire`` and the test of its result. [D] mutex.h
MUTEX_TRYLOCK_INSTRUCTIONS = 2
#: ``mutex_unlock``: one ``release`` (inline). [D] mutex.h
MUTEX_UNLOCK_INSTRUCTIONS = 1
#: ``mutex_pool_lock``/``_unlock``: mask the id, index the pool, then the mutex operation.
#: [D] mutex_pool.h
MUTEX_POOL_INSTRUCTIONS = 3
#: ``vmutex_lock``: 6 address/mask instructions + acquire, lbu, or, sb, release, jeq. [D] vmutex.h
VMUTEX_LOCK_INSTRUCTIONS = 12
#: ``vmutex_unlock``: 7 address/mask instructions + acquire, lbu, and, sb, release. [D] vmutex.h
VMUTEX_UNLOCK_INSTRUCTIONS = 12
#: ``barrier_wait``: call, lock, decrement and test the count, wake or stop, unlock. [A]
BARRIER_WAIT_INSTRUCTIONS = 14
#: ``sem_take`` / ``sem_give``: call, lock, update the count, queue or wake, unlock. [A]
SEM_TAKE_INSTRUCTIONS = 10
SEM_GIVE_INSTRUCTIONS = 10
#: ``handshake_notify`` / ``handshake_wait_for``: call, lock, test the slot, stop or wake. [A]
HANDSHAKE_INSTRUCTIONS = 10
#: ``mem_alloc``: call, acquire, align, add with carry, bound check, store, release, return.
#: [D] alloc.c
MEM_ALLOC_INSTRUCTIONS = 12
#: ``mem_reset``: call, acquire, store, release, return. [D] alloc.c
MEM_RESET_INSTRUCTIONS = 6
#: ``fsb_alloc`` beyond its ``mem_alloc`` calls: set-up, plus linking each block. [A]
FSB_ALLOC_INSTRUCTIONS = 10
FSB_ALLOC_PER_BLOCK_INSTRUCTIONS = 3
#: ``fsb_get`` / ``fsb_free``: call, lock, pop or push the free-list head, unlock. [A]
FSB_GET_INSTRUCTIONS = 10
FSB_FREE_INSTRUCTIONS = 10
#: ``buddy_init`` / ``buddy_alloc`` / ``buddy_free`` (bitmap walk over the levels): fixed part
#: and per level of the buddy tree visited. [A]
BUDDY_CALL_INSTRUCTIONS = 20
BUDDY_PER_LEVEL_INSTRUCTIONS = 8
#: ``seqread_init`` / ``seqread_seek``: page arithmetic and the reader update. [A]
SEQREAD_SEEK_INSTRUCTIONS = 12
#: ``seqread_get``: add, compare with the page end, branch (inline fast path). [A]
SEQREAD_GET_INSTRUCTIONS = 4
#: ``seqread_tell``: subtract and add. [A]
SEQREAD_TELL_INSTRUCTIONS = 3
#: ``mram_read_unaligned`` / ``mram_write_unaligned`` address arithmetic (without their DMAs
#: and virtual-mutex calls). [A] mram_unaligned.c
MRAM_UNALIGNED_INSTRUCTIONS = 10
#: Per byte merged into the 8-byte buffer of ``mram_write_unaligned``'s prolog/epilog. [A]
MRAM_UNALIGNED_PER_BYTE_INSTRUCTIONS = 3
#: An access to an ``__mram`` variable through the software cache: address and word
#: arithmetic around the 8-byte ``ldma``/``sdma``. [A]
SOFT_CACHE_ACCESS_INSTRUCTIONS = 4
#: ``perfcounter_get`` (``time`` + shift) and ``perfcounter_config`` (``time_cfg`` + shift +
#: mode checks). [D] perfcounter.c
PERFCOUNTER_GET_INSTRUCTIONS = 4
PERFCOUNTER_CONFIG_INSTRUCTIONS = 8
#: ``printf``: open/close the print sequence (lock, state), plus per byte cached. [A] stdio.c
PRINTF_INSTRUCTIONS = 30
PRINTF_PER_BYTE_INSTRUCTIONS = 6

# --- Mailboxes (the 2017 run-time configuration: ``sysmbox N``, ``tasklet add ... N``) ---------
# No cycle figure was ever published for the 2017 runtime's mailbox calls; the costs below are
# built from the runtime calls above, which they resemble instruction for instruction.
#: ``sys_mbox_recv()``: call, load the system mailbox address, return; the same shape as
#: ``mem_reset`` minus its lock and store. [D] MEM_RESET_INSTRUCTIONS - 3
SYS_MBOX_RECV_INSTRUCTIONS = MEM_RESET_INSTRUCTIONS - 3
#: ``mbox_recv()``: ``sys_mbox_recv`` plus finding this tasklet's mailbox (``me()``, a multiply
#: by the mailbox stride as a shift, an add). [D] SYS_MBOX_RECV_INSTRUCTIONS + 3
MBOX_RECV_INSTRUCTIONS = SYS_MBOX_RECV_INSTRUCTIONS + 3
#: ``mbox_send(buf, size)`` before its copy: ``mbox_recv``'s address arithmetic plus a size
#: check against the mailbox and its branch; the copy itself costs ``memcpy_instructions(size)``.
#: [D] MBOX_RECV_INSTRUCTIONS + 2
MBOX_SEND_INSTRUCTIONS = MBOX_RECV_INSTRUCTIONS + 2
#: Bytes in one mailbox word (the 2017 configuration counts mailboxes in 32-bit words). [V]
#: upmem/dpu_demo checksum (``sysmbox 1`` holds one ``uint32_t``)
MBOX_WORD_BYTES = 4

# --- Memclave (aiopim.memclave) -----------------------------------------------------------------
# Sources: the Memclave paper (Choudhari, van Rissenbeck, Rossow, "Memclave: Secure In-memory
# Enclave for Untrusted Hosts", USENIX Security 2026, abstract), the client library
# fabianvanrissenbeck/memclave-client-library (mainpage.dox; data/mram.csv, host<->MRAM transfer
# benchmarks: rate = 64 x bytes per DPU / time, in MiB/s as the time column gives).
PS_PER_MS = 1_000_000_000
_MIB = 1 << 20

#: The DPU side of the key exchange (stages XCHG_2/XCHG_3: a naive 2048-bit modular
#: exponentiation on the DPU). [S] mainpage.dox: "The key exchange will take roughly 10s"
MEMCLAVE_KEY_EXCHANGE_PS = 10 * PS_PER_S
#: XCHG_1: the DPU publishes its public key and counter. [A] small next to the exchange
MEMCLAVE_XCHG1_PS = 1 * PS_PER_MS
#: The trusted loader's authenticated load of a subkernel (decrypt, verify, scan, load).
#: [S] paper abstract: "one-time ~100 ms authenticated load"
MEMCLAVE_AUTH_LOAD_PS = 100 * PS_PER_MS
#: The MSG subkernel handling one message (or resuming after a subkernel) before it faults
#: back to the host. [A]
MEMCLAVE_MSG_PS = 10 * PS_PER_US
#: One virtual-CI mailbox round trip through the hypervisor (qry_mux / rel_mux). [A]
MEMCLAVE_VCI_ROUND_TRIP_PS = 20 * PS_PER_US
#: Fixed cost of one Memclave transfer call. [D] data/mram.csv: a 64 B broadcast on one
#: thread takes 7,196 cycles at 2.095 GHz = 3.4 us, almost all of it fixed
MEMCLAVE_TRANSFER_LATENCY_PS = 3 * PS_PER_US
#: Broadcast rate (bytes delivered to the 64 DPUs per second), one worker. [D] data/mram.csv
#: plateau of the 1-thread rows, 16 KiB - 4 MiB per DPU: ~9,200 MiB/s
MEMCLAVE_BROADCAST_BPS_1 = 9200 * _MIB
#: ... with 8 workers. [S] data/mram.csv, best 8-thread rate: ~14.4 GB/s
MEMCLAVE_BROADCAST_BPS_8 = 14.4e9
#: Per-DPU transfer rate (64 buffers), one worker. [D] data/mram.csv 1-thread rows of 4 MiB and
#: more per DPU: ~665 MiB/s
MEMCLAVE_TRANSFER_BPS_1 = 665 * _MIB
#: ... with 8 workers. [S] data/mram.csv, best 8-thread rate: ~7.5 GB/s
MEMCLAVE_TRANSFER_BPS_8 = 7.5e9
#: Gather rate, one worker. [D] data/mram.csv 1-thread rows of 1 MiB and more: ~242 MiB/s
MEMCLAVE_GATHER_BPS_1 = 242 * _MIB
#: ... with 8 workers. [S] data/mram.csv, best 8-thread rate: ~2.0 GB/s
MEMCLAVE_GATHER_BPS_8 = 2.0e9

_MEMCLAVE_RATES = {
    "broadcast": (MEMCLAVE_BROADCAST_BPS_1, MEMCLAVE_BROADCAST_BPS_8),
    "transfer": (MEMCLAVE_TRANSFER_BPS_1, MEMCLAVE_TRANSFER_BPS_8),
    "gather": (MEMCLAVE_GATHER_BPS_1, MEMCLAVE_GATHER_BPS_8),
}


def memclave_rate_bps(kind: str, nr_workers: int) -> float:
    """Rank bandwidth of a Memclave transfer with ``nr_workers`` threads.

    Linear between the one-worker and eight-worker figures, flat beyond eight (the benchmark
    shows no gain past 8 threads). [A] interpolation between two [D]/[S] anchors.
    """
    one, eight = _MEMCLAVE_RATES[kind]
    n = min(max(nr_workers, 1), 8)
    return one + (eight - one) * (n - 1) / 7


def memclave_transfer_ps(kind: str, total_bytes: int, nr_workers: int) -> int:
    """Duration of one Memclave transfer moving ``total_bytes`` over the rank.

    ``kind`` is ``"broadcast"`` (bytes counted once per DPU), ``"transfer"`` or ``"gather"``.
    """
    return MEMCLAVE_TRANSFER_LATENCY_PS + _bytes_time(
        total_bytes, memclave_rate_bps(kind, nr_workers)
    )
