"""Readers for the corpora the tagger trains on.

Two on-disk formats are supported:

* CoNLL-U (Universal Dependencies) for POS tagging, via :func:`read_conllu`;
* whitespace/tab separated column files such as CoNLL-2003 for NER, via
  :func:`read_conll_columns`, with entity tags converted between IOB1, IOB2
  and BIOES by :func:`tagger.schemes.convert_scheme`.

Readers return plain ``{"id", "doc", "tokens", "tags"}`` dicts (``doc``: the document the sentence
belongs to, for document context); :func:`build_dataset_dict`
turns splits of them into a :class:`datasets.DatasetDict` whose label
vocabulary comes from the training split only.  :class:`ConlluCorpus` and
:class:`ColumnCorpus` are the config objects Hydra instantiates.
"""

from __future__ import annotations

import os

# The machines this runs on cannot reach the Hugging Face Hub; without these,
# `datasets` may try (and time out) on network calls.  setdefault so a user can
# still opt back in.  Must run before `datasets` is imported.
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from collections.abc import Iterator, Mapping  # noqa: E402
from pathlib import Path  # noqa: E402

import datasets  # noqa: E402

from tagger.fileio import UndecodableError, check_encoding, text_lines  # noqa: E402
from tagger.schemes import NO_SCHEME, canonical_scheme, convert_scheme, split_tag  # noqa: E402

__all__ = [
    "CorpusFormatError",
    "read_conllu",
    "read_conll_columns",
    "build_dataset_dict",
    "ConlluCorpus",
    "ColumnCorpus",
]

DATA_DIR_ENV = "TAGGER_DATA_DIR"

Sentence = dict  # {"id": str, "doc": str, "tokens": list[str], "tags": list[str]}


class CorpusFormatError(ValueError):
    """A corpus file is malformed; the message starts with ``path:lineno:``."""

    def __init__(self, path: str | os.PathLike, lineno: int, message: str) -> None:
        self.path = str(path)
        self.lineno = lineno
        super().__init__(f"{path}:{lineno}: {message}")


# --------------------------------------------------------------------------- #
# File readers
# --------------------------------------------------------------------------- #


def _lines(path: Path, encoding: str) -> Iterator[tuple[int, str]]:
    """Yield (1-based line number, line without its line terminator)."""
    try:
        yield from text_lines(path, encoding)
    except UndecodableError as err:
        raise CorpusFormatError(path, err.lineno, f"{err.reason} (data.corpus.encoding, or --encoding of tagger "
                                                  "evaluate, names the file's encoding)") from None


_CONLLU_TAG_COLUMNS = {"upos": 3, "xpos": 4}


