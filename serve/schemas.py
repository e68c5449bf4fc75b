"""Request and response bodies of the tagging service, and the limits requests are held to.

Requests are pydantic models with ``extra="forbid"``: an unknown field, a wrong type, an empty
list or string, or a limit exceeded is a 400 whose ``detail[].loc`` names the field and whose
message names the limit. Limits are settings (:mod:`serve.settings`), read once, at import.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import bentoml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from serve.settings import ServiceSettings, get_settings


@dataclass(frozen=True)
class Limits:
    sentences: int  # sentences or texts per request
    tokens: int  # tokens per sentence / text (after tokenization)
    chars: int  # characters per text
    body_bytes: int  # request body size
    attention_tokens: int  # tokens of the one sentence /attention shows

    @classmethod
    def from_settings(cls, settings: ServiceSettings) -> "Limits":
        return cls(sentences=settings.max_sentences, tokens=settings.max_tokens, chars=settings.max_chars,
                   body_bytes=settings.max_body_bytes, attention_tokens=settings.max_attention_tokens)


LIMITS = Limits.from_settings(get_settings())

# What str.isspace() calls whitespace, as a regex class that Python's re and JSON Schema (ECMA-262) engines
# read alike (their own \s differ: ECMA's lacks \x1c-\x1f and \x85). The patterns tell clients the rules
# that the validators below enforce with str.isspace.
SPACES = "".join(f"\\u{ord(c):04x}" for c in map(chr, range(0x3001)) if c.isspace())
Token = Annotated[str, StringConstraints(min_length=1, max_length=1000),
                  Field(json_schema_extra={"pattern": f"^[^{SPACES}]+$"})]
Text = Annotated[str, StringConstraints(min_length=1, max_length=LIMITS.chars),
                 Field(json_schema_extra={"pattern": f"[^{SPACES}]"})]
Sentence = Annotated[list[Token], Field(min_length=1, json_schema_extra={"maxItems": LIMITS.tokens})]


class _OneInput(bentoml.IODescriptor):
    """Exactly one of ``exclusive_inputs`` is given, and not as null."""

    exclusive_inputs: ClassVar[tuple[str, str]]
    _kinds: ClassVar[str]  # the two, described for the error message

    @model_validator(mode="before")
    @classmethod
    def _no_nulls(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in cls.exclusive_inputs:
                if name in data and data[name] is None:
                    raise ValueError(f"'{name}' is null; leave it out, or give "
                                     f"{'a list' if name != 'text' else 'a string'}")
        return data

    @model_validator(mode="after")
    def _one_input(self) -> "_OneInput":
        a, b = self.exclusive_inputs
        if (getattr(self, a) is None) == (getattr(self, b) is None):
            raise ValueError(f"give exactly one of {self._kinds}")
        return self


def _check_count(items: list | None, what: str) -> list | None:
    if items is not None and len(items) > LIMITS.sentences:
        raise ValueError(f"{len(items)} {what} in one request; the limit is {LIMITS.sentences} per request "
                         "(TAGGER_MAX_SENTENCES)")
    return items


def _check_tokens(tokens: list[str], name: str, limit: int, env: str) -> None:
    if len(tokens) > limit:
        raise ValueError(f"{name} has {len(tokens)} tokens; the limit is {limit} tokens ({env})")
    for j, token in enumerate(tokens):
        if any(c.isspace() for c in token):
            raise ValueError(f"{name}[{j}] = {token!r}: a token must not contain whitespace")


class TagRequest(_OneInput):
    """Exactly one of ``sentences`` (pre-tokenised) or ``texts`` (raw, tokenised by the service).

    The items of one request are read as one document, in order: a model trained with document
    context (``doc_window`` on ``/model``) tags each with its neighbours as context."""

    model_config = ConfigDict(extra="forbid", strict=True)
    exclusive_inputs = ("sentences", "texts")
    _kinds = "'sentences' (lists of tokens) or 'texts' (strings)"

    sentences: list[Sentence] | None = Field(
        default=None, min_length=1, json_schema_extra={"maxItems": LIMITS.sentences},
        description=f"pre-tokenised sentences, one list of tokens each (at most {LIMITS.sentences} sentences "
                    f"of {LIMITS.tokens} tokens)",
        examples=[[["The", "cat", "sat", "."]]])
    texts: list[Text] | None = Field(
        default=None, min_length=1, json_schema_extra={"maxItems": LIMITS.sentences},
        description=f"raw texts; each is split into sentences and tokens as the model's training corpus was, "
                    f"and answered as one sequence (at most {LIMITS.sentences} texts of {LIMITS.chars} "
                    f"characters and, once tokenised, {LIMITS.tokens} tokens)",
        examples=[["John lives in New York."]])

    @field_validator("sentences")
    @classmethod
    def _sentences_within_limits(cls, sentences: list[list[str]] | None) -> list[list[str]] | None:
        for i, tokens in enumerate(_check_count(sentences, "sentences") or []):
            _check_tokens(tokens, f"sentences[{i}]", LIMITS.tokens, "TAGGER_MAX_TOKENS")
        return sentences

    @field_validator("texts")
    @classmethod
    def _texts_within_limits(cls, texts: list[str] | None) -> list[str] | None:
        return _check_count(texts, "texts")  # tokens per text are counted after tokenization



class AttentionRequest(_OneInput):
    """Exactly one of ``tokens`` (one pre-tokenised sentence) or ``text``."""

    model_config = ConfigDict(extra="forbid", strict=True)
    exclusive_inputs = ("tokens", "text")
    _kinds = "'tokens' (a list of strings) or 'text' (a string)"

    tokens: list[Token] | None = Field(default=None, min_length=1,
                                       json_schema_extra={"maxItems": LIMITS.attention_tokens},
                                       description=f"one pre-tokenised sentence (at most {LIMITS.attention_tokens} "
                                                   "tokens)", examples=[["The", "cat", "sat", "."]])
    text: Text | None = Field(default=None, description=f"one raw text, tokenised by the service (at most "
                                                        f"{LIMITS.attention_tokens} tokens once tokenised)",
                              examples=["The cat sat."])

    @field_validator("tokens")
    @classmethod
    def _tokens_within_limits(cls, tokens: list[str] | None) -> list[str] | None:
        if tokens is not None:
            _check_tokens(tokens, "tokens", LIMITS.attention_tokens, "TAGGER_MAX_ATTENTION_TOKENS")
        return tokens


# -- responses -----------------------------------------------------------------------------------
class ErrorDetail(BaseModel):
    loc: list[str | int] = Field(description="where in the request: field names and list indices")
    msg: str
    type: str | None = Field(default=None, description="pydantic's error type, for validation errors")
    url: str | None = None


class ErrorResponse(BaseModel):
    """Every 4xx answer of the API endpoints."""

    error: str = Field(description="what is wrong, naming the field or the limit")
    detail: list[ErrorDetail]


class TaskCard(BaseModel):
    """One task of a multi-task model, on ``GET /model``."""

    task: str = Field(description="pos or ner")
    tag_scheme: str | None
    labels: list[str]
    metrics: dict[str, Any] = Field(description="main metric name and dev/test scores of the task")


class ModelCard(BaseModel):
    """``GET /model``."""

    name: str = Field(description="the model's tag in the BentoML store")
    task: str = Field(description="pos, ner, or multitask for a model of several tasks (listed in tasks)")
    tag_scheme: str | None = Field(description="the entity scheme (a multi-task model: its first task's)")
    labels: list[str] = Field(description="the model's labels (a multi-task model: its first task's)")
    tasks: dict[str, TaskCard] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="a multi-task model's tasks, in its order, by name (absent for a model of one task)")
    metrics: dict[str, Any] = Field(description="main metric name and dev/test scores")
    supports_attention: bool
    window: int = Field(description="tokens per model window; longer inputs are windowed")
    doc_window: int | None
    backend: str = Field(description="what computes the model (tagger.inference.backends)")
    limits: dict[str, int]
    config: dict[str, Any] = Field(description="the embedder/model/head config")
    provenance: dict[str, Any]


class TaskTag(BaseModel):
    tag: str = Field(description="the task's predicted tag")
    score: float = Field(description="the model's probability of that tag")


class TokenOut(BaseModel):
    text: str = Field(description="the token")
    tag: str = Field(description="predicted tag (for NER, in the model's tag scheme; a multi-task model: its first "
                                 "task's)")
    score: float = Field(description="the model's probability of that tag (the CRF's marginal)")
    start: int | None = Field(default=None, description="character offset in the text (texts input only)")
    end: int | None = Field(default=None, description="end offset, exclusive: text[start:end] == token")
    tasks: dict[str, TaskTag] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="a multi-task model: every task's tag and score by task name, from one encoder pass (absent "
                    "for a model of one task)")


class TaggedSequence(BaseModel):
    tokens: list[TokenOut]


class TagResponse(BaseModel):
    model: str = Field(description="the model's tag in the BentoML store")
    task: str = Field(description="pos, ner, or multitask (each token then carries tasks)")
    results: list[TaggedSequence] = Field(description="one per input sentence or text, in order")


class Entity(BaseModel):
    text: str = Field(description="the entity's words (its slice of the text, for texts input)")
    label: str = Field(description="entity type, e.g. PER")
    start: int | None = Field(description="character offset in the text (texts input only)")
    end: int | None = Field(description="end character offset, exclusive")
    token_start: int = Field(description="index of its first token")
    token_end: int = Field(description="index after its last token")
    score: float = Field(description="mean probability of its tokens' tags")


class EntitySequence(BaseModel):
    entities: list[Entity]


class EntitiesResponse(BaseModel):
    model: str
    results: list[EntitySequence]


class AttentionToken(BaseModel):
    text: str
    start: int | None = None
    end: int | None = None


class AttentionResponse(BaseModel):
    model: str
    tokens: list[AttentionToken]
    layers: int
    heads: int
    weights: list[list[list[list[float]]]] = Field(
        description="weights[layer][head][query][key]: how much token `query` attends to token `key`; "
                    "each row sums to 1")
