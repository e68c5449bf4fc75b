"""Real ``bentoml serve`` processes for the service tests, on free localhost ports, each serving a
tiny fixture model packaged into a private model store (never the user's ~/bentoml)."""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
# whatever in this process touches BentoML's home (clients, analytics) stays out of ~/bentoml
if "BENTOML_HOME" not in os.environ:
    os.environ["BENTOML_HOME"] = tempfile.mkdtemp(prefix="bentoml-home-")
    atexit.register(shutil.rmtree, os.environ["BENTOML_HOME"], ignore_errors=True)
os.environ.setdefault("BENTOML_DO_NOT_TRACK", "True")
START_TIMEOUT = 180  # seconds; two servers start side by side on a 2-core CI machine


@dataclass
class Server:
    url: str
    model: str
    proc: subprocess.Popen
    log: Path

    def post(self, path: str, body: bytes | str | None = None, json=None, headers=None, timeout: float = 60):
        headers = {"content-type": "application/json", **(headers or {})}
        return httpx.post(self.url + path, content=body, json=json, headers=headers, timeout=timeout)

    def get(self, path: str, timeout: float = 30):
        return httpx.get(self.url + path, timeout=timeout)

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-5000:]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(home: Path, model: str, name: str, backend: str | None = "fp32", env: dict[str, str] | None = None) -> Server:
    """``backend``: TAGGER_BACKEND (None: unset, the service's default). fp32 by default: the tests compare answers
    with offline fp32 predictions exactly, and with int8's per-batch activation scales an answer depends on the
    requests batched with it. ``env``: more environment variables of the server."""
    port = free_port()
    log = home / f"{name}.log"
    env = {**os.environ, "BENTOML_HOME": str(home), "TAGGER_MODEL": model, "TAGGER_TORCH_THREADS": "1",
           "OMP_NUM_THREADS": "1", "BENTOML_DO_NOT_TRACK": "True", "TAGGER_BACKEND": backend, **(env or {})}
    env = {k: v for k, v in env.items() if v is not None}
    with log.open("wb") as out:  # the server writes to its own copy of the file
        proc = subprocess.Popen(
            [sys.executable, "-m", "bentoml", "serve", "serve.service:TaggingService", "--host", "127.0.0.1",
             "--port", str(port)],
            cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return Server(f"http://127.0.0.1:{port}", model, proc, log)


def wait_ready(server: Server) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"bentoml serve exited with {server.proc.returncode}:\n{server.logs()}")
        try:
            if httpx.get(server.url + "/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"bentoml serve not ready after {START_TIMEOUT}s:\n{server.logs()}")


def stop(server: Server) -> None:
    """Stop the server and every worker it spawned (workers run in sessions of their own)."""
    try:
        family = [psutil.Process(server.proc.pid), *psutil.Process(server.proc.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        family = []
    for p in family:
        try:
            p.send_signal(signal.SIGTERM)
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(family, timeout=20)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    server.proc.wait(timeout=10)


def package_into(home: Path, run_dir: Path, name: str) -> str:
    from tagger.artifacts.package import package

    (home / "models").mkdir(parents=True, exist_ok=True)
    with model_store(home / "models"):
        return str(package(run_dir, name).tag)


@pytest.fixture(scope="session")
def servers(tmp_path_factory, tiny_pos_run, tiny_ner_from_pos_run):
    """{"pos": Server, "ner": Server}: both started at once, stopped at the end whatever happens. The NER model is
    fine-tuned from the POS model (init_from), so every NER test also holds for a fine-tuned model.
    Each has its own BENTOML_HOME: servers sharing one would share (and reset) its metrics folder."""
    homes = {task: tmp_path_factory.mktemp(f"bentoml_{task}") for task in ("pos", "ner")}
    tags = {"pos": package_into(homes["pos"], tiny_pos_run, "tagger"),  # the name the service serves by default
            "ner": package_into(homes["ner"], tiny_ner_from_pos_run, "tagger-ner")}
    running = {}
    try:
        running = {"pos": start(homes["pos"], "tagger:latest", "pos"),
                   "ner": start(homes["ner"], "tagger-ner:latest", "ner")}
        for server in running.values():
            wait_ready(server)
        for task, server in running.items():
            server.model = tags[task]
        yield running
    finally:
        for server in running.values():
            stop(server)


@pytest.fixture(scope="session")
def pos_server(servers) -> Server:
    return servers["pos"]


@pytest.fixture(scope="session")
def ner_server(servers) -> Server:
    return servers["ner"]


# -- the real service app in this process -----------------------------------------------------------------------
@contextlib.contextmanager
def model_store(models: Path):
    """BentoML's model store is ``models`` meanwhile."""
    from bentoml._internal.configuration.containers import BentoMLContainer
    from bentoml._internal.models import ModelStore

    BentoMLContainer.model_store.set(ModelStore(str(models)))
    try:
        yield
    finally:
        BentoMLContainer.model_store.reset()


def direct_apis(app):
    """The serve.bentoml_internals.DirectAPIs middleware of the service's ASGI ``app``."""
    from serve.bentoml_internals import DirectAPIs

    if app.middleware_stack is None:  # Starlette builds it on the first call
        app.middleware_stack = app.build_middleware_stack()
    layer = app.middleware_stack
    while not isinstance(layer, DirectAPIs):
        layer = layer.app
    return layer


@contextlib.contextmanager
def bentoml_dispatch(app):
    """Every API call of ``app`` goes through BentoML's own dispatch meanwhile: DirectAPIs answers none."""
    direct = direct_apis(app)
    routes, direct.routes = direct.routes, {}
    try:
        yield
    finally:
        direct.routes = routes


@pytest.fixture(scope="session")
def service_app(tmp_path_factory, tiny_pos_run):
    """A TestClient of the ASGI app `bentoml serve` runs in a worker (``TaggingService.to_asgi()``: BentoML's
    middlewares, routes and dispatch, the service's middlewares), started (the service instance loads the tiny POS
    model) in this process. One per session: BentoML's metrics middleware registers its Prometheus series in the
    process's registry, once."""
    from starlette.testclient import TestClient

    from serve.service import TaggingService

    home = tmp_path_factory.mktemp("bentoml_in_process")
    package_into(home, tiny_pos_run, "tagger")  # the name the service serves by default
    with model_store(home / "models"):
        with TestClient(TaggingService.to_asgi(), raise_server_exceptions=False) as client:
            yield client