def read_conllu(path: str | os.PathLike, tag_column: str = "upos", encoding: str = "utf-8") -> list[Sentence]:
    """Read a CoNLL-U file into sentences of syntactic words and their UPOS or XPOS tags.

    Multi-word token ranges (``3-4``) and empty nodes (``8.1``) are skipped:
    they are not the words the treebank tags.  The sentence id is taken from
    ``# sent_id = ...`` when present, else ``"<file name>:<line of first word>"``.  The document is
    the last ``# newdoc id = ...`` (``"<file name>:<line>"`` for a bare ``# newdoc``; the file name
    before any). ``encoding``: the file's (a UTF-8 byte order mark is skipped).
    """
    if tag_column not in _CONLLU_TAG_COLUMNS:
        raise ValueError(f"tag_column must be one of {sorted(_CONLLU_TAG_COLUMNS)}, got {tag_column!r}")
    tag_index = _CONLLU_TAG_COLUMNS[tag_column]
    path = Path(path)

    sentences: list[Sentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    sent_id: str | None = None
    first_lineno: int | None = None
    doc = path.name

    def flush() -> None:
        nonlocal tokens, tags, sent_id, first_lineno
        # A block of only comments (or only multi-word lines) has no words to tag.
        if tokens:
            sentences.append(
                {"id": sent_id or f"{path.name}:{first_lineno}", "doc": doc, "tokens": tokens, "tags": tags}
            )
        tokens, tags, sent_id, first_lineno = [], [], None, None

    for lineno, line in _lines(path, encoding):
        if not line.strip():
            flush()
            continue
        if line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            if sep and key.strip() == "sent_id":
                sent_id = value.strip()
            elif key.strip() == "newdoc" or key.strip().startswith("newdoc "):
                # "# newdoc id = X" (or a bare "# newdoc"): the sentences from here on are document X
                doc = value.strip() if sep else f"{path.name}:{lineno}"
            continue
        columns = line.split("\t")
        if len(columns) != 10:
            raise CorpusFormatError(path, lineno, f"expected 10 tab-separated columns, found {len(columns)}")
        word_id = columns[0]
        if "-" in word_id or "." in word_id:
            _check_special_id(path, lineno, word_id)
            continue
        if not word_id.isdigit():
            raise CorpusFormatError(path, lineno, f"ID {word_id!r} is not an integer, range or decimal")
        form, tag = columns[1], columns[tag_index]
        if not form:
            raise CorpusFormatError(path, lineno, "empty FORM column")
        if not tag:
            raise CorpusFormatError(path, lineno, f"empty {tag_column.upper()} column")
        if first_lineno is None:
            first_lineno = lineno
        tokens.append(form)
        tags.append(tag)
    flush()
    return sentences


def _check_special_id(path: Path, lineno: int, word_id: str) -> None:
    """Accept ``N-M`` (multi-word token) and ``N.M`` (empty node) IDs, reject anything else."""
    sep = "-" if "-" in word_id else "."
    left, _, right = word_id.partition(sep)
    if not (left.isdigit() and right.isdigit()):
        raise CorpusFormatError(path, lineno, f"ID {word_id!r} is not an integer, range or decimal")


def _column(fields: list[str], index: int, what: str, path: Path, lineno: int) -> str:
    if not -len(fields) <= index < len(fields):
        raise CorpusFormatError(
            path, lineno, f"{what} column {index} requested but the line has only {len(fields)} column(s)"
        )
    return fields[index]


def read_conll_columns(
    path: str | os.PathLike,
    word_column: int = 0,
    tag_column: int = -1,
    separator: str | None = None,
    scheme: str | None = "IOB1",
    target_scheme: str = "IOB2",
    docstart: str = "-DOCSTART-",
    empty_words: str = "error",
    encoding: str = "utf-8",
) -> list[Sentence]:
    """Read a column file (one token per line, blank line between sentences), e.g. CoNLL-2003.

    `separator` None splits on any run of whitespace; otherwise on exactly that
    string. Every token line must have as many fields as the file's first one: a word that is empty or
    holds the separator would otherwise shift or lose a column without a sound, so a line with another
    count is an error naming both counts. `empty_words`: ``"error"`` (an empty word is an error) or
    ``"keep"`` (kept as the empty string: the model sees it as an unknown word without characters; corpora
    such as the Broad Twitter Corpus hold a few, read tab-separated).  Lines whose word is `docstart` are document markers, not tokens: the sentences after one
    belong to document ``"<file name>:<line of the marker>"`` (the file name before any marker).
    Entity tags are converted per sentence from `scheme` to `target_scheme`;
    pass ``scheme=None`` (or ``"none"``) for non-entity tags such as POS. ``encoding``: the file's (a UTF-8 byte
    order mark is skipped).
    """
    path = Path(path)
    source = None if scheme in NO_SCHEME else canonical_scheme(scheme)  # type: ignore[arg-type]
    target = canonical_scheme(target_scheme) if source else None
    if empty_words not in ("error", "keep"):
        raise ValueError(f"data.corpus.empty_words must be 'error' or 'keep', got {empty_words!r}")
    width: tuple[int, int] | None = None  # (fields, line) of the first token line

    sentences: list[Sentence] = []
    tokens: list[str] = []
    tags: list[str] = []
    first_lineno: int | None = None
    doc = path.name

    def flush() -> None:
        nonlocal tokens, tags, first_lineno
        if tokens:
            if source:
                tags = convert_scheme(tags, source, target)  # type: ignore[arg-type]
            sentences.append({"id": f"{path.name}:{first_lineno}", "doc": doc, "tokens": tokens, "tags": tags})
        tokens, tags, first_lineno = [], [], None

    for lineno, line in _lines(path, encoding):
        if not line.strip():
            flush()
            continue
        fields = line.split() if separator is None else line.split(separator)
        word = _column(fields, word_column, "word", path, lineno)
        if word == docstart:
            # A document marker never belongs to a sentence, even if the file
            # omits the blank line around it.
            flush()
            doc = f"{path.name}:{lineno}"
            continue
        tag = _column(fields, tag_column, "tag", path, lineno)
        if width is None:
            width = (len(fields), lineno)
        elif len(fields) != width[0]:
            how = "any whitespace" if separator is None else repr(separator)
            raise CorpusFormatError(path, lineno, f"{len(fields)} field(s) split on {how}, where line {width[1]} has "
                                                  f"{width[0]}: a word that is empty or holds the separator?")
        if not word and empty_words == "error":
            raise CorpusFormatError(path, lineno, "empty word column (data.corpus.empty_words=keep keeps such words)")
        if not tag:
            raise CorpusFormatError(path, lineno, "empty tag column")
        if source:
            # Validate here, where the line number is known, so convert_scheme
            # cannot fail later with only a sentence-level message.
            try:
                split_tag(tag, source)
            except ValueError as err:
                raise CorpusFormatError(path, lineno, str(err)) from None
        if first_lineno is None:
            first_lineno = lineno
        tokens.append(word)
        tags.append(tag)
    flush()
    return sentences


# --------------------------------------------------------------------------- #
# Datasets
# --------------------------------------------------------------------------- #


def _label_names(tags: set[str]) -> list[str]:
    # "O" first so that label id 0 is "no entity" for NER corpora.
    rest = sorted(tags - {"O"})
    return ["O", *rest] if "O" in tags else rest


def build_dataset_dict(splits: Mapping[str, list[Sentence]], label_source: str = "train") -> datasets.DatasetDict:
    """Build a DatasetDict with ``tags`` as a ClassLabel sequence.

    The label vocabulary is taken from `label_source` only: a tag seen only in
    evaluation data cannot be learned, and silently dropping or adding it
    would skew the scores, so it is an error instead.
    """
    if label_source not in splits:
        raise ValueError(f"label source split {label_source!r} not among splits {sorted(splits)}")
    names = _label_names({tag for sent in splits[label_source] for tag in sent["tags"]})
    index = {name: i for i, name in enumerate(names)}
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "doc": datasets.Value("string"),
            "tokens": datasets.Sequence(datasets.Value("string")),
            "tags": datasets.Sequence(datasets.ClassLabel(names=names)),
        }
    )

    result = {}
    for split, sentences in splits.items():
        unknown: dict[str, str] = {}  # tag -> id of the first sentence using it
        encoded = []
        for sent in sentences:
            ids = []
            for tag in sent["tags"]:
                if tag in index:
                    ids.append(index[tag])
                else:
                    unknown.setdefault(tag, sent["id"])
            encoded.append(ids)
        if unknown:
            details = ", ".join(f"{tag!r} (first in sentence {sid})" for tag, sid in sorted(unknown.items()))
            raise ValueError(
                f"split {split!r} has tag(s) not seen in the {label_source!r} split: {details}"
            )
        result[split] = datasets.Dataset.from_dict(
            {
                "id": [sent["id"] for sent in sentences],
                # a sentence given without a document is a document of its own
                "doc": [sent.get("doc", sent["id"]) for sent in sentences],
                "tokens": [sent["tokens"] for sent in sentences],
                "tags": encoded,
            },
            features=features,
        )
    return datasets.DatasetDict(result)


