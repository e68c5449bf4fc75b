"""Where a trained model came from, as a run and a package record it: the commit of the code (:func:`git_commit`,
written into ``metrics.json`` by training) and the corpus files with their sha256 (:func:`data_hashes`, in a
package's metadata)."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from tagger.artifacts.package_format import sha256
from tagger.artifacts.runs import REPO


def data_hashes(metrics: dict[str, Any]) -> dict[str, dict[str, str | None]]:
    """{split: {"path", "sha256"}} of the corpus files the run trained and evaluated on (None: gone)."""
    corpus = ((metrics.get("config") or {}).get("data") or {}).get("corpus") or {}
    base = Path(str(corpus.get("data_dir", "."))).expanduser()
    out = {}
    for split, name in (corpus.get("files") or {}).items():
        p = Path(str(name)).expanduser()
        p = p if p.is_absolute() else base / p
        if not p.is_absolute() and not p.exists():  # data_dir is relative to where training ran: the repo
            p = REPO / p
        out[str(split)] = {"path": str(p.resolve()), "sha256": sha256(p) if p.is_file() else "missing"}
    return out


def git_commit(repo: Path = REPO) -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(dirty) if commit else None}
