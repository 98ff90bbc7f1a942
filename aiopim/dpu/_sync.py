"""Mutexes, semaphores, handshakes, mutex pools and virtual mutexes (sdk-reference.md §5.5).

Where each object's state lives follows the runtime: a semaphore's count and a virtual
mutex's bit array are WRAM data (they persist across boots, like barriers); hardware mutexes
are atomic bits, released by the bootstrap at every boot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import timing
from .._runtime._kernel import WaitQueue
from ._base import TaskletBase
from ._errno import EALREADY
from ._runner import DpuFault

if TYPE_CHECKING:
    from ._program import MutexDecl


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


@dataclass(frozen=True)
class SemaphoreDecl:
    """``SEMAPHORE_INIT(name, count)``."""

    name: str
    count: int


@dataclass(frozen=True)
class MutexPoolDecl:
    """``MUTEX_POOL_INIT(name, nb_mutexes)``: ``nb_mutexes`` hardware mutexes (a power of 2)."""

    name: str
    nb_mutexes: int

    def __post_init__(self) -> None:
        if not _power_of_two(self.nb_mutexes):
            raise ValueError("the number of hardware mutexes of a pool must be a power of 2")


@dataclass(frozen=True)
class VMutexDecl:
    """``VMUTEX_INIT(name, nb_vmutexes, nb_mutexes)``: virtual mutexes (a multiple of 8) over
    hardware mutexes (a power of 2)."""

    name: str
    nb_vmutexes: int
    nb_mutexes: int

    def __post_init__(self) -> None:
        if not _power_of_two(self.nb_mutexes):
            raise ValueError("the number of hardware mutexes must be a power of 2")
        if self.nb_vmutexes <= 0 or self.nb_vmutexes % 8:
            raise ValueError("the number of virtual mutexes must be a positive multiple of 8")


class _Mutex:
    __slots__ = ("locked", "queue")

    def __init__(self, label: str) -> None:
        self.locked = False
        self.queue = WaitQueue(label)


class _Semaphore:
    __slots__ = ("count", "queue")

    def __init__(self, count: int, label: str) -> None:
        self.count = count
        self.queue = WaitQueue(label)


class _VMutex:
    __slots__ = ("bits", "queues")

    def __init__(self, nb_vmutexes: int) -> None:
        self.bits = bytearray(nb_vmutexes >> 3)
        self.queues: dict[int, WaitQueue] = {}


class _Handshake:
    """One notifier's slot: at most one waiter, or the notifier itself waiting."""

    __slots__ = ("notifier", "waiter")

    def __init__(self, tasklet: int) -> None:
        self.notifier = WaitQueue(f"handshake_notify (tasklet {tasklet})")
        self.waiter = WaitQueue(f"handshake_wait_for({tasklet})")


#: the virtual mutexes ``mram_write_unaligned`` uses (mram_unaligned.c: 2^11 over 1 mutex)
MRAM_UNALIGNED_VMUTEX = VMutexDecl("__mram_unaligned_access_virtual_locks", 1 << 11, 1)