class _FileCorpus:
    """Shared split-file resolution for the corpus config objects."""

    tag_scheme: str | None = None

    def __init__(self, data_dir: str, files: Mapping[str, str], encoding: str = "utf-8") -> None:
        if not files:
            raise ValueError("`files` must map at least one split name (e.g. 'train') to a file")
        self.encoding = check_encoding(encoding, "data.corpus.encoding")
        self.data_dir = str(data_dir)
        # Hydra passes a DictConfig; a plain dict keeps the object picklable and simple.
        self.files = {str(split): str(name) for split, name in files.items()}

    def path(self, split: str) -> Path:
        """Full path of a split's file (absolute entries in `files` are used as is)."""
        return Path(self.data_dir).expanduser() / Path(self.files[split]).expanduser()

    def _existing_path(self, split: str) -> Path:
        path = self.path(split)
        if not path.is_file():
            raise FileNotFoundError(
                f"{split} file not found: {path.absolute()} "
                f"(data_dir={self.data_dir!r}; set the data directory with `data_dir=...` "
                f"or the environment variable {DATA_DIR_ENV})"
            )
        return path

    def _read(self, path: Path) -> list[Sentence]:
        raise NotImplementedError

    def load(self) -> datasets.DatasetDict:
        # Check every file before parsing any, so a bad path fails fast.
        paths = {split: self._existing_path(split) for split in self.files}
        splits = {}
        for split, path in paths.items():
            sentences = self._read(path)
            if not sentences:
                raise ValueError(f"{path}: no sentences found for split {split!r}")
            splits[split] = sentences
        return build_dataset_dict(splits)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


