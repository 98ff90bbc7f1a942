"""PrIM's RED and TRNS as compiled by UPMEM's clang, run on the instruction-set interpreter.

python benchmarks/prim_isa.py                    # default sizes (each launch >= 1 s of CPU)
python benchmarks/prim_isa.py --quick            # small sizes (a few seconds in all)
python benchmarks/prim_isa.py --only red --backend trio

The binaries, their sources and PrIM's host programs (``host/app.c``) are in the conformance
corpus (UPMEM/PrIM software, not part of this repository): ``prim/RED`` and ``prim/TRNS`` under
``$AIOPIM_CONFORMANCE_DIR`` (default ``../shared/conformance`` from the repository root). The
host programs here do what ``app.c`` does with weak scaling (``-x 0``), on a v1A machine (the
binaries carry no hardware tag; the corpus is built for v1A, 350 MHz as PrIM's 2,556-DPU
system), and check the results as ``app.c`` does, with NumPy:

* RED: ``elements`` int64 per DPU (``-i``), values in ``[0, RAND_MAX]`` like ``rand()`` (drawn
  with NumPy, not glibc's generator); the sum of tasklet 0's ``t_count`` over the DPUs must
  equal the host's sum.
* TRNS: an ``(M_ * m) x (nr_dpus * n)`` int64 matrix, one ``n``-column slab per DPU; step 2
  (kernel 0) and step 3 (kernel 1) transpose it in MRAM; the slabs read back must be the
  transposed matrix. ``app.c`` sends each slab as ``M_ * m`` row transfers of ``n`` elements;
  here one transfer per DPU writes the same MRAM bytes.

Reported per launch: DPU instructions (sum over the DPUs' runners), process CPU seconds of the
launch (``time.process_time`` around ``dpu_launch``), instructions per CPU second and the
launch's virtual time. ``main`` first runs both at tiny sizes in the same process, so
imports and first touches of memory stay out of the timing.
Last line: ``prim_isa red_ips=<float> trns_ips=<float> ok=<0|1>``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import aiopim  # noqa: E402
from aiopim.elf import load_elf  # noqa: E402
from aiopim.sdk import (  # noqa: E402
    DPU_MRAM_HEAP_POINTER_NAME,
    DPU_SYNCHRONOUS,
    DPU_XFER_DEFAULT,
    DPU_XFER_FROM_DPU,
    DPU_XFER_TO_DPU,
    DpuSet,
    dpu_alloc,
    dpu_foreach,
    dpu_free,
    dpu_get_nr_dpus,
    dpu_get_symbol,
    dpu_launch,
    dpu_load,
    dpu_prepare_xfer,
    dpu_push_xfer,
)

DEFAULT_CORPUS = ROOT.parent / "shared" / "conformance"
RAND_MAX = 2**31 - 1
NR_DPUS = 64
CHIP_DEFAULT = "v1A"  # the corpus' chip, for binaries without a .dpu.attributes tag

#: sizes: RED int64 elements per DPU; TRNS (M_, m, n) per DPU
SIZES = {"default": {"red": 1 << 17, "trns": (64, 16, 8)}}
SIZES["quick"] = {"red": 1 << 11, "trns": (8, 16, 8)}
SIZES["warmup"] = {"red": 256, "trns": (4, 16, 8)}

# RED's support/common.h with TYPE=INT64
RED_ARGS = np.dtype([("size", "<u4"), ("kernel", "<u4"), ("t_count", "<i8")])
RED_RESULTS = np.dtype([("cycles", "<u8"), ("t_count", "<i8")])
# TRNS's support/common.h
TRNS_ARGS = np.dtype([("m", "<u4"), ("n", "<u4"), ("M_", "<u4"), ("kernel", "<u4")])


def corpus_dir() -> Path:
    """The conformance corpus: ``$AIOPIM_CONFORMANCE_DIR`` or ``../shared/conformance``."""
    return Path(os.environ.get("AIOPIM_CONFORMANCE_DIR", DEFAULT_CORPUS))


def binary_path(directory: Path) -> Path:
    """A PrIM benchmark directory's compiled DPU program."""
    return Path(directory) / "bin" / "dpu_code"


