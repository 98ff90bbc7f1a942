"""Host input data described as data: literal values, ranges, fills or a file, then integer
operations and a cast, as NumPy computes them (no code is evaluated)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: the element types an input may have (little-endian, as the DPU sees them)
DTYPES = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")

#: operations applied element-wise, in order, wrapping in the data's type as NumPy does
OPS: dict[str, Callable[[npt.NDArray[np.integer], np.integer], npt.NDArray[np.integer]]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "shl": np.left_shift,
    "shr": np.right_shift,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "mod": np.remainder,
}

#: the largest input: a whole MRAM bank
MAX_INPUT_BYTES = 64 << 20

#: the sources an input is made from (exactly one per input)
SOURCES = ("values", "arange", "fill", "file")


@dataclass(frozen=True)
class InputData:
    """An input buffer: ``source`` (``values``, ``arange``, ``fill`` or ``file``) of ``dtype``
    elements, then ``ops`` in order, then a cast to ``astype``."""

    source: str
    dtype: str = "uint8"
    values: tuple[int, ...] = ()
    count: int = 0  # arange: 0 .. count - 1; fill: count copies of fill_value
    fill_value: int = 0
    file: str = ""
    ops: tuple[tuple[str, int], ...] = ()
    astype: str | None = None

    def build(self, read_file: Callable[[str], bytes]) -> npt.NDArray[np.integer]:
        """The data; ``read_file`` gives the bytes of a file named by ``file``."""
        dt = np.dtype(self.dtype).newbyteorder("<")
        if self.source == "values":
            data = np.array(self.values, dtype=dt)
        elif self.source == "arange":
            data = np.arange(self.count, dtype=dt)
        elif self.source == "fill":
            data = np.full(self.count, self.fill_value, dtype=dt)
        else:
            raw = read_file(self.file)
            if len(raw) % dt.itemsize:
                raise ValueError(
                    f"{self.file!r} holds {len(raw)} bytes, not a whole number of {self.dtype}"
                )
            data = np.frombuffer(raw, dtype=dt).copy()
        for op, operand in self.ops:
            data = OPS[op](data, dt.type(operand))
        if self.astype is not None:
            data = data.astype(np.dtype(self.astype).newbyteorder("<"))
        return data


def dtype_range(dtype: str) -> tuple[int, int]:
    """The smallest and largest value of an integer ``dtype``."""
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def dtype_size(dtype: str) -> int:
    """Bytes per element of ``dtype``."""
    return np.dtype(dtype).itemsize
