"""bentofile.yaml, read by BentoML itself: a Bento's container installs the CPU build of torch, at the version
the project pins."""
from __future__ import annotations

from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[2]
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _pins(path: Path) -> dict[str, str]:
    reqs = [Requirement(line) for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    return {r.name.lower(): str(r.specifier) for r in reqs}


def test_bento_installs_the_cpu_torch_wheel_at_the_pinned_version(tmp_path):
    from bentoml._internal.bento.build_config import BentoBuildConfig

    python = BentoBuildConfig.from_file(str(REPO / "bentofile.yaml")).with_defaults().python
    # what `bentoml build` writes into the Bento: the container's requirements and its pip command line
    python.write_to_bento(tmp_path, str(REPO))
    requirements = tmp_path / "env" / "python" / "requirements.txt"
    torch = _pins(requirements)["torch"]
    # an exact pin on the local label `+cpu`: only the CPU index has such a file, PyPI's `torch` (CUDA) cannot match
    assert torch.startswith("==") and torch.endswith("+cpu"), torch
    # the version the tests ran with
    assert torch.removeprefix("==").removesuffix("+cpu") == _pins(REPO / "constraints.txt")["torch"].removeprefix("==")
    install = (tmp_path / "env" / "python" / "install.sh").read_text()
    assert f"--extra-index-url {CPU_INDEX}" in install


def test_bento_installs_what_serving_imports_and_no_training_stack():
    from bentoml._internal.bento.build_config import BentoBuildConfig

    from tagger.inference.backends import DEFAULT_BACKEND

    config = BentoBuildConfig.from_file(str(REPO / "bentofile.yaml"))
    names = {Requirement(p).name.lower() for p in config.python.packages}
    assert not names & {"pytorch-lightning", "lightning", "hydra-core"}
    assert "spacy" in names  # texts are tokenised by tagger.tokenize
    assert "pydantic-settings" in names  # serve.settings
    assert {"uvloop", "httptools"} <= names  # as the serve extra: uvicorn's fast event loop and HTTP parser
    if DEFAULT_BACKEND.startswith("onnx"):
        assert {"onnx", "onnxruntime"} <= names
