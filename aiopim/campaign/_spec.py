"""A campaign: a named set of independent, seeded runs of one host program.

A run is the program (``module:function``, ``path/to/file.py:function`` or a scenario file), its
parameters, its seed and the machine it runs on. Seeds derive from the campaign's seed and the
run's index only (:func:`derive_seed`), so where and when a run executes never changes it.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import itertools
import json
import os
import random
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._emulator import BACKENDS
from .._machine._config import MachineConfig

#: machine keys of a campaign (the scenario files' vocabulary) -> MachineConfig fields
MACHINE_KEYS = {"ranks": "nr_ranks", "dpus_per_rank": "nr_dpus_per_rank", "chip": "chip"}
#: parameters whose name starts with this set the machine of the run (``machine.ranks``)
MACHINE_PREFIX = "machine."
#: largest seed a run gets (explore seeds are 32-bit, as ``aiopim.testing.explore_seeds``)
MAX_SEED = 2**32 - 1

if TYPE_CHECKING:
    from ._results import Results


class CampaignError(ValueError):
    """A campaign cannot run as described: the message says which run and what to fix.
    ``param``: the parameter at fault, if one is; ``section``: else the part of the campaign
    (``program``, ``machine``)."""

    def __init__(
        self, message: str, *, param: str | None = None, section: str | None = None
    ) -> None:
        super().__init__(message)
        self.param = param
        self.section = section


def derive_seed(campaign_seed: int, index: int) -> int:
    """The seed of run ``index``: the first 4 bytes of SHA-256 of ``"<campaign_seed>:<index>"``."""
    digest = hashlib.sha256(f"{campaign_seed}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


def grid(**axes: Sequence[Any]) -> list[dict[str, Any]]:
    """Every combination of the axes' values, the last axis varying fastest."""
    for name, values in axes.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
            raise CampaignError(f"grid axis {name!r} must be a non-empty list of values")
    names = list(axes)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes.values())]