def binary_chip(directory: Path) -> tuple[str, int, str | None]:
    """The chip to allocate for a benchmark's binary, its NR_TASKLETS and its own chip tag."""
    prog = load_elf(binary_path(directory))
    return prog.chip or CHIP_DEFAULT, prog.nr_tasklets, prog.chip


@dataclass
class Launch:
    """One measured ``dpu_launch``."""

    name: str
    instructions: int
    cpu_s: float
    virtual_s: float

    @property
    def ips(self) -> float:
        """DPU instructions per CPU second."""
        return self.instructions / self.cpu_s if self.cpu_s > 0 else float("nan")


@dataclass
class Result:
    """What one benchmark run measured and whether its output checked."""

    name: str
    dpus: int
    tasklets: int
    chip: str
    size: str
    ok: bool
    launches: list[Launch] = field(default_factory=list)

    @property
    def instructions(self) -> int:
        """DPU instructions of every launch."""
        return sum(x.instructions for x in self.launches)

    @property
    def cpu_s(self) -> float:
        """Process CPU seconds of every launch."""
        return sum(x.cpu_s for x in self.launches)

    @property
    def virtual_s(self) -> float:
        """Virtual seconds of every launch."""
        return sum(x.virtual_s for x in self.launches)

    @property
    def ips(self) -> float:
        """DPU instructions per CPU second over every launch."""
        return self.instructions / self.cpu_s if self.cpu_s > 0 else float("nan")

    def as_dict(self) -> dict[str, Any]:
        """The figures as plain values, per launch too."""
        return {
            "name": self.name,
            "dpus": self.dpus,
            "tasklets": self.tasklets,
            "chip": self.chip,
            "size": self.size,
            "ok": self.ok,
            "instructions": self.instructions,
            "cpu_s": self.cpu_s,
            "virtual_s": self.virtual_s,
            "ips": self.ips,
            "launches": [
                {"name": x.name, "instructions": x.instructions, "cpu_s": x.cpu_s,
                 "virtual_s": x.virtual_s, "ips": x.ips}
                for x in self.launches
            ],
        }  # fmt: skip


