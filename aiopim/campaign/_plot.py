"""The swept parameter against virtual time, as PrIM's scaling figures draw it (matplotlib,
extra ``plot``): bars of CPU->DPU, DPU kernel, inter-DPU and DPU->CPU time stacked for each
value, or one line per series when other parameters vary too; one more panel per field asked."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ._results import Results
from ._spec import CampaignError

#: stacked parts of the time panel: (row key, legend, colour)
PARTS = (
    ("cpu_dpu_ps", "CPU->DPU", "#4c72b0"),
    ("dpu_kernel_ps", "DPU kernel", "#dd8452"),
    ("inter_dpu_ps", "inter-DPU", "#55a868"),
    ("dpu_cpu_ps", "DPU->CPU", "#c44e52"),
)


def _unit(ps: float) -> tuple[str, float]:
    for unit, scale in (("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)):
        if ps >= scale:
            return unit, scale
    return "ps", 1.0


def _varying(rows: list[dict[str, Any]], params: list[str]) -> list[str]:
    return [p for p in params if len({repr(r.get(p)) for r in rows}) > 1]


def _series(rows: list[dict[str, Any]], keys: list[str]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        name = ", ".join(f"{k}={r.get(k)}" for k in keys)
        out.setdefault(name, []).append(r)
    return out


def save_plot(
    results: Results, path: str | os.PathLike[str], *, x: str | None, fields: Sequence[str] = ()
) -> None:
    """Write the plot of ``results`` to ``path`` (x: a parameter; default: the first swept)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise CampaignError("--plot needs matplotlib: pip install -e '.[plot]'") from None
    rows = [r for r in results.rows() if r["status"] == "ok"]
    params = list(dict.fromkeys(k for r in results for k in r["params"]))
    if not rows:
        raise CampaignError("nothing to plot: no run succeeded")
    swept = _varying(rows, params)
    x = x or (swept[0] if swept else None)
    if x is None or x not in params:
        raise CampaignError(
            f"--x must name a parameter of the campaign ({', '.join(params) or 'none'})"
            if x is not None
            else "nothing is swept: no parameter changes from run to run"
        )
    for field in fields:
        bad = [r["run"] for r in rows if not isinstance(r.get(field), int | float)]
        if bad:
            raise CampaignError(f"--y {field}: not a number in run {bad[0]} (see the table)")
    series = _series(rows, [p for p in swept if p != x])
    fig = Figure(figsize=(7, 3.2 * (1 + len(fields))), layout="constrained")
    axes = fig.subplots(1 + len(fields), 1, squeeze=False)[:, 0]
    values = list(dict.fromkeys(r[x] for r in rows))
    position = {repr(v): i for i, v in enumerate(values)}
    unit, scale = _unit(max(r["virtual_time_ps"] for r in rows))
    time_axis = axes[0]
    if len(series) == 1:
        bottom = [0.0] * len(rows)
        where = [position[repr(r[x])] for r in rows]
        for key, label, colour in PARTS:
            height = [r[key] / scale for r in rows]
            time_axis.bar(where, height, bottom=bottom, label=label, color=colour)
            bottom = [b + h for b, h in zip(bottom, height, strict=True)]
        total = [r["virtual_time_ps"] / scale for r in rows]
        time_axis.plot(where, total, "k_", markersize=14, label="virtual time")
    else:
        for name, members in series.items():
            where = [position[repr(r[x])] for r in members]
            time_axis.plot(where, [r["virtual_time_ps"] / scale for r in members], "o-", label=name)
    time_axis.set_ylabel(f"virtual time ({unit})")
    time_axis.legend(fontsize="small")
    for axis, field in zip(axes[1:], fields, strict=True):
        for name, members in series.items():
            where = [position[repr(r[x])] for r in members]
            axis.plot(where, [r[field] for r in members], "o-", label=name or field)
        axis.set_ylabel(field)
    for axis in axes:
        axis.set_xticks(range(len(values)), [str(v) for v in values])
    axes[-1].set_xlabel(x)
    dropped = len(results) - len(rows)
    note = f" ({dropped} failed runs not shown)" if dropped else ""
    fig.suptitle(f"{results.name}{note}")
    fig.savefig(path)
