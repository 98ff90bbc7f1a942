"""Published PrIM figures the emulated microbenchmarks are compared with.

Values and confidence tags come from ``docs/sdk-reference.md` §10` (§0, §1c-§1e), except the
``[V]`` Arithmetic-Throughput cycle counts, which are the hardware logs PrIM committed to its
repository (CMU-SAFARI/prim-benchmarks, ``Microbenchmarks/Arithmetic-Throughput/profile/
ADD_INT{32,64}_tl<N>.txt``, commit cb0090e: 1 DPU, 2^20 elements, BL=10, "DPU cycles" = the
largest per-tasklet sum of timed cycles). Tags: [V] verified first-party, [S] secondary,
[D] derived by arithmetic, [R] attributed to the paper but not checked (reported apart).

Each point names the emulated measurement it is compared with (``key``):

* ``arith/<op>/<type>/tl<N>/cycles`` or ``/mops``: Arithmetic-Throughput, v1A (350 MHz);
* ``arith/ratio/...``: a quotient of two such measurements (a shape fact);
* ``mram/<read|write>/<bytes>/<cycles|mbps>[/v1B]``: MRAM-Latency, one tasklet;
* ``stream-<mram|wram>/<kernel>/tl<N>`` (MB/s) and ``.../sat<N>`` (BW(N) / BW(16)): STREAM.
"""

from __future__ import annotations

from dataclasses import dataclass

LOG = "PrIM hardware log ADD_{t}_tl{n}.txt"


@dataclass(frozen=True)
class Point:
    """One published figure."""

    key: str
    label: str
    published: float
    tag: str
    source: str
    #: published as a range (order of magnitude only): ``published`` is its lower bound
    upper: float | None = None


#: "DPU cycles" of the hardware logs, by (type, tasklets)
_ADD_LOG_CYCLES: dict[tuple[str, int], float] = {
    ("INT32", 1): 6.92941e7,
    ("INT32", 2): 3.46475e7,
    ("INT32", 4): 1.73262e7,
    ("INT32", 6): 1.15581e7,
    ("INT32", 8): 8.66466e6,
    ("INT32", 10): 6.93822e6,
    ("INT32", 11): 6.31261e6,
    ("INT32", 12): 6.3089e6,
    ("INT32", 16): 6.28186e6,
    ("INT32", 24): 6.28288e6,
    ("INT64", 1): 8.07993e7,
    ("INT64", 2): 4.04046e7,
    ("INT64", 4): 2.02043e7,
    ("INT64", 6): 1.34797e7,
    ("INT64", 8): 1.0106e7,
    ("INT64", 10): 8.09315e6,
    ("INT64", 11): 7.35358e6,
    ("INT64", 12): 7.34256e6,
    ("INT64", 16): 7.31051e6,
    ("INT64", 24): 7.28016e6,
}

#: sdk-reference.md §10.2 derived table: (bytes, read cycles, read MB/s, write cycles, write MB/s,
#: read MB/s at 400 MHz)
_MRAM_TABLE = (
    (8, 81, 34.6, 65, 43.1, 39.5),
    (64, 109, 205.5, 93, 240.9, 234.9),
    (256, 205, 437.1, 189, 474.1, 499.5),
    (1024, 589, 608.5, 573, 625.5, 695.4),
    (2048, 1101, 651.0, 1085, 660.6, 744.1),
)

_OPS = ("add", "sub", "mul", "div")


