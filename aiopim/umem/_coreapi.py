"""The one place aiopim.umem reaches into the core (re-pointed when the core moves).

``aiopim.sdk`` re-exports ``DPU_MRAM_HEAP_POINTER_NAME`` at run time through a computed
``__all__`` that type checkers cannot follow, so the name is taken from its definition.
"""

from .._machine._program import DPU_MRAM_HEAP_POINTER_NAME

__all__ = ["DPU_MRAM_HEAP_POINTER_NAME"]
