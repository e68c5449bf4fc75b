"""The `tagger` console command: it lists its subcommands, each subcommand's --help works, and pyproject installs it."""
from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from tagger.cli import COMMANDS, main

REPO = Path(__file__).resolve().parents[1]


def test_help_lists_every_subcommand(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("train", "evaluate", "predict", "package", "serve", "report", "export"):
        assert f"\n  {name} " in out
    assert main([]) == 2  # no subcommand: usage, and a failing exit


def test_unknown_subcommand_is_named(capsys):
    assert main(["tran"]) == 2
    assert "'tran'" in capsys.readouterr().err


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_subcommand_has_help(name, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # train hands its arguments to Hydra through sys.argv
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code in (0, None)
    out = capsys.readouterr().out
    assert ("Configuration groups" in out and "data: " in out) if name == "train" else f"usage: tagger {name}" in out


def test_closed_stdout_ends_quietly(tmp_path):
    """`tagger ... | head`: the reader goes away early; the command stops with 141 (SIGPIPE), no traceback."""
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "tagger.cli", "--help"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # nobody reads: the first write fails with a broken pipe
    with proc.stderr:
        err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err and "BrokenPipe" not in err


def test_console_script_is_declared():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["tagger"] == "tagger.cli:console"
