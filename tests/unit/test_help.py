"""`rbench --help` and every subcommand's `--help` print their usage and exit 0 (a bare % in a
help text once ended `rbench --help` in a traceback)."""

from __future__ import annotations

import pytest

from rbench.cli import build_parser

SUBCOMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)


def test_every_subcommand_is_covered():
    assert {"run", "compare", "compare-grid", "chunking", "report", "show"} <= set(SUBCOMMANDS)


@pytest.mark.parametrize("argv", [["--help"]] + [[name, "--help"] for name in SUBCOMMANDS])
def test_help_prints_usage_and_exits_zero(argv, capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(argv)
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: rbench") and "Traceback" not in out
