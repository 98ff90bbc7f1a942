"""Kelonia's errors: DIDL errors with their place, and DPU errors that name the DPU and task."""

from __future__ import annotations

from .. import DpuError


class DidlError(ValueError):
    """A DIDL file is wrong: ``file:line:column: message (expected ...)``."""

    def __init__(self, message: str, file: str, line: int, column: int, expected: str = "") -> None:
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        self.expected = expected
        text = f"{file}:{line}:{column}: {message}"
        super().__init__(f"{text}; expected {expected}" if expected else text)


class DpuLowLevelError(DpuError):
    """A worker's call failed on its DPU (fault, transfer error, ...).

    ``.code`` / ``.value`` are the SDK's, ``.dpu_number`` and ``.task`` say where."""

    def __init__(self, value: int, dpu_number: int, task: str, message: str = "") -> None:
        self.dpu_number = dpu_number
        self.task = task
        super().__init__(value, f"DPU {dpu_number}, task {task}: {message}")


class DpuFoundryError(Exception):
    """An assembly cannot be built or used as asked (bad DPU number, unknown task, ...)."""
