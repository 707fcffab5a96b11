"""The command line explains itself: each subcommand's ``--help`` has a description, examples
that parse, and help for every argument."""

from __future__ import annotations

import argparse

import pytest

from rbench.cli import COMMANDS, build_parser


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


def test_every_subcommand_is_described():
    assert set(_subcommands()) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_subcommands_help_has_a_description_examples_and_help_for_every_argument(name, capsys):
    command = _subcommands()[name]
    with pytest.raises(SystemExit):
        build_parser().parse_args([name, "--help"])
    text = capsys.readouterr().out
    description, examples = COMMANDS[name]
    assert description.split(":")[0][:40] in " ".join(text.split()) and "examples:\n  rbench " in text
    undocumented = [a.dest for a in command._actions if not a.help and not isinstance(a, argparse._HelpAction)]
    assert undocumented == []
    for example in examples:
        if example.startswith("rbench "):
            args = build_parser().parse_args(example.split()[1:])  # an example that does not parse exits here
            assert args.command == name


def test_printed_hints_call_rbench_as_this_shell_can(tmp_path, monkeypatch, capsys):
    """``rbench`` where it is on PATH; else the environment's own command (after ``make run``,
    ``.venv/bin/rbench``), so that a hint pasted back works, as in ``rbench list tables``."""
    import shutil
    import sys
    from pathlib import Path

    from rbench.cli import main
    from rbench.core.locations import rbench_command as command_name

    script = Path(sys.executable).with_name("rbench")
    monkeypatch.setattr(shutil, "which", lambda name: str(script))
    assert command_name() == "rbench"
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.chdir(script.parents[2])
    assert command_name() == str(script.relative_to(script.parents[2]))  # .venv/bin/rbench from the project
    assert main(["list", "tables"]) == 0
    assert ".venv/bin/rbench compare RUN --against NAME" in capsys.readouterr().out
    monkeypatch.chdir(tmp_path)
    assert command_name() == str(script)


@pytest.mark.parametrize("argv, bad, guess", [(["reprot", "x"], "reprot", "report"),
                                              (["list", "datsets"], "datsets", "datasets"),
                                              (["report", "latest", "--test", "ttest"], "ttest", "t-test")])
def test_a_misspelt_subcommand_or_choice_names_the_closest_one(argv, bad, guess, capsys):
    """Issue 81, item 7: argparse listed the choices without a guess."""
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and f"invalid choice: {bad!r}" in err and f"; did you mean {guess!r}?" in err


def test_a_misspelt_baseline_names_the_closest_system():
    from rbench.evaluation.report_experiment import experiment_tables

    per_query = {("d", s): {("ndcg", 10, "q1"): 1.0} for s in ("bm25", "dense")}
    with pytest.raises(ValueError, match="its systems: \\['bm25', 'dense'\\]; did you mean 'bm25'\\?"):
        experiment_tables(per_query, measures=["ndcg@10"], baseline="bm52")