class ConlluCorpus(_FileCorpus):
    """A CoNLL-U treebank for POS tagging (``tag_column`` is ``"upos"`` or ``"xpos"``)."""

    tag_scheme: str | None = None  # POS tags have no entity scheme

    def __init__(self, data_dir: str, files: Mapping[str, str], tag_column: str = "upos",
                 encoding: str = "utf-8") -> None:
        super().__init__(data_dir, files, encoding)
        if tag_column not in _CONLLU_TAG_COLUMNS:
            raise ValueError(f"tag_column must be one of {sorted(_CONLLU_TAG_COLUMNS)}, got {tag_column!r}")
        self.tag_column = tag_column

    def _read(self, path: Path) -> list[Sentence]:
        return read_conllu(path, tag_column=self.tag_column, encoding=self.encoding)


class ColumnCorpus(_FileCorpus):
    """A column-format corpus such as CoNLL-2003; see :func:`read_conll_columns`."""

    def __init__(
        self,
        data_dir: str,
        files: Mapping[str, str],
        word_column: int = 0,
        tag_column: int = -1,
        separator: str | None = None,
        scheme: str | None = "IOB1",
        target_scheme: str = "IOB2",
        docstart: str = "-DOCSTART-",
        empty_words: str = "error",
        encoding: str = "utf-8",
    ) -> None:
        super().__init__(data_dir, files, encoding)
        if empty_words not in ("error", "keep"):
            raise ValueError(f"data.corpus.empty_words must be 'error' or 'keep', got {empty_words!r}")
        self.empty_words = empty_words
        # Validate scheme names now, so a config typo fails at instantiation.
        self.scheme = None if scheme in NO_SCHEME else canonical_scheme(scheme)  # type: ignore[arg-type]
        self.target_scheme = canonical_scheme(target_scheme)
        self.word_column = int(word_column)
        self.tag_column = int(tag_column)
        self.separator = separator
        self.docstart = docstart
        self.tag_scheme = self.target_scheme if self.scheme else None

    def _read(self, path: Path) -> list[Sentence]:
        return read_conll_columns(
            path,
            word_column=self.word_column,
            tag_column=self.tag_column,
            separator=self.separator,
            scheme=self.scheme,
            target_scheme=self.target_scheme,
            docstart=self.docstart,
            empty_words=self.empty_words,
            encoding=self.encoding,
        )
