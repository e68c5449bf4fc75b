"""``tagger package``: packaging a run, --if-missing, and a failing exit that names the problem."""
from __future__ import annotations

import json

from tagger.commands.package import main
from tests.artifacts.test_package import versions


def test_cli_if_missing_and_error_exit(store, tiny_pos_run, capsys):
    assert main([str(tiny_pos_run), "--name", "tagger-cli"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["task"] == "pos" and out["tag"].startswith("tagger-cli:")
    assert main([str(tiny_pos_run), "--name", "tagger-cli", "--if-missing"]) == 0
    assert "already in the store" in capsys.readouterr().out
    assert versions("tagger-cli") == [out["tag"]]
    assert main([str(tiny_pos_run / "nope"), "--name", "tagger-cli"]) == 1
    assert "not found" in capsys.readouterr().err
