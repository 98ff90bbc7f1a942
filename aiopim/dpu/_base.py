"""The state every runtime mixin of :class:`~aiopim.dpu.Tasklet` works on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable

    import numpy as np
    import numpy.typing as npt

    from .._machine._dpu import Dpu
    from .._machine._memory import Bytes
    from ._program import Var
    from ._runner import TaskletRunner
    from ._tasklet import TaskletProgram


class TaskletBase:
    """Attributes and core operations shared by the runtime mixins (defined by ``Tasklet``)."""

    if TYPE_CHECKING:
        dpu: Dpu
        runner: TaskletRunner
        program: TaskletProgram
        wram: Bytes
        _id: int
        _pending: int
        #: DMA writes (sizes) issued by synchronous runtime calls, charged at the next flush
        _deferred_dma: list[int]
        #: watched ranges and label of the loop helpers' polls, by (input, output, active)
        _polls: dict[tuple[str, str, str], tuple[list[tuple[int, int]], str]]
        #: what the loop helpers' test reads, by (input, output, active): the input and output
        #: FIFO structs, the output FIFO's slot mask, ``active``'s start and end
        _loops: dict[tuple[str, str, str], tuple[int, int, int, int, int]]

        def _address(self, where: Var | str) -> int: ...

        @property
        def nr_tasklets(self) -> int: ...

        async def flush(self) -> None: ...

        def view(
            self, where: Var | int, dtype: npt.DTypeLike = ..., count: int | None = None
        ) -> np.ndarray[Any, Any]: ...

        def mem_alloc(self, size: int) -> int: ...

        def mram_read(self, mram: int, wram: int, size: int) -> Awaitable[None]: ...

        def mram_write(self, wram: int, mram: int, size: int) -> Awaitable[None]: ...

        def _mram_addr(self, where: Var | int) -> int: ...

    @property
    def errno(self) -> int:
        """This tasklet's ``errno`` (the DPU keeps one per tasklet)."""
        table: dict[int, int] = self.dpu.persistent.setdefault("errno", {})
        return table.get(self._id, 0)

    @errno.setter
    def errno(self, value: int) -> None:
        table: dict[int, int] = self.dpu.persistent.setdefault("errno", {})
        table[self._id] = int(value)
