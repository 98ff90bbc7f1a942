"""Scenario files as campaign programs: a run's parameters override keys of the file."""

from __future__ import annotations

import tomllib
from typing import Any

import tomli_w

from .._files import InputFileError, read_input_file
from ..scenario import Scenario, ScenarioError, load_scenario, parse_scenario
from ._spec import CampaignError, RunSpec

#: largest scenario file a campaign reads to override its keys (load_scenario checks the rest)
MAX_FILE_BYTES = 4 << 20


def _override(doc: dict[str, Any], name: str, value: Any, spec: RunSpec) -> None:
    """Set the dotted key ``name`` (``machine.ranks``, ``programs.spin.cycles``) in ``doc``."""
    *tables, key = name.split(".")
    where: Any = doc
    for depth, part in enumerate(tables):
        where = where.get(part) if isinstance(where, dict) else None
        if not isinstance(where, dict):
            table = ".".join(tables[: depth + 1])
            raise CampaignError(
                f"{spec.label}: unknown parameter {name!r}: the scenario has no table [{table}] "
                "(parameters of a scenario run are dotted keys of its file, e.g. machine.ranks)",
                param=name,
            )
    where[key] = value


def load_with_overrides(spec: RunSpec) -> Scenario:
    """The scenario of ``spec`` with its parameters applied (errors name the run)."""
    if spec.machine:
        raise CampaignError(
            f"{spec.label}: a scenario file has its own [machine]; sweep it with parameters "
            "such as machine.ranks instead of a campaign machine",
            section="machine",
        )
    try:
        if not spec.params:
            return load_scenario(spec.program)
        data = read_input_file(spec.program, limit=MAX_FILE_BYTES, what="scenario file")
        doc = tomllib.loads(data.decode("utf-8"))
    except (InputFileError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise CampaignError(f"{spec.label}: {spec.program}: {exc}", section="program") from None
    except ScenarioError as exc:
        raise CampaignError(f"{spec.label}: {exc}", section="program") from None
    for name, value in spec.params.items():
        _override(doc, name, value, spec)
    try:
        return parse_scenario(tomli_w.dumps(doc), spec.program)
    except ScenarioError as exc:  # its line is in the rewritten text: name the key only
        key = f"{exc.key}: " if exc.key else ""
        raise CampaignError(f"{spec.label}: {spec.program}: {key}{exc.message}") from None
