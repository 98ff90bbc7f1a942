"""Scenario files: data-only TOML descriptions of a machine, DPU programs and host actions.

``load_scenario(path)`` validates a file (errors name the line and key), ``replay(scenario)``
runs it in virtual time and checks its expectations, ``record(main)`` turns a host program
run into a scenario whose replay produces the same trace. New host actions and DPU kernels
plug in with :func:`register_action` and :func:`register_kernel`.
"""

from . import _actions, _fifo, _kernels  # noqa: F401  (register the built-ins)
from ._limits import ActionCost, KernelCost, Limits
from ._record import Recording, record
from ._replay import Progress, Replay, ReplayContext, check_expectations, replay
from ._spec import (
    ACTIONS,
    KERNELS,
    ActionKind,
    DataCheck,
    Expectations,
    KernelKind,
    Param,
    ProgramSpec,
    Scenario,
    ScenarioError,
    Step,
    TaskSpec,
    load_scenario,
    parse_duration,
    parse_scenario,
    register_action,
    register_kernel,
)

__all__ = [
    "ACTIONS",
    "KERNELS",
    "ActionCost",
    "ActionKind",
    "DataCheck",
    "Expectations",
    "KernelCost",
    "KernelKind",
    "Limits",
    "Param",
    "Progress",
    "ProgramSpec",
    "Recording",
    "Replay",
    "ReplayContext",
    "Scenario",
    "ScenarioError",
    "Step",
    "TaskSpec",
    "check_expectations",
    "load_scenario",
    "parse_duration",
    "parse_scenario",
    "record",
    "register_action",
    "register_kernel",
    "replay",
]

from ..memclave import _scenario as _memclave_steps  # noqa: F401  (the vud_* actions)