class SyncMixin(TaskletBase):
    """Mutexes, semaphores, handshakes, mutex pools and virtual mutexes for :class:`Tasklet`."""

    # -- hardware mutexes ---------------------------------------
    def _hw_mutex(self, name: str) -> _Mutex:
        mutexes: dict[str, _Mutex] = self.dpu.boot_state.setdefault("mutexes", {})
        mx = mutexes.get(name)
        if mx is None:
            mx = mutexes[name] = _Mutex(f"mutex {name!r}")
        return mx

    async def _hw_lock(self, name: str) -> None:
        self._pending += timing.MUTEX_LOCK_INSTRUCTIONS
        await self.flush()
        mx = self._hw_mutex(name)
        while mx.locked:
            await mx.queue
        mx.locked = True

    def _hw_unlock(self, name: str) -> None:
        self._pending += timing.MUTEX_UNLOCK_INSTRUCTIONS
        mx = self._hw_mutex(name)
        mx.locked = False
        mx.queue.wake_one()

    async def mutex_lock(self, m: MutexDecl) -> None:
        """``mutex_lock``: wait until the atomic bit is free, then take it."""
        await self._hw_lock(m.name)

    def mutex_trylock(self, m: MutexDecl) -> bool:
        """``mutex_trylock``."""
        self._pending += timing.MUTEX_TRYLOCK_INSTRUCTIONS
        mx = self._hw_mutex(m.name)
        if mx.locked:
            return False
        mx.locked = True
        return True

    def mutex_unlock(self, m: MutexDecl) -> None:
        """``mutex_unlock`` (no owner check, as in the SDK)."""
        self._hw_unlock(m.name)

    # -- semaphores ---------------------------------------
    def _semaphore(self, sem: SemaphoreDecl) -> _Semaphore:
        table: dict[str, _Semaphore] = self.dpu.persistent.setdefault("semaphores", {})
        s = table.get(sem.name)
        if s is None:
            s = table[sem.name] = _Semaphore(sem.count, f"semaphore {sem.name!r}")
        return s

    async def sem_take(self, sem: SemaphoreDecl) -> None:
        """``sem_take``: decrement; stop (FIFO) while the count is negative."""
        self._pending += timing.SEM_TAKE_INSTRUCTIONS
        await self.flush()
        s = self._semaphore(sem)
        s.count -= 1
        if s.count < 0:
            await s.queue

    def sem_give(self, sem: SemaphoreDecl) -> None:
        """``sem_give``: increment and resume the first waiting tasklet, if any."""
        self._pending += timing.SEM_GIVE_INSTRUCTIONS
        s = self._semaphore(sem)
        s.count += 1
        if s.count <= 0:
            s.queue.wake_one()

    def sem_count(self, sem: SemaphoreDecl) -> int:
        """The semaphore's counter (negative: that many tasklets wait)."""
        return self._semaphore(sem).count

    # -- handshakes ---------------------------------------
    def _handshake(self, notifier: int) -> _Handshake:
        table: dict[int, _Handshake] = self.dpu.boot_state.setdefault("handshakes", {})
        h = table.get(notifier)
        if h is None:
            h = table[notifier] = _Handshake(notifier)
        return h

    async def handshake_notify(self) -> None:
        """``handshake_notify``: resume the tasklet waiting for me, or stop until one waits."""
        self._pending += timing.HANDSHAKE_INSTRUCTIONS
        await self.flush()
        h = self._handshake(self._id)
        if not h.waiter.wake_one():
            await h.notifier

    async def handshake_wait_for(self, notifier: int) -> int:
        """``handshake_wait_for``: 0 after the rendez-vous with ``notifier``; ``EALREADY``
        (and ``errno``) at once if another tasklet already waits for it."""
        self._pending += timing.HANDSHAKE_INSTRUCTIONS
        await self.flush()
        h = self._handshake(int(notifier))
        if h.notifier.wake_one():
            return 0
        if h.waiter.waiters:
            self.errno = EALREADY
            return EALREADY
        await h.waiter
        return 0

    # -- mutex pools ---------------------------------------
    @staticmethod
    def _pool_mutex(pool: MutexPoolDecl, ident: int) -> str:
        return f"{pool.name}[{(ident & 0xFFFF) & (pool.nb_mutexes - 1)}]"

    async def mutex_pool_lock(self, pool: MutexPoolDecl, ident: int) -> None:
        """``mutex_pool_lock``: lock hardware mutex ``ident & (N-1)`` of the pool."""
        self._pending += timing.MUTEX_POOL_INSTRUCTIONS - timing.MUTEX_LOCK_INSTRUCTIONS
        await self._hw_lock(self._pool_mutex(pool, ident))

    def mutex_pool_unlock(self, pool: MutexPoolDecl, ident: int) -> None:
        """``mutex_pool_unlock``."""
        self._pending += timing.MUTEX_POOL_INSTRUCTIONS - timing.MUTEX_UNLOCK_INSTRUCTIONS
        self._hw_unlock(self._pool_mutex(pool, ident))

    # -- virtual mutexes ---------------------------------------
    def _vmutex(self, vm: VMutexDecl) -> _VMutex:
        table: dict[str, _VMutex] = self.dpu.persistent.setdefault("vmutexes", {})
        v = table.get(vm.name)
        if v is None:
            v = table[vm.name] = _VMutex(vm.nb_vmutexes)
        return v

    @staticmethod
    def _vmutex_id(vm: VMutexDecl, ident: int) -> int:
        ident &= 0xFFFF
        if ident >= vm.nb_vmutexes:
            raise DpuFault(
                f"memory fault: virtual mutex {ident} of {vm.name!r} is past its "
                f"{vm.nb_vmutexes} bits"
            )
        return ident

    async def vmutex_lock(self, vm: VMutexDecl, ident: int) -> None:
        """``vmutex_lock``: set bit ``ident`` under hardware mutex ``(ident >> 3) & (N-1)``;
        spin (here: wait) while the bit is already set."""
        ident = self._vmutex_id(vm, ident)
        v = self._vmutex(vm)
        byte, mask = ident >> 3, 1 << (ident & 7)
        while True:
            self._pending += timing.VMUTEX_LOCK_INSTRUCTIONS
            await self.flush()
            if not v.bits[byte] & mask:
                v.bits[byte] |= mask
                return
            q = v.queues.get(ident)
            if q is None:
                q = v.queues[ident] = WaitQueue(f"virtual mutex {vm.name}[{ident}]")
            await q

    def vmutex_unlock(self, vm: VMutexDecl, ident: int) -> None:
        """``vmutex_unlock``: clear bit ``ident`` (no owner check)."""
        ident = self._vmutex_id(vm, ident)
        self._pending += timing.VMUTEX_UNLOCK_INSTRUCTIONS
        v = self._vmutex(vm)
        v.bits[ident >> 3] &= ~(1 << (ident & 7)) & 0xFF
        q = v.queues.get(ident)
        if q is not None:
            q.wake_all()  # every spinner retries; the first to run takes the bit

    def vmutex_is_locked(self, vm: VMutexDecl, ident: int) -> bool:
        """Whether virtual mutex ``ident`` is taken (its bit is set)."""
        ident = self._vmutex_id(vm, ident)
        return bool(self._vmutex(vm).bits[ident >> 3] & (1 << (ident & 7)))
