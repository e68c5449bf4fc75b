"""serve.settings: the service's TAGGER_* variables, typed and bounded in one object; a bad value names its variable,
in the settings object and when a real ``bentoml serve`` starts."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from serve.settings import TOOL_VARIABLES, SettingsError, ServiceSettings, load_settings, markdown_table
from tagger.inference.backends import BACKENDS, DEFAULT_BACKEND
from tests.serve.conftest import REPO, START_TIMEOUT, start, stop


@pytest.fixture
def env(monkeypatch):
    """The environment without any TAGGER_* variable; ``env(NAME=value)`` sets some."""
    for name in [n for n in os.environ if n.upper().startswith("TAGGER_")]:
        monkeypatch.delenv(name)

    def set_vars(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)
    return set_vars


def test_defaults(env):
    s = load_settings()
    assert (s.model, s.backend, s.workers, s.torch_threads, s.streams) == ("tagger:latest", DEFAULT_BACKEND, 1, 0, None)
    assert (s.batch_size, s.batch_tokens, s.max_batch, s.trim_interval) == (256, 2048, 256, 2.0)
    assert (s.max_sentences, s.max_tokens, s.max_chars, s.max_body_bytes, s.max_attention_tokens) == (
        64, 5000, 100_000, 1_000_000, 200)
    assert s.tracing is False and s.access_log is False


def test_values_are_read_typed_and_an_empty_one_is_unset(env):
    env(TAGGER_MODEL="tagger-ner:abc", TAGGER_BACKEND="fp32", TAGGER_WORKERS="3", TAGGER_STREAMS="",
        TAGGER_TRIM_INTERVAL="0.5", TAGGER_TRACING="1", TAGGER_ACCESS_LOG="0", TAGGER_MAX_BODY_BYTES="10")
    s = load_settings()
    assert (s.model, s.backend, s.workers, s.streams, s.trim_interval) == ("tagger-ner:abc", "fp32", 3, None, 0.5)
    assert (s.tracing, s.access_log, s.max_body_bytes) == (True, False, 10)
    with pytest.raises(Exception):  # read once: the object cannot change under the service
        s.workers = 2


@pytest.mark.parametrize("name, value, message", [
    ("TAGGER_WORKERS", "0", "TAGGER_WORKERS: Input should be greater than or equal to 1 (got '0')"),
    ("TAGGER_WORKERS", "two", "TAGGER_WORKERS: Input should be a valid integer, unable to parse string as an integer "
                              "(got 'two')"),
    ("TAGGER_TORCH_THREADS", "-1", "TAGGER_TORCH_THREADS: Input should be greater than or equal to 0 (got '-1')"),
    ("TAGGER_STREAMS", "0", "TAGGER_STREAMS: Input should be greater than or equal to 1 (got '0')"),
    ("TAGGER_TRIM_INTERVAL", "-2", "TAGGER_TRIM_INTERVAL: Input should be greater than or equal to 0 (got '-2')"),
    ("TAGGER_MAX_BODY_BYTES", "1e6", "TAGGER_MAX_BODY_BYTES: Input should be a valid integer"),
    ("TAGGER_BACKEND", "fp16", "TAGGER_BACKEND: Input should be 'fp32', 'bf16', 'int8', 'onnx' or 'onnx-int8' "
                               "(got 'fp16')"),
    ("TAGGER_TRACING", "maybe", "TAGGER_TRACING: Input should be a valid boolean"),
    ("TAGGER_MODEL", "my model", "TAGGER_MODEL: my model is not a valid BentoML tag"),
])
def test_a_bad_value_names_its_variable(env, name, value, message):
    env(**{name: value})
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert message in str(error.value)


def test_every_bad_variable_is_named_at_once(env):
    env(TAGGER_WORKERS="0", TAGGER_MAX_BATCH="0", TAGGER_BATCH_SIZE="many")
    with pytest.raises(SettingsError) as error:
        load_settings()
    named = re.findall(r"^  (TAGGER_\w+):", str(error.value), re.M)
    assert named == ["TAGGER_WORKERS", "TAGGER_BATCH_SIZE", "TAGGER_MAX_BATCH"]


def test_a_mistyped_variable_is_named_with_the_setting_it_resembles(env):
    env(TAGGER_WORKRES="2", TAGGER_COLOUR="blue", TAGGER_URL="http://127.0.0.1:1", TAGGER_DATA_DIR="data")
    with pytest.raises(SettingsError) as error:
        load_settings()
    lines = re.findall(r"^  (TAGGER_.*)$", str(error.value), re.M)
    assert lines == ["TAGGER_COLOUR: not a setting of the service",
                     "TAGGER_WORKRES: not a setting of the service (did you mean TAGGER_WORKERS?)"]


def test_a_backend_this_cpu_cannot_run_is_refused(env, monkeypatch):
    import tagger.inference.backends

    monkeypatch.setattr(tagger.inference.backends, "bf16_native", lambda: False)
    env(TAGGER_BACKEND="bf16")
    with pytest.raises(SettingsError, match=r"TAGGER_BACKEND: backend 'bf16' needs a CPU with native bf16"):
        load_settings()


@pytest.mark.parametrize("switch, on", [(None, False), ("1", True)])
def test_tracing_of_the_api_routes_and_the_access_log_are_off_unless_asked_for(tmp_path, switch, on):
    """BentoML's OpenTelemetry middleware (which records nothing at its default sample rate of 0) passes the API
    routes by unless TAGGER_TRACING=1, other routes are traced as BentoML traces them; BentoML's access log is off
    unless TAGGER_ACCESS_LOG=1."""
    check = ("import json, serve.service as s; from bentoml._internal.container import BentoMLContainer as C; "
             "s.TaggingService.inject_config(); urls = C.tracing_excluded_urls.get(); "
             "print(json.dumps({'access_log': C.api_server_config.logging.access.enabled.get(), 'skipped': "
             "{p: urls.url_disabled('http://127.0.0.1:3000' + p) for p in "
             "('/tag', '/entities', '/attention', '/tags', '/model', '/livez')}}))")
    env = {k: v for k, v in os.environ.items() if k not in ("TAGGER_TRACING", "TAGGER_ACCESS_LOG")}
    env.update(BENTOML_HOME=str(tmp_path), **({"TAGGER_TRACING": switch, "TAGGER_ACCESS_LOG": switch} if switch else {}))
    out = subprocess.run([sys.executable, "-c", check], env=env, cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["access_log"] is on
    assert got["skipped"] == {"/tag": not on, "/entities": not on, "/attention": not on,
                              "/tags": False, "/model": False, "/livez": False}


def test_the_backends_are_those_of_tagger_backends():
    assert ServiceSettings.model_json_schema()["properties"]["backend"]["enum"] == list(BACKENDS)


def test_the_reference_has_the_table_of_every_setting():
    reference = (REPO / "docs" / "reference.md").read_text(encoding="utf-8")
    assert markdown_table() in reference, (
        "docs/reference.md lacks the settings table as serve/settings.py describes it: put the output of "
        "`python -m serve.settings` in its place")
    assert reference.count("| variable | type | default | meaning |") == 1


def test_the_service_reads_the_environment_only_through_the_settings():
    names = {f"TAGGER_{name.upper()}" for name in ServiceSettings.model_fields} | TOOL_VARIABLES
    for path in sorted((REPO / "serve").glob("*.py")):
        source = path.read_text(encoding="utf-8")
        if path.name != "settings.py":
            assert not re.search(r"os\.environ|getenv|environ\.get", source), f"{path.name} reads the environment"
        # a message or comment naming a variable names one that exists
        assert set(re.findall(r"TAGGER_[A-Z_]*[A-Z]", source)) <= names, path.name


def test_bentoml_serve_with_a_bad_value_stops_and_names_it(tmp_path):
    server = start(tmp_path, "tagger:latest", "bad-settings", env={"TAGGER_WORKERS": "0"})
    try:
        code = server.proc.wait(timeout=START_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"bentoml serve with TAGGER_WORKERS=0 is still running:\n{server.logs()}")
    finally:
        stop(server)
    log = server.logs()
    assert code != 0, log
    assert "TAGGER_WORKERS: Input should be greater than or equal to 1 (got '0')" in log, log
    assert "Traceback" not in log, log
