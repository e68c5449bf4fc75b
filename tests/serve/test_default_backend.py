"""The service on its default backend (int8, on the deprecated torch.ao.quantization.quantize_dynamic) where torch no
longer has quantize_dynamic: the worker starts on the fallback backend, says so in the log, and tags."""
from __future__ import annotations

import os

from tagger.inference.backends import DEFAULT_BACKEND, bf16_native
from tests.serve.conftest import package_into, start, stop, wait_ready

# sitecustomize of the server's processes: torch.ao.quantization without quantize_dynamic, as a torch that removed it
HIDE_QUANTIZE_DYNAMIC = '''
import importlib.abc
import importlib.util
import sys


class HideQuantizeDynamic(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch.ao.quantization":
            return None
        sys.meta_path.remove(self)  # the real finders find the real module, once
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            del module.quantize_dynamic

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, HideQuantizeDynamic())
'''
SENTENCE = ["the", "big", "cat", "sees", "a", "dog", "."]


def test_the_default_service_starts_and_tags_without_quantize_dynamic(tmp_path, tiny_pos_run):
    import tagger

    assert DEFAULT_BACKEND == "int8"
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(HIDE_QUANTIZE_DYNAMIC, encoding="utf-8")
    home = tmp_path / "bentoml"
    tag = package_into(home, tiny_pos_run, "tagger")
    pythonpath = os.pathsep.join(p for p in (str(shim), os.environ.get("PYTHONPATH")) if p)
    server = start(home, "tagger:latest", "no-quantize-dynamic", backend=None, env={"PYTHONPATH": pythonpath})
    try:
        wait_ready(server)
        fallback = "bf16" if bf16_native() else "fp32"
        card = server.get("/model").json()
        assert card["name"] == tag and card["backend"] == fallback
        assert f"backend int8 runs as {fallback}: torch.ao.quantization.quantize_dynamic failed (AttributeError" \
            in server.logs()
        response = server.post("/tag", json={"sentences": [SENTENCE]})
        assert response.status_code == 200, response.text
        tags = [t["tag"] for t in response.json()["results"][0]["tokens"]]
        assert tags == tagger.load(tiny_pos_run, backend=fallback).tag_sentences([SENTENCE])[0].tags
    finally:
        stop(server)