def rand_like(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` int64 values in ``[0, RAND_MAX]``, as ``(T)rand()`` gives."""
    return rng.integers(0, RAND_MAX, n, dtype=np.int64, endpoint=True)


async def timed_launch(dpus: DpuSet, name: str) -> Launch:
    """``dpu_launch(dpus, DPU_SYNCHRONOUS)`` with its instructions, CPU and virtual time."""
    v0, c0 = aiopim.now(), time.process_time()
    await dpu_launch(dpus, DPU_SYNCHRONOUS)
    cpu, virtual = time.process_time() - c0, aiopim.now() - v0
    executed = sum(d.runner.instructions for d in dpus.dpu_list)  # type: ignore[union-attr]
    return Launch(name, executed, cpu, virtual)


def check_symbol(prog: aiopim.DpuProgram, name: str, size: int) -> None:
    """The host struct ``name`` has the size of its C layout in the binary."""
    got = dpu_get_symbol(prog, name).size
    if got != size:
        raise RuntimeError(f"{name}: {got} bytes in the binary, the host layout has {size}")


# --- RED --------------------------------------------------------------------------------------
async def red_host(directory: Path, nr_dpus: int, elements: int, chip: str) -> Result:
    """RED's app.c: ``elements`` int64 per DPU reduced on the DPUs, checked against NumPy."""
    dpus = await dpu_alloc(nr_dpus, f"chip={chip}")
    prog = await dpu_load(dpus, binary_path(directory))
    n = dpu_get_nr_dpus(dpus)
    tasklets = prog.nr_tasklets
    check_symbol(prog, "DPU_INPUT_ARGUMENTS", RED_ARGS.itemsize)
    check_symbol(prog, "DPU_RESULTS", tasklets * RED_RESULTS.itemsize)

    input_size = elements * n  # weak scaling; int64 is already 8-byte aligned
    a = rand_like(np.random.default_rng(0), input_size)
    count_host = int(a.sum(dtype=np.int64))
    per_dpu = -(-input_size // n)
    padded = np.zeros(per_dpu * n, np.int64)
    padded[:input_size] = a
    parts = padded.reshape(n, per_dpu)

    args = np.zeros(n, RED_ARGS)
    args["size"] = per_dpu * 8
    args["size"][-1] = (input_size - per_dpu * (n - 1)) * 8
    args["kernel"] = 0
    for dpu, i in dpu_foreach(dpus):
        dpu_prepare_xfer(dpu, args[i : i + 1])
    await dpu_push_xfer(
        dpus, DPU_XFER_TO_DPU, "DPU_INPUT_ARGUMENTS", 0, RED_ARGS.itemsize, DPU_XFER_DEFAULT
    )
    for dpu, i in dpu_foreach(dpus):
        dpu_prepare_xfer(dpu, parts[i])
    await dpu_push_xfer(
        dpus, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, per_dpu * 8, DPU_XFER_DEFAULT
    )

    launch = await timed_launch(dpus, "red")

    results = np.zeros((n, tasklets), RED_RESULTS)
    for dpu, i in dpu_foreach(dpus):
        dpu_prepare_xfer(dpu, results[i])
    await dpu_push_xfer(
        dpus, DPU_XFER_FROM_DPU, "DPU_RESULTS", 0, tasklets * RED_RESULTS.itemsize,
        DPU_XFER_DEFAULT,
    )  # fmt: skip
    await dpu_free(dpus)
    count = int(results["t_count"][:, 0].sum(dtype=np.int64))  # tasklet 0 of every DPU
    size = f"{elements} int64/DPU"
    return Result("red", n, tasklets, chip, size, count == count_host, [launch])


def _shown(progress: bool | None) -> dict[str, bool | None]:
    """``aiopim.run``'s ``progress`` keyword, left out when off: ``isa_corpus.py --before`` runs
    these functions on checkouts whose ``aiopim.run`` has no such keyword."""
    return {} if progress is False else {"progress": progress}


def run_red(
    directory: Path, dpus: int = NR_DPUS, elements: int = SIZES["default"]["red"],
    backend: str = "asyncio", progress: bool | None = False,
) -> dict[str, Any]:  # fmt: skip
    """Run RED's host program on a fresh emulator; its figures as a dict (see ``Result``)."""
    chip, _, _ = binary_chip(directory)
    r: Result = aiopim.run(
        red_host, Path(directory), dpus, elements, chip, backend=backend, **_shown(progress)
    )
    return r.as_dict()


# --- TRNS -------------------------------------------------------------------------------------
async def trns_host(directory: Path, nr_dpus: int, big_m: int, m: int, n: int, chip: str) -> Result:
    """TRNS's app.c (one round of DPUs): step 2 then step 3 transpose an ``(M_*m) x (DPUs*n)``
    int64 matrix, checked against NumPy's transpose."""
    dpus = await dpu_alloc(nr_dpus, f"chip={chip}")
    prog = await dpu_load(dpus, binary_path(directory))
    nd = dpu_get_nr_dpus(dpus)
    check_symbol(prog, "DPU_INPUT_ARGUMENTS", TRNS_ARGS.itemsize)

    rows, cols = big_m * m, nd * n  # N_ = nd (weak scaling, one n-column slab per DPU)
    a = rand_like(np.random.default_rng(0), rows * cols).reshape(rows, cols)
    expected = np.ascontiguousarray(a.T).reshape(nd, n * rows)  # DPU d: rows d*n.. of A^T
    slab_bytes = rows * n * 8

    slabs = [np.ascontiguousarray(a[:, d * n : (d + 1) * n]) for d in range(nd)]
    for dpu, i in dpu_foreach(dpus):  # step 1 (app.c: one transfer per row of the slab)
        dpu_prepare_xfer(dpu, slabs[i])
    await dpu_push_xfer(
        dpus, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, slab_bytes, DPU_XFER_DEFAULT
    )
    done_bytes = 8 if (big_m * n) // 8 == 0 else big_m * n
    done = np.zeros(done_bytes, np.uint8)
    for dpu, _ in dpu_foreach(dpus):
        dpu_prepare_xfer(dpu, done)
    await dpu_push_xfer(
        dpus, DPU_XFER_TO_DPU, DPU_MRAM_HEAP_POINTER_NAME, slab_bytes, done_bytes,
        DPU_XFER_DEFAULT,
    )  # fmt: skip

    launches = []
    for kernel, name in ((0, "trns.step2"), (1, "trns.step3")):
        args = np.array([(m, n, big_m, kernel)], TRNS_ARGS)
        for dpu, _ in dpu_foreach(dpus):
            dpu_prepare_xfer(dpu, args)
        await dpu_push_xfer(
            dpus, DPU_XFER_TO_DPU, "DPU_INPUT_ARGUMENTS", 0, TRNS_ARGS.itemsize,
            DPU_XFER_DEFAULT,
        )  # fmt: skip
        launches.append(await timed_launch(dpus, name))

    out = np.zeros((nd, n * rows), np.int64)
    for dpu, i in dpu_foreach(dpus):
        dpu_prepare_xfer(dpu, out[i])
    await dpu_push_xfer(
        dpus, DPU_XFER_FROM_DPU, DPU_MRAM_HEAP_POINTER_NAME, 0, slab_bytes, DPU_XFER_DEFAULT
    )
    await dpu_free(dpus)
    size = f"M_={big_m} m={m} n={n}"
    ok = bool(np.array_equal(out, expected))
    return Result("trns", nd, prog.nr_tasklets, chip, size, ok, launches)


def run_trns(
    directory: Path, dpus: int = NR_DPUS, shape: tuple[int, int, int] = SIZES["default"]["trns"],
    backend: str = "asyncio", progress: bool | None = False,
) -> dict[str, Any]:  # fmt: skip
    """Run TRNS's host program (``shape`` = M_, m, n) on a fresh emulator; its figures."""
    chip, _, _ = binary_chip(directory)
    big_m, m, n = shape
    r: Result = aiopim.run(
        trns_host, Path(directory), dpus, big_m, m, n, chip, backend=backend, **_shown(progress)
    )
    return r.as_dict()


# --- report -----------------------------------------------------------------------------------
def print_table(results: list[dict[str, Any]]) -> None:
    """One row per launch and one per benchmark."""
    head = (
        f"{'launch':<11} {'DPUs':>4} {'tasklets':>8} {'chip':>4} {'input':<20} "
        f"{'instructions':>14} {'CPU s':>7} {'instr/CPU s':>12} {'virtual ms':>11} check"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        rows = r["launches"] if len(r["launches"]) > 1 else []
        for x in [*rows, r]:
            check = ("OK" if r["ok"] else "FAILED") if x is r else ""
            print(
                f"{x['name']:<11} {r['dpus']:>4} {r['tasklets']:>8} {r['chip']:>4} "
                f"{r['size']:<20} {x['instructions']:>14,} {x['cpu_s']:>7.2f} "
                f"{x['ips']:>12.4g} {x['virtual_s'] * 1e3:>11.4f} {check}"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs (a few seconds)")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    parser.add_argument("--only", choices=["red", "trns"], action="append")
    parser.add_argument("--dpus", type=int, default=NR_DPUS)
    parser.add_argument(
        "--corpus", type=Path, default=None, help="default: $AIOPIM_CONFORMANCE_DIR"
    )
    parser.add_argument(
        "--quiet", dest="progress", action="store_false", default=None, help="no progress display"
    )
    opts = parser.parse_args(argv)
    prim = (opts.corpus or corpus_dir()) / "prim"
    if not prim.is_dir():
        print(f"no PrIM binaries: {prim} does not exist", file=sys.stderr)
        return 2
    which = opts.only or ["red", "trns"]
    sizes = SIZES["quick" if opts.quick else "default"]
    runs = {
        "red": lambda s: run_red(prim / "RED", opts.dpus, s["red"], opts.backend, opts.progress),
        "trns": lambda s: run_trns(
            prim / "TRNS", opts.dpus, s["trns"], opts.backend, opts.progress
        ),
    }
    for name in which:
        chip, tasklets, tag = binary_chip(prim / name.upper())
        print(f"{name}: {binary_path(prim / name.upper())}: NR_TASKLETS={tasklets}, "
              f"chip tag {tag or 'none'} -> allocating {chip}")  # fmt: skip
    start = time.process_time()
    warm = [runs[name](SIZES["warmup"]) for name in which]  # imports, first touches
    print(f"warm-up (tiny sizes, same process): {time.process_time() - start:.1f} s of CPU")
    results = [runs[name](sizes) for name in which]
    print_table(results)
    ok = all(r["ok"] for r in warm + results)
    ips = " ".join(f"{r['name']}_ips={r['ips']:.0f}" for r in results)
    print(f"prim_isa {ips} ok={int(ok)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
