"""Conformance: run DPU binaries against expectations kept as data (one TOML file per binary:
machine, host steps, expected launch outcome, log and symbol values).

See docs/conformance.md; ``aiopim conformance DIR`` prints the report.
"""

from ._checks import GroupRule, LinesCheck, LogCheck, MatchCheck, MutexChainCheck, TextCheck
from ._inputs import InputData
from ._run import (
    ENGINES,
    ConformanceResult,
    Table,
    expectation_dir,
    format_table,
    load_expectations,
    run_conformance,
    run_expectation,
    shipped_expectations,
    use_engine,
)
from ._spec import (
    CopyTo,
    Expectation,
    ExpectationError,
    SymbolCheck,
    load_expectation,
    parse_expectation,
)

__all__ = [
    "ENGINES",
    "ConformanceResult",
    "CopyTo",
    "Expectation",
    "ExpectationError",
    "GroupRule",
    "InputData",
    "LinesCheck",
    "LogCheck",
    "MatchCheck",
    "MutexChainCheck",
    "SymbolCheck",
    "Table",
    "TextCheck",
    "expectation_dir",
    "format_table",
    "load_expectation",
    "load_expectations",
    "parse_expectation",
    "run_conformance",
    "run_expectation",
    "shipped_expectations",
    "use_engine",
]
