"""The Memclave steps of scenario files as untrusted input: every vud_* key has its limit, every
step its cost in the work, host and DPU memory estimates, and mutations of memclave_add.toml
end in a replay or a ScenarioError naming the file, line and key."""

from __future__ import annotations

import gc
import random
import warnings
import weakref
from pathlib import Path

import numpy as np
import pytest
from scenario_fuzz import mutate

import aiopim
from aiopim.memclave import _scenario as steps
from aiopim.memclave._enclave import machine_of
from aiopim.scenario import ScenarioError, load_scenario, parse_scenario, replay
from aiopim.scenario import _limits as L
from aiopim.scenario._spec import kernel_cost

ROOT = Path(__file__).resolve().parent.parent
ADD = ROOT / "scenarios" / "memclave_add.toml"
TEXT = ADD.read_text(encoding="utf-8")
#: the lines of the steps that are changed below
LINE_B, LINE_FROM = 28, 31
WORDS = 8 * 1024 * 1024  # 64-bit words in the 64 MiB of MRAM


def error_of(text: str, tmp_path: Path) -> ScenarioError:
    path = tmp_path / "mc.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{path}:")
    return info.value


def test_the_lines_are_those_of_the_shipped_file() -> None:
    sc = parse_scenario(TEXT)
    ops = {s.line: (s.op, s.params.get("symbol")) for s in sc.tasks[0].steps}
    assert ops[LINE_B] == ("vud_to", "b") and ops[LINE_FROM] == ("vud_from", "c")


def test_the_long_sweeps_words_of_ten_to_the_eighteen_is_refused(tmp_path: Path) -> None:
    # the long fuzz sweep's case: the replay used to build a 10^18-element array
    text = TEXT.replace('symbol = "b", words = 64', 'symbol = "b", words = 1000000000000000001')
    err = error_of(text, tmp_path)
    assert (err.line, err.key) == (LINE_B, "tasks[0].steps[6].words")
    assert err.message == f"1000000000000000001 is more than the limit of {WORDS}"


@pytest.mark.parametrize(
    ("old", "new", "line", "key", "limit"),
    [
        ('{ op = "vud_alloc" }', '{ op = "vud_alloc", rank_nr = 40 }', 22, "steps[0].rank_nr", 39),
        ("n = 8", "n = 257", 24, "steps[2].n", 256),
        ("key_seed = 0", f"key_seed = {1 << 64}", 25, "steps[3].key_seed", (1 << 64) - 1),
        ("scale = 2", f"scale = {1 << 64}", LINE_B, "steps[6].scale", (1 << 64) - 1),
        ('"c", words = 64', f'"c", words = {WORDS + 1}', LINE_FROM, "steps[9].words", WORDS),
    ],
)
def test_every_vud_key_has_its_limit(
    tmp_path: Path, old: str, new: str, line: int, key: str, limit: int
) -> None:
    assert old in TEXT
    err = error_of(TEXT.replace(old, new), tmp_path)
    assert (err.line, err.key) == (line, f"tasks[0].{key}")
    assert err.message.endswith(f"is more than the limit of {limit}")


def test_rank_nr_below_any_is_refused(tmp_path: Path) -> None:
    err = error_of(
        TEXT.replace('{ op = "vud_alloc" }', '{ op = "vud_alloc", rank_nr = -2 }'), tmp_path
    )
    assert (err.line, err.key) == (22, "tasks[0].steps[0].rank_nr")
    assert "-2 is not a rank: give -1 (any) or 0, 1, ..." in err.message


def test_the_add_kernel_checks_its_words(tmp_path: Path) -> None:
    err = error_of(TEXT.replace("words = 64\n", "words = 4294967296\n", 1), tmp_path)
    assert (err.line, err.key) == (17, "programs.add.words")
    assert err.message == f"4294967296 is more than the limit of {steps.ADD_MAX_WORDS}"
    err = error_of(TEXT.replace("words = 64\n", "words = 0\n", 1), tmp_path)
    assert err.key == "programs.add" and "words must be between 1 and 256" in err.message


def test_the_work_estimate_counts_every_vud_step() -> None:
    sc = parse_scenario(TEXT)
    per_rank = 64
    xfer = 1 + per_rank * (1 + 1)  # 64 words: 512 bytes, one 4 KiB unit
    expected = (
        (1 + per_rank * steps.BOOT_WORK)  # vud_alloc
        + (1 + per_rank)  # vud_wait
        + 1  # vud_workers
        + (1 + per_rank * steps.KEY_EXCHANGE_WORK)
        + (1 + per_rank * steps.LOAD_WORK)
        + 2 * xfer  # vud_to a, b
        + (1 + per_rank * (steps.LAUNCH_WORK + 8))  # the loader and vud_add's launch
        + (1 + per_rank)  # vud_wait
        + xfer  # vud_from
        + (1 + per_rank)  # vud_free
    )
    assert L.estimate_work(sc, kernel_cost) == [expected]


