"""Files that are never half-written, and text files read line by line.

What a later step reads back (checkpoints, metrics.json, vocab.json, results.jsonl/results.md, a report's best.json,
bench.json, the ONNX export) goes through :func:`atomic_open`. A packaged model's files are written inside BentoML's
model-creation block, which keeps nothing on an error. Text the user gives (corpus files, ``tagger predict`` input)
is read through :func:`text_lines`, which names the line whose bytes the file's encoding cannot decode.
"""
from __future__ import annotations

import codecs
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, BinaryIO, Iterator


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """A binary file that becomes ``path`` only if the block completes: written to a temporary file in the
    same folder, flushed to disk, then renamed (atomic on POSIX). A crash or error mid-write leaves the old
    file, or none, never a half-written one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual mode
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """``obj`` as indented JSON through :func:`atomic_open` (a run's metrics.json: never half-written)."""
    write_text(path, json.dumps(obj, indent=2, default=str))


def write_text(path: str | os.PathLike, text: str) -> None:
    """``text`` as UTF-8 through :func:`atomic_open`."""
    with atomic_open(path) as f:
        f.write(text.encode("utf-8"))


class UndecodableError(ValueError):
    """A text file holds bytes its encoding cannot decode; the message starts with ``path:line:``."""

    def __init__(self, path: str | os.PathLike, lineno: int, encoding: str, data: bytes) -> None:
        self.path, self.lineno, self.encoding, self.data = str(path), lineno, encoding, data
        self.reason = f"bytes {data!r} are not valid {encoding}"
        super().__init__(f"{path}:{lineno}: {self.reason}")


def check_encoding(encoding: str, key: str) -> str:
    """``encoding`` if Python knows a codec of that name; else a ValueError naming ``key``, the setting that gave it."""
    try:
        codecs.lookup(encoding)
    except (LookupError, TypeError):
        raise ValueError(f"{key}: unknown encoding {encoding!r} (a Python codec name: utf-8, latin-1, cp1252, ...)") \
            from None
    return encoding


def text_lines(path: str | os.PathLike, encoding: str = "utf-8") -> Iterator[tuple[int, str]]:
    """(1-based line number, line without its line terminator) of a text file. Bytes that ``encoding`` cannot decode
    raise :class:`UndecodableError` naming the line and the bytes."""
    path = Path(path)
    # utf-8-sig: a BOM written by some editors would otherwise glue itself to the first token or comment.
    opened_as = "utf-8-sig" if codecs.lookup(encoding).name == "utf-8" else encoding
    lineno = 0
    try:
        with path.open(encoding=opened_as) as handle:
            for lineno, line in enumerate(handle, start=1):
                yield lineno, line.rstrip("\r\n")
    except UnicodeDecodeError as err:
        # The text layer decodes a block of lines at a time, so the error does not say which line; the file is
        # read again as bytes, line by line, only to name it.
        raise _first_undecodable(path, encoding, opened_as) or UndecodableError(
            path, lineno + 1, encoding, err.object[err.start:err.end]) from None


def _first_undecodable(path: Path, encoding: str, opened_as: str) -> UndecodableError | None:
    decoder = codecs.getincrementaldecoder(opened_as)()
    with path.open("rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                decoder.decode(raw)
            except UnicodeDecodeError as err:
                return UndecodableError(path, lineno, encoding, err.object[err.start:err.end])
    return None
