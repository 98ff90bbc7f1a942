"""Load real UPMEM DPU ELF binaries (as built by ``dpu-upmem-dpurte-clang``) with pyelftools.

An :class:`ElfProgram` is a :class:`~aiopim.DpuProgram`: it gives the host the binary's host-visible
symbols (with the SDK's visibility rules and address encoding, sdk-reference.md §1.4), the memory
images ``dpu_load`` writes (IRAM from ``.text``, WRAM from the ``.data*`` sections, MRAM from
``.mram``), ``NR_TASKLETS``, the stack sizes and the hardware version it was built for.

Launching an ELF program runs its instructions on aiopim's DPU instruction-set interpreter
(:mod:`aiopim.isa`), in exact virtual time. A Python model of the kernel can stand in for the
binary instead: written exactly like an :class:`aiopim.Program` entry point
(``async def main(t: Tasklet)``), it sees the binary's own symbol addresses::

    prog = load_elf("checksum.dpu", model=checksum_main)
    # or, keyed by a name you choose (default: the file's stem):
    register_model("checksum", checksum_main)

A bound or registered model wins over the interpreter. A model
is never looked up from anything written inside the file (no module is ever imported by name).

Errors use the SDK's codes: a missing file is ``DPU_ERR_ELF_NO_SUCH_FILE``; anything that is
not a well-formed little-endian ELF32 ``EM_DPU`` executable is ``DPU_ERR_ELF_INVALID_FILE``; a
file without ``.symtab``/``.strtab`` is ``DPU_ERR_ELF_NO_SUCH_SECTION``. No other exception
escapes the parser, whatever the bytes (see docs/elf.md).
"""

from ._models import (
    DpuBehaviour,
    Model,
    PythonModel,
    register_model,
    registered_model,
    unregister_model,
)
from ._parse import chip_from_attributes
from ._program import ElfProgram, load_elf
from ._records import (
    ABS_SYMBOLS_VISIBLE,
    ELF_ERROR_CODES,
    EM_DPU,
    MAX_ELF_SIZE,
    ElfSection,
    ElfSymbol,
    SymbolRow,
)
from ._symbols import format_symbols, main_symbols

__all__ = [
    "ABS_SYMBOLS_VISIBLE",
    "ELF_ERROR_CODES",
    "EM_DPU",
    "MAX_ELF_SIZE",
    "DpuBehaviour",
    "Model",
    "ElfProgram",
    "ElfSection",
    "ElfSymbol",
    "PythonModel",
    "SymbolRow",
    "chip_from_attributes",
    "format_symbols",
    "load_elf",
    "main_symbols",
    "register_model",
    "registered_model",
    "unregister_model",
]