def test_repeated_key_exchanges_exceed_the_work_limit(tmp_path: Path) -> None:
    # 400 exchanges of ~50 ms each: about 20 s, more than the estimate allows
    text = TEXT.replace(
        '{ op = "vud_install_key", key_seed = 0 }',
        '{ op = "repeat", times = 400, steps = [{ op = "vud_install_key" }] }',
    )
    err = error_of(text, tmp_path)
    assert (err.line, err.key) == (25, "tasks[0].steps[3]")
    assert f"more than the limit of {L.MAX_WORK}" in err.message
    assert "of them in this step (repeat)" in err.message
    assert parse_scenario(text.replace("times = 400", "times = 200")).name == "Memclave add"


@pytest.mark.parametrize(
    ("old", "new", "line"),
    [
        # 64 buffers of 8 MiB words: 4 GiB of host memory
        ('"c", words = 64', f'"c", words = {WORDS}', LINE_FROM),
        # 64 rows of one million words for vud_transfer_to
        ('"b", words = 64', '"b", words = 1000000, per_dpu = true', LINE_B),
    ],
)
def test_host_buffers_of_a_vud_step_are_limited(
    tmp_path: Path, old: str, new: str, line: int
) -> None:
    err = error_of(TEXT.replace(old, new), tmp_path)
    assert err.line == line and err.key.startswith("tasks[0].steps[")
    assert f"more than the limit of {L.MAX_HOST_BYTES >> 20} MiB" in err.message


def test_dpu_memory_filled_by_vud_transfers_is_limited(tmp_path: Path) -> None:
    # 64 MiB broadcast to the 64 DPUs of the rank: 4 GiB of emulated MRAM
    err = error_of(TEXT.replace('"b", words = 64', f'"b", words = {WORDS}'), tmp_path)
    assert (err.line, err.key) == (LINE_B, "tasks[0].steps[6]")
    assert f"the limit of {L.MAX_DPU_BYTES >> 30} GiB" in err.message
    # a quarter of it, less the loader's buffers at the top of MRAM, fits
    sc = parse_scenario(TEXT.replace('"b", words = 64', f'"b", words = {WORDS // 4 - 65536}'))
    assert sc.tasks[0].steps[6].params["words"] == WORDS // 4 - 65536


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_per_dpu_transfers_replay(backend: str) -> None:
    text = TEXT.replace('fill = "iota", scale = 2', 'fill = "iota", scale = 2, per_dpu = true')
    res = replay(parse_scenario(text), backend=backend)
    c = res.buffers["c"].view(np.uint64).reshape(64, 64)
    assert (c == 3 * np.arange(64, dtype=np.uint64)).all()


def test_memclave_state_does_not_keep_its_emulator_alive() -> None:
    # the state was a value of a dictionary weakly keyed by its emulator and referred to it:
    # every emulator that ran Memclave stayed in memory (a fuzz sweep ran out of memory)
    emu = aiopim.Emulator(aiopim.MachineConfig(nr_ranks=1, nr_dpus_per_rank=64))
    assert machine_of(emu) is machine_of(emu)
    ref = weakref.ref(emu)
    del emu
    gc.collect()
    assert ref() is None


def _outcome(path: Path, data: bytes, mutation: str) -> str:
    path.write_bytes(data)
    try:
        sc = load_scenario(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", aiopim.DpuQuirkWarning)
            replay(sc)
    except ScenarioError as err:
        assert str(err).startswith(f"{path}"), (mutation, err)
        assert err.key or err.line is not None, (mutation, err)
        return "rejected"
    except BaseException as exc:  # pragma: no cover - the point of the test
        raise AssertionError(f"{mutation}: {exc!r}") from exc
    return "replayed"


def _sweep(tmp_path: Path, seeds: range, per_seed: int) -> dict[str, int]:
    seen = {"replayed": 0, "rejected": 0}
    for seed in seeds:
        rng = random.Random(seed)
        for _ in range(per_seed):
            case = mutate(rng, ADD)
            seen[_outcome(tmp_path / "fuzz-memclave_add.toml", case.data, case.mutation)] += 1
    return seen


def test_fuzzed_memclave_scenarios_end_in_a_replay_or_a_scenario_error(tmp_path: Path) -> None:
    seen = _sweep(tmp_path, range(20261124, 20261126), 50)
    assert seen["rejected"] > 75 and seen["replayed"] >= 2, seen


@pytest.mark.long
def test_fuzzed_memclave_scenarios_long_sweep(tmp_path: Path) -> None:
    seen = _sweep(tmp_path, range(100), 50)
    assert seen["replayed"] > 100, seen
