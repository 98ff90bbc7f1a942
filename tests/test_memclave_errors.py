"""Memclave's error reasons (issue 35, item 14): ``detail`` goes with a cleared ``err``, and a
subkernel that is not a DPU ELF file is reported as such, by name."""

from __future__ import annotations

from pathlib import Path

from memclave_helpers import run

from aiopim import memclave as mc

E = mc.VudError


async def _load_then_clear(path: Path) -> tuple[E, str, E, str]:
    r = await mc.vud_rank_alloc(0)
    await mc.vud_ime_wait(r)
    await mc.vud_ime_load(r, path)
    failed = (r.err, r.detail)
    r.err = mc.VUD_OK  # the program handled the error
    return (*failed, r.err, r.detail)


def test_a_text_file_is_not_a_dpu_elf_file_and_clearing_err_clears_detail(
    backend: str, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a program\n")
    err, detail, cleared, after = run(backend, _load_then_clear, notes)
    assert err == E.VUD_SK_NOT_FOUND
    assert detail == (
        f"vud_ime_load: subkernel '{notes}' is not a DPU ELF file "
        "(not an ELF file (bad magic number))"
    )
    assert (cleared, after) == (E.VUD_OK, "")


def test_a_missing_subkernel_cannot_be_read(backend: str, tmp_path: Path) -> None:
    missing = tmp_path / "missing.dpu"
    err, detail, _, after = run(backend, _load_then_clear, missing)
    assert err == E.VUD_SK_NOT_FOUND
    assert detail == f"vud_ime_load: cannot read subkernel '{missing}' (No such file or directory)"
    assert after == ""


def test_setting_another_error_keeps_its_reason() -> None:
    r = mc.VudRank()
    r.detail = "why"
    r.err = E.VUD_SK_TAG
    assert (r.err, r.detail) == (E.VUD_SK_TAG, "why")
    r.err = 0  # type: ignore[assignment]  # the plain C value of VUD_OK
    assert r.detail == ""
