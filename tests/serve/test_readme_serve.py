"""The README's serving example, run as written against a served tiny POS model."""
from __future__ import annotations

import json
import shutil

import pytest

from tests.test_readme import README, blocks, run_block


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")
def test_readme_curl_example_answers_as_described(pos_server, tmp_path):
    (block,) = blocks(README, "readme:serve")
    host = pos_server.url.removeprefix("http://")
    done = run_block(block, tmp_path, {"localhost:3000": host}, timeout=60)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["task"] == "pos" and answer["model"] == pos_server.model
    tokens = answer["results"][0]["tokens"]
    assert [t["text"] for t in tokens] == ["I", "do", "n't", "like", "green", "eggs", "."]
    assert all({"tag", "score", "start", "end"} <= t.keys() for t in tokens)
    assert (tokens[2]["start"], tokens[2]["end"]) == (4, 7)