def sample(n: int, seed: int = 0, **axes: Sequence[Any]) -> list[dict[str, Any]]:
    """``n`` parameter sets, each axis's value drawn uniformly from its list (seeded)."""
    grid(**axes)  # the same checks
    if n < 1:
        raise CampaignError(f"a sample needs at least one run, not {n}")
    rng = random.Random(seed)
    return [{k: rng.choice(list(v)) for k, v in axes.items()} for _ in range(n)]


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass(frozen=True)
class RunSpec:
    """One run of a campaign, complete enough to execute anywhere (it pickles)."""

    campaign: str
    index: int
    program: str
    params: Mapping[str, Any]
    seed: int
    machine: Mapping[str, Any]
    backend: str = "asyncio"
    explore: bool = False
    time_limit: float | None = None
    #: directories put at the front of ``sys.path`` before the program is imported
    path: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``run 3 (dpus=64, size=1024)`` (``schedule 3 (explore_seed=...)`` when exploring):
        how errors and tables name the run."""
        shown = [f"{k}={_short(v)}" for k, v in self.params.items()]
        if self.explore:
            shown.append(f"explore_seed={self.seed}")
        what = "schedule" if self.explore else "run"
        return f"{what} {self.index}" + (f" ({', '.join(shown)})" if shown else "")

    @property
    def is_scenario(self) -> bool:
        """True when the program is a scenario file."""
        return self.program.endswith(".toml")

    def key(self) -> str:
        """SHA-256 of what determines the run's result (not where it runs from)."""
        doc = {
            "program": self.program,
            "params": dict(self.params),
            "seed": self.seed,
            "machine": dict(self.machine),
            "backend": self.backend,
            "explore": self.explore,
            "time_limit": self.time_limit,
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()

    def machine_config(self) -> MachineConfig:
        """The machine of the run: the campaign's, with any ``machine.*`` parameter applied."""
        values = dict(self.machine)
        for name, value in self.params.items():
            if name.startswith(MACHINE_PREFIX):
                values[name[len(MACHINE_PREFIX) :]] = value
        unknown = sorted(set(values) - set(MACHINE_KEYS))
        if unknown:
            raise CampaignError(
                f"{self.label}: unknown machine key(s) {unknown} (allowed: ranks, dpus_per_rank, "
                "chip)",
                section="machine",
            )
        try:
            return MachineConfig(**{MACHINE_KEYS[k]: v for k, v in values.items()})
        except (TypeError, ValueError) as exc:
            raise CampaignError(f"{self.label}: bad machine: {exc}", section="machine") from None

    def program_params(self) -> dict[str, Any]:
        """The parameters the program itself receives (not the ``machine.*`` ones)."""
        return {k: v for k, v in self.params.items() if not k.startswith(MACHINE_PREFIX)}


# ================================================================================================
# the program of a run
# ================================================================================================
def split_program(program: str) -> tuple[str, str]:
    """``(module or file, function)`` of ``module:function`` / ``file.py:function``."""
    target, sep, func = program.rpartition(":")
    if not sep or not target or not func or not func.isidentifier():
        raise CampaignError(
            f"program {program!r}: give MODULE:FUNCTION, FILE.py:FUNCTION or a scenario FILE.toml",
            section="program",
        )
    return target, func


def import_program(spec: RunSpec) -> Callable[..., Any]:
    """The async host function ``spec.program`` names (imported with ``spec.path`` first)."""

    def bad(message: str) -> CampaignError:
        return CampaignError(f"{spec.label}: {message}", section="program")

    target, func = split_program(spec.program)
    for entry in reversed(spec.path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    module_name = target
    if target.endswith(".py"):
        file = Path(target)
        if not file.is_file():
            raise bad(f"program file {target!r} does not exist")
        if str(file.parent.resolve()) not in sys.path:
            sys.path.insert(0, str(file.parent.resolve()))
        module_name = file.stem
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise bad(f"module {module_name!r} does not import: {type(exc).__name__}: {exc}") from exc
    fn = getattr(module, func, None)
    if fn is None:
        raise bad(f"module {module_name!r} has no function {func!r}")
    if not inspect.iscoroutinefunction(fn):
        raise bad(f"{spec.program} is not an async function (write `async def {func}(...)`)")
    return fn  # type: ignore[no-any-return]


def call_arguments(spec: RunSpec, fn: Callable[..., Any]) -> dict[str, Any]:
    """Keyword arguments of the program's call: its parameters, plus ``seed`` in a sweep when
    the function takes one the parameters do not give. Errors name the run."""
    kwargs = spec.program_params()
    sig = inspect.signature(fn)
    takes_any = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    if not spec.explore and "seed" in sig.parameters and "seed" not in kwargs:
        kwargs["seed"] = spec.seed
    accepted = [
        n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    unknown = [k for k in kwargs if k not in accepted and not takes_any]
    if unknown:
        raise CampaignError(
            f"{spec.label}: unknown parameter {unknown[0]!r} for {spec.program} (its parameters: "
            f"{', '.join(accepted) or 'none'})",
            param=unknown[0],
        )
    try:
        sig.bind(**kwargs)
    except TypeError as exc:
        raise CampaignError(f"{spec.label}: {spec.program}: {exc}", section="params") from None
    return kwargs


# ================================================================================================
# campaigns
# ================================================================================================
def _machine_dict(machine: MachineConfig | Mapping[str, Any] | None) -> dict[str, Any]:
    if machine is None:
        return {}
    if isinstance(machine, MachineConfig):
        return {
            "ranks": machine.nr_ranks,
            "dpus_per_rank": machine.nr_dpus_per_rank,
            "chip": machine.chip,
        }
    return dict(machine)


def _params_key(spec: RunSpec) -> str:
    """The run's parameters as JSON (a :class:`CampaignError` names one that is not JSON)."""
    for name, value in spec.params.items():
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise CampaignError(
                f"run {spec.index}: parameter {name!r} is not a JSON value ({value!r})",
                param=name,
            ) from None
    return json.dumps(spec.params, sort_keys=True)


def _absolute(program: str) -> str:
    """A program given by file path, made absolute (workers may start elsewhere)."""
    if program.endswith(".toml"):
        return str(Path(program).resolve())
    target, sep, func = program.rpartition(":")
    if sep and target.endswith(".py"):
        return f"{Path(target).resolve()}:{func}"
    return program


@dataclass
class Campaign:
    """A named set of runs of ``program``: one per parameter set of ``runs``.

    ``runs`` comes from :func:`grid`, :func:`sample` or any list of dicts; ``params`` are given
    to every run (a run's own value wins). ``machine``: a :class:`~aiopim.MachineConfig` or a
    dict of ``ranks``, ``dpus_per_rank``, ``chip`` (default: the full 40 x 64 machine).
    """

    name: str
    program: str
    runs: Sequence[Mapping[str, Any]] = ({},)
    params: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    machine: MachineConfig | Mapping[str, Any] | None = None
    backend: str = "asyncio"
    explore: bool = False
    time_limit: float | None = None
    path: Sequence[str] = ()

    def specs(self) -> list[RunSpec]:
        """The runs, in run-id order."""
        if self.backend not in BACKENDS:
            raise CampaignError(f"backend must be one of {list(BACKENDS)}, not {self.backend!r}")
        if not self.runs:
            raise CampaignError(f"campaign {self.name!r} has no runs")
        machine = _machine_dict(self.machine)
        path = tuple(str(Path(p).resolve()) for p in self.path)
        program = _absolute(self.program)
        out = []
        for index, own in enumerate(self.runs):
            # the run's own parameters first: they are what tells runs apart in labels
            params = {**own, **{k: v for k, v in self.params.items() if k not in own}}
            out.append(
                RunSpec(
                    self.name,
                    index,
                    program,
                    params,
                    derive_seed(self.seed, index),
                    machine,
                    self.backend,
                    self.explore,
                    self.time_limit,
                    path,
                )
            )
        return out

    def check(self) -> list[RunSpec]:
        """The runs, once every run's program, parameters and machine are known to be usable:
        otherwise a :class:`CampaignError` naming the first bad run."""
        specs = self.specs()
        keys = [_params_key(spec) for spec in specs]
        if specs[0].is_scenario:
            from ._scenario import load_with_overrides

            for spec in specs:
                load_with_overrides(spec)
            return specs
        fn = import_program(specs[0])
        checked: set[str] = set()  # runs with the same parameters pass or fail alike
        for spec, key in zip(specs, keys, strict=True):
            if key not in checked:
                spec.machine_config()
                call_arguments(spec, fn)
                checked.add(key)
        return specs

    def run(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        jobs: int | None = None,
        dask: str | None = None,
        executor: Executor | None = None,
        progress: bool | None = False,
        retry_failed: bool = False,
    ) -> Results:
        """Run every unfinished run and return the :class:`~aiopim.campaign.Results`.

        ``directory``: where results are written as they arrive (a rerun skips the runs found
        there); ``jobs``: local processes; ``dask``: ``local:N`` or a scheduler address;
        ``executor``: any ``concurrent.futures.Executor`` (yours stays open). Default: serial.
        """
        from ._execute import run_campaign

        return run_campaign(
            self,
            directory,
            jobs=jobs,
            dask=dask,
            executor=executor,
            progress=progress,
            retry_failed=retry_failed,
        )
