"""Hardware profiles and the cost model that turns work into virtual time.

Every constant lives here, named, with its source and confidence tag from
``spec/timing-model.md``: [V] verified first-party, [S] secondary, [R] PrIM value not checked
against the paper, [D] derived, [A] aiopim assumption (no published figure exists).
Virtual time is an integer number of picoseconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PS_PER_S = 1_000_000_000_000
PS_PER_US = 1_000_000
PS_PER_NS = 1_000

# --- DPU pipeline (timing-model.md §0 anchors 1-2) -------------------------------------------
#: A tasklet issues at most one instruction every 11 cycles (revolver scheduler). [V] uPIMulator
REVOLVER_CYCLES = 11
#: 14-stage pipeline. [V] uPIMulator defaults
PIPELINE_STAGES = 14

# --- MRAM <-> WRAM DMA: cycles = alpha + beta * size (timing-model.md §1e) ---------------------
#: Fixed latency of an ``mram_read`` in DPU cycles. [S] PrIM §3.2 via two summaries
DMA_READ_ALPHA_CYCLES = 77
#: Fixed latency of an ``mram_write`` in DPU cycles. [S] PrIM §3.2
DMA_WRITE_ALPHA_CYCLES = 61
#: Cycles per byte of a DMA transfer (2 B/cycle peak). [S] PrIM §3.2
DMA_BETA_CYCLES_PER_BYTE = 0.5

# --- Host <-> DPU transfers (timing-model.md §1f) -----------------------------------------------
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

# --- Launch, sync, callbacks ---------------------------------------------------------------------
#: Booting the DPUs of a rank (control-interface commands). [A] no published figure
LAUNCH_BOOT_LATENCY_PS = 10 * PS_PER_US
#: Detecting that the DPUs of a rank finished (polling thread). [A]
COMPLETION_POLL_LATENCY_PS = 1 * PS_PER_US
#: A SYNC / SYNC_PARALLEL job itself. [A]
SYNC_JOB_LATENCY_PS = 0
#: Loading a program into a rank (IRAM + WRAM + MRAM images). [A] plus bytes at serial rate
LOAD_JOB_LATENCY_PS = 100 * PS_PER_US
#: Dispatching a host callback job. [A]
CALLBACK_JOB_LATENCY_PS = 1 * PS_PER_US


@dataclass(frozen=True)
class ChipProfile:
    """Characteristics of one DPU hardware version (spec §5.1)."""

    name: str
    frequency_hz: int
    nr_threads: int
    wram_size: int
    iram_instructions: int
    mram_size: int
    atomic_bits: int
    supports_parallel_wram: bool

    @property
    def cycle_ps(self) -> float:
        """Length of one DPU cycle in picoseconds."""
        return PS_PER_S / self.frequency_hz

    def cycles_to_ps(self, cycles: float) -> int:
        """Convert DPU cycles into integer picoseconds (rounded to nearest)."""
        return round(cycles * PS_PER_S / self.frequency_hz)


#: v1A: 350 MHz, 24 tasklets, 64 KiB WRAM, 4096 instructions. [V] SDK docs 03
V1A = ChipProfile("v1A", 350_000_000, 24, 65536, 4096, 64 << 20, 256, False)
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
        return PARALLEL_WRAM_ACCESS_LATENCY_PS + _bytes_time(total, PARALLEL_WRAM_BPS)
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