def _points() -> list[Point]:
    pts: list[Point] = []
    for (t, n), cycles in _ADD_LOG_CYCLES.items():
        pts.append(
            Point(
                f"arith/add/{t.lower()}/tl{n}/cycles",
                f"ADD {t} {n:2} tasklets, DPU cycles",
                cycles,
                "V",
                LOG.format(t=t, n=n),
            )
        )
    pts += [
        Point(
            "arith/add/int32/tl16/mops",
            "ADD INT32 saturated, MOPS",
            350 / 6,
            "D",
            "§1c 350 MHz / 6 instructions",
        ),
        Point(
            "arith/add/int64/tl16/mops",
            "ADD INT64 saturated, MOPS",
            350 / 7,
            "D",
            "§1c 350 MHz / 7 instructions",
        ),
        Point(
            "arith/ratio/add-int32/add-int64/tl16",
            "ADD INT32 / INT64 throughput",
            1.17,
            "S",
            "§1c 'INT32 ADD/SUB 17% faster than INT64'",
        ),
    ]
    for t in ("int32", "int64"):
        for op in _OPS:
            pts.append(
                Point(
                    f"arith/ratio/{op}-{t}/tl11/tl24",
                    f"{op.upper()} {t.upper()} MOPS(11 tasklets) / MOPS(24)",
                    1.0,
                    "S",
                    "§1c 'saturates at 11 tasklets for every type'",
                )
            )
    for size, rc, rbw, wc, wbw, rbw400 in _MRAM_TABLE:
        src = "§1e alpha + beta*size table"
        pts += [
            Point(f"mram/read/{size}/cycles", f"mram_read {size:4} B, cycles", rc, "D", src),
            Point(f"mram/read/{size}/mbps", f"mram_read {size:4} B, MB/s", rbw, "D", src),
            Point(f"mram/write/{size}/cycles", f"mram_write {size:4} B, cycles", wc, "D", src),
            Point(f"mram/write/{size}/mbps", f"mram_write {size:4} B, MB/s", wbw, "D", src),
            Point(
                f"mram/read/{size}/mbps/v1B",
                f"mram_read {size:4} B at 400 MHz, MB/s",
                rbw400,
                "D",
                src,
            ),
        ]
    pts += [
        Point(
            "stream-mram/copy-dma/tl16",
            "MRAM peak 2 B/cycle: COPY-DMA 16 tasklets, MB/s",
            700.0,
            "S",
            "§0 #5 / §1e max 2 B/cycle at 350 MHz",
        ),
        Point(
            "stream-mram/copy-dma/sat2",
            "STREAM COPY-DMA BW(2 tasklets) / BW(16)",
            1.0,
            "S",
            "§1e 'COPY-DMA saturates with 2 tasklets'",
        ),
    ]
    for kernel, n in (("copy", 6), ("add", 6), ("scale", 11), ("triad", 11)):
        pts.append(
            Point(
                f"stream-mram/{kernel}/sat{n}",
                f"STREAM {kernel.upper()} BW({n} tasklets) / BW(16)",
                1.0,
                "S",
                f"§1e '{'COPY/ADD saturate at ~6' if n == 6 else 'SCALE/TRIAD at 11'}'",
            )
        )
    # [R]: attributed to the paper, not verified (sdk-reference.md §10)
    r_mops = {
        ("add", "int32"): 58.56,
        ("mul", "int32"): 10.27,
        ("div", "int32"): 11.27,
        ("add", "int64"): 50.16,
        ("mul", "int64"): 2.56,
        ("div", "int64"): 1.40,
    }
    for (op, t), mops in r_mops.items():
        pts.append(
            Point(
                f"arith/{op}/{t}/tl16/mops",
                f"{op.upper()} {t.upper()} saturated, MOPS",
                mops,
                "R",
                "§1c PrIM Fig. 4",
            )
        )
    for t in ("int32", "int64"):
        pts.append(
            Point(
                f"arith/sub/{t}/tl16/mops",
                f"SUB {t.upper()} saturated (~ADD), MOPS",
                r_mops["add", t],
                "R",
                "§1c 'SUB ~ ADD'",
            )
        )
    pts += [
        Point("mram/read/2048/mbps", "mram_read 2048 B measured, MB/s", 628.23, "R", "§1e"),
        Point("mram/write/2048/mbps", "mram_write 2048 B measured, MB/s", 633.22, "R", "§1e"),
        Point("stream-wram/copy/tl16", "WRAM STREAM COPY 16 tasklets, MB/s", 1682, "R", "§1d"),
        Point("stream-wram/add/tl16", "WRAM STREAM ADD 16 tasklets, MB/s", 1770, "R", "§1d"),
        Point(
            "stream-wram/scale/tl16",
            "WRAM STREAM SCALE 16 tasklets, MB/s",
            10,
            "R",
            "§1d 'tens of MB/s'",
            upper=100,
        ),
        Point(
            "stream-wram/triad/tl16",
            "WRAM STREAM TRIAD 16 tasklets, MB/s",
            10,
            "R",
            "§1d 'tens of MB/s'",
            upper=100,
        ),
    ]
    return pts


POINTS: list[Point] = _points()
