"""Files that are never half-written: what a later step reads back (checkpoints, metrics.json, vocab.json,
results.jsonl/results.md, a report's best.json, bench.json, the ONNX export) goes through :func:`atomic_open`.
A packaged model's files are written inside BentoML's model-creation block, which keeps nothing on an error."""
from __future__ import annotations

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
