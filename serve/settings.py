"""Every setting of the service, read from ``TAGGER_*`` environment variables into one validated object.

:func:`get_settings` reads them once per process (``bentoml serve``'s entry process imports the service module
before any worker starts, so a bad value stops the server there). A value of the wrong type or out of its bounds
raises :class:`SettingsError`, which names each variable, what is wrong and the value given::

    TAGGER_WORKERS: Input should be greater than or equal to 1 (got '0')

An empty variable counts as unset. ``python -m serve.settings`` prints the table of variables that
docs/reference.md carries (tests/serve/test_settings.py checks the two agree).
"""
from __future__ import annotations

import difflib
import functools
import os
from typing import Any, Literal, Optional

from bentoml.exceptions import BentoMLConfigException
from pydantic import Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError
from pydantic_settings import BaseSettings, SettingsConfigDict

from tagger.inference.backends import BACKENDS, DEFAULT_BACKEND, BackendError, check_backend
from tagger.limits import BATCH_SIZE, MAX_TOKENS, STREAMS

ENV_PREFIX = "TAGGER_"
# TAGGER_* variables of the project's tools, not of the service: scripts/with_service.py gives the URL and pid of the
# service it started to the command it runs, and the benchmarks read their corpora from TAGGER_DATA_DIR
TOOL_VARIABLES = frozenset({"TAGGER_URL", "TAGGER_PID", "TAGGER_DATA_DIR"})


class SettingsError(BentoMLConfigException):
    """Invalid service settings. A BentoML exception: `bentoml serve` prints its message alone, without a traceback."""


class ServiceSettings(BaseSettings):
    """The service's settings: each field is read from the environment variable ``TAGGER_`` + its name in capitals."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, env_ignore_empty=True, frozen=True)

    # what is served
    model: str = Field("tagger:latest", min_length=1,
                       description="the BentoML model-store tag of the packaged model (`tagger package`)")
    backend: Literal[BACKENDS] = Field(DEFAULT_BACKEND, description=(
        "what computes the model (`tagger.inference.backends`); `bf16` only on a CPU with native bf16"))
    # processes, threads and model passes
    workers: int = Field(1, ge=1, description="model processes behind the port, each loading the model once")
    torch_threads: int = Field(0, ge=0, description="torch intra-op threads per worker; 0: torch's default")
    streams: Optional[int] = Field(None, ge=1, description=(
        f"forward passes of one model call run side by side (`tagger.inference.pass_threads`); unset: {STREAMS}, at most the "
        "torch threads"))
    batch_size: int = Field(BATCH_SIZE, ge=1, description="windows (sentences or pieces of long ones) per forward pass")
    batch_tokens: int = Field(MAX_TOKENS, ge=1, description="padded token positions per forward pass")
    max_batch: int = Field(256, ge=1, description="sentences of queued requests that one model pass merges, at most")
    trim_interval: float = Field(2.0, ge=0, description=(
        "seconds between two hand-backs of freed heap memory to the OS by the model thread, at least "
        "(`serve/memory.py`); 0: never"))
    # request limits (serve/schemas.py): a request over one is a 4xx naming the variable
    max_sentences: int = Field(64, ge=1, description="sentences or texts per request")
    max_tokens: int = Field(5000, ge=1, description="tokens per sentence or text (texts: once tokenised)")
    max_chars: int = Field(100_000, ge=1, description="characters per text")
    max_body_bytes: int = Field(1_000_000, ge=1, description="request body size in bytes (413 above)")
    max_attention_tokens: int = Field(200, ge=1, description="tokens of the one sentence `/attention` shows")
    # BentoML middleware (serve/service.py says what each costs)
    tracing: bool = Field(False, description=(
        "1: the API routes pass through BentoML's OpenTelemetry middleware (set `tracing.sample_rate` and an "
        "exporter too)"))
    access_log: bool = Field(False, description="1: BentoML's access log, a line per request")

    @field_validator("model")
    @classmethod
    def _a_store_tag(cls, value: str) -> str:
        from bentoml import Tag

        try:
            Tag.from_taglike(value)
        except ValueError as e:
            raise PydanticCustomError("model_tag", str(e)) from None
        return value

    @field_validator("backend")
    @classmethod
    def _runs_here(cls, value: str) -> str:
        try:
            check_backend(value)
        except BackendError as e:
            raise PydanticCustomError("backend_unavailable", str(e)) from None
        return value


def env_name(field: str) -> str:
    return f"{ENV_PREFIX}{field.upper()}"


def unknown_variables() -> list[str]:
    """``TAGGER_*`` variables of the environment that are no setting (a mistyped name would otherwise leave its
    setting at the default unnoticed), each with the setting its name is closest to, if any."""
    known = {env_name(name) for name in ServiceSettings.model_fields}
    lines = []
    for name in sorted(n for n in os.environ if n.upper().startswith(ENV_PREFIX)):
        if name.upper() in known or name.upper() in TOOL_VARIABLES:
            continue
        close = difflib.get_close_matches(name.upper(), sorted(known), n=1, cutoff=0.8)
        lines.append(f"{name}: not a setting of the service" + (f" (did you mean {close[0]}?)" if close else ""))
    return lines


def load_settings(**values: Any) -> ServiceSettings:
    """The settings from the environment (``values``, by field name, take precedence); :class:`SettingsError` naming
    every invalid variable, and every ``TAGGER_*`` variable that is no setting."""
    lines = unknown_variables()
    try:
        settings = ServiceSettings(**values)
    except ValidationError as e:
        lines = [f"{env_name(str(err['loc'][0])) if err['loc'] else 'settings'}: {err['msg']} (got {err['input']!r})"
                 for err in e.errors(include_url=False)] + lines
    if lines:
        raise SettingsError("invalid service settings:\n  " + "\n  ".join(lines)) from None
    return settings


@functools.cache
def get_settings() -> ServiceSettings:
    """The settings of this process, read once."""
    return load_settings()


def _type(schema: dict[str, Any]) -> str:
    """A JSON-schema type as the docs table writes it."""
    options = schema.get("anyOf")
    if options:
        given = [o for o in options if o.get("type") != "null"]
        return " or ".join(_type(o) for o in given) + (", or unset" if len(given) < len(options) else "")
    if "enum" in schema:
        return ", ".join(f"`{v}`" for v in schema["enum"])
    kind = {"integer": "integer", "number": "number", "boolean": "`0` or `1`", "string": "string"}[schema["type"]]
    bounds = [f"≥ {schema['minimum']}"] if "minimum" in schema else []
    return " ".join([kind, *bounds])


def _default(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return f"`{int(value)}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value:,}`" if isinstance(value, int) else f"`{value}`"


def markdown_table() -> str:
    """The variables as a Markdown table: name, type or allowed values, default, meaning."""
    fields = ServiceSettings.model_json_schema()["properties"]
    rows = ["| variable | type | default | meaning |", "| --- | --- | --- | --- |"]
    for name, schema in fields.items():
        rows.append(f"| `{env_name(name)}` | {_type(schema)} | {_default(schema.get('default'))} | "
                    f"{schema['description']} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
