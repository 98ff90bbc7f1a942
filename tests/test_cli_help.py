"""``aiopim --help`` and every subcommand's ``--help``: every option says what it does."""

from __future__ import annotations

import argparse
import contextlib

import pytest

from aiopim.cli import main as cli_main


def parser_of(monkeypatch: pytest.MonkeyPatch, *argv: str) -> argparse.ArgumentParser:
    """The parser ``aiopim *argv`` parses its arguments with (the run stops there)."""
    seen: list[argparse.ArgumentParser] = []

    def capture(self: argparse.ArgumentParser, *args: object, **kw: object) -> None:
        seen.append(self)
        raise SystemExit(0)  # as after --help (a command may catch it and return)

    with monkeypatch.context() as m:
        m.setattr(argparse.ArgumentParser, "parse_args", capture)
        with contextlib.suppress(SystemExit):
            cli_main(list(argv))
    assert seen, f"aiopim {' '.join(argv)} parsed no arguments"
    return seen[0]


def subcommands(monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """Each subcommand listed by ``aiopim --help``, with its help line."""
    top = parser_of(monkeypatch)
    (sub,) = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    return {a.dest: a.help for a in sub._choices_actions}


def undocumented(parser: argparse.ArgumentParser) -> list[str]:
    """The options and arguments of ``parser`` without help text."""
    return [
        "/".join(action.option_strings) or action.dest
        for action in parser._actions
        if not action.help or not action.help.strip() or action.help == argparse.SUPPRESS
    ]


def test_every_subcommand_is_listed_with_help(monkeypatch: pytest.MonkeyPatch) -> None:
    commands = subcommands(monkeypatch)
    assert {"symbols", "replay", "record", "didl", "asm", "disasm", "conformance"} <= set(
        commands
    )
    assert [name for name, text in commands.items() if not text] == []


def test_every_option_of_every_subcommand_has_help(monkeypatch: pytest.MonkeyPatch) -> None:
    missing = {
        name: undocumented(parser_of(monkeypatch, name))
        for name in subcommands(monkeypatch)
    }
    assert {name: options for name, options in missing.items() if options} == {}


def test_the_options_new_users_asked_about(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35 item 8: these had no help text."""
    for command, options in {
        "replay": ["--progress", "--no-progress", "--seed", "--backend"],
        "record": ["--progress", "--no-progress", "--seed", "--backend", "--chip"],
        "conformance": ["--progress", "--no-progress", "--backend"],
    }.items():
        with pytest.raises(SystemExit):
            cli_main([command, "--help"])
        text = capsys.readouterr().out
        for option in options:
            line = next(line for line in text.splitlines() if line.strip().startswith(option))
            # the help follows on the same line or the next one
            assert len(line.split()) > 2 or text.split(line, 1)[1].startswith("\n    "), line
        helps = {
            a: parser_of(monkeypatch, command)._option_string_actions[a].help for a in options
        }
        assert all(helps.values()), (command, helps)
