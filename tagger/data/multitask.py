"""Several corpora, one per task, behind one LightningDataModule: one vocabulary, batches of one task each.

:class:`MultiTaskDataModule` holds a :class:`~tagger.data.datamodule.TaggerDataModule` per task (its corpus, tag
scheme and batch sizes) and builds one vocabulary of words and characters from the training splits of all of
them, with each task's labels (``Vocab.tasks``). Each task's sentences are then encoded and batched by its own
data module; :class:`TaskBatches` interleaves their training batches by the schedule below, and validation and
test run one loader per task, in task order.

The schedule: an epoch holds N batches, N the number of training batches of all tasks together. Task i, with n_i
batches of its own, gets round(N * p_i) of them, p_i proportional to n_i ** (1 / temperature), in an order
shuffled by the seed and the epoch. ``temperature`` 1 is proportional: every batch of every corpus once per epoch.
Higher temperatures move towards uniform (a small corpus's batches repeat within an epoch, a large corpus's are
cut short: it starts where it stopped in the next epoch); below 1 the larger corpus gets more than its share.
"""
from __future__ import annotations

import math
from typing import Any, Iterator

import torch
from torch.utils.data import DataLoader

from tagger.data.datamodule import CPUBatches, TaggerDataModule
from tagger.data.vocab import MultiTaskVocab, Vocab


def task_batch_counts(sizes: dict[str, int], temperature: float) -> dict[str, int]:
    """Batches of each task per epoch (module docstring): sum(sizes) shared out in proportion to
    size ** (1 / temperature), by largest remainder, every task with batches getting at least one."""
    if not temperature > 0:
        raise ValueError(f"data.temperature must be > 0, got {temperature}")
    total = sum(sizes.values())
    weights = {name: n ** (1.0 / temperature) if n else 0.0 for name, n in sizes.items()}
    norm = sum(weights.values()) or 1.0
    exact = {name: total * w / norm for name, w in weights.items()}
    counts = {name: int(math.floor(x)) for name, x in exact.items()}
    for name in sorted(exact, key=lambda k: counts[k] - exact[k])[: total - sum(counts.values())]:
        counts[name] += 1
    for name, n in sizes.items():  # a task with data is never left out of an epoch
        if n and not counts[name]:
            counts[name] = 1
    return counts


class TaskBatches:
    """Training batches of several tasks (:func:`task_batch_counts` per epoch, in a seeded shuffled order), each
    a batch of one task's loader with ``batch["task"]`` set to the task's name. A task's loader that runs out
    within an epoch starts again (with a fresh shuffle); one not used up continues in the next epoch."""

    def __init__(self, loaders: dict[str, DataLoader], temperature: float = 1.0, seed: int = 0):
        self.loaders, self.seed, self.epoch = loaders, seed, 0
        self.counts = task_batch_counts({name: len(loader) for name, loader in loaders.items()}, temperature)
        self._iters: dict[str, Iterator] = {}
        self._passes = {name: 0 for name in loaders}  # passes over each loader started so far

    @property
    def sampler(self) -> "TaskBatches":
        """Lightning sets the epoch of a training loader's ``sampler`` at every epoch start."""
        return self

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return sum(self.counts.values())

    def order(self) -> list[str]:
        """The task of each batch of this epoch."""
        tasks = [name for name, n in self.counts.items() for _ in range(n)]
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        return [tasks[i] for i in torch.randperm(len(tasks), generator=g).tolist()]

    def _next(self, name: str) -> dict[str, Any]:
        for _ in range(2):
            if name in self._iters:
                batch = next(self._iters[name], None)
                if batch is not None:
                    return batch
            loader = self.loaders[name]
            set_epoch = getattr(loader.batch_sampler, "set_epoch", None)
            if callable(set_epoch):
                set_epoch(self._passes[name])  # each pass over a corpus in its own order
            self._passes[name] += 1
            self._iters[name] = iter(loader)
        raise RuntimeError(f"task {name!r}: its training loader gives no batch")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for name in self.order():
            yield {**self._next(name), "task": name}


class MultiTaskDataModule(CPUBatches):
    """``tasks``: name -> the :class:`TaggerDataModule` of that task's corpus (``tasks.NAME.data`` in the
    config; their ``vocab`` is set here, never built by them). The shared vocabulary normalises words by the
    settings given here (``lowercase``, ``normalize_digits``, ``case_fallback``, ``min_freq``), which replace the
    tasks' own: one word table serves every task. ``tokenizer``: the one convention raw text is cut by for every
    task (:mod:`tagger.tokenize`). ``temperature``: the batch schedule (module docstring). ``vectors``,
    ``base_vocab``: as for :class:`TaggerDataModule`."""

    def __init__(self, tasks: dict[str, TaggerDataModule] | None = None, task: str = "multitask",
                 temperature: float = 1.0, tokenizer: str | None = None, min_freq: int = 1, lowercase: bool = False,
                 normalize_digits: bool = True, case_fallback: bool = False, seed: int = 0, vectors: Any = None,
                 base_vocab: Vocab | None = None):
        super().__init__()
        if task != "multitask":
            raise ValueError(f"data.task of data=multitask must be 'multitask', got {task!r}")
        if not tasks:
            raise ValueError("tasks: data=multitask needs tasks.NAME.data and tasks.NAME.head for each task "
                             "(conf/experiment/multitask.yaml)")
        for name, module in tasks.items():
            if module.doc_window:
                raise ValueError(f"tasks.{name}.data.doc_window: document context is not available in a "
                                 "multi-task run; set it to null")
        task_batch_counts({name: 1 for name in tasks}, temperature)  # checks data.temperature
        self.tasks, self.temperature, self.tokenizer = dict(tasks), temperature, tokenizer
        self.min_freq, self.lowercase, self.normalize_digits = min_freq, lowercase, normalize_digits
        self.case_fallback, self.seed = case_fallback, seed
        self.vectors, self.base_vocab = vectors, base_vocab
        self.vocab: Vocab | None = None
        self.datasets: dict[str, Any] = {}  # task -> its DatasetDict

    def setup(self, stage: str | None = None) -> None:
        if self.vocab is not None:
            return
        loaded = {name: _Preloaded(module) for name, module in self.tasks.items()}
        # one word and character table from every task's training split; the labels of each task from its own
        first = next(iter(loaded.values()))
        vocab = Vocab.build((tokens for corpus in loaded.values() for tokens in corpus.train_tokens()),
                            first.labels, first.task, first.tag_scheme, self.min_freq, self.lowercase,
                            self.normalize_digits, self.case_fallback, vectors=self.vectors,
                            tokenizer=self.tokenizer, base=self.base_vocab)
        vocab = MultiTaskVocab.with_tasks(vocab, {name: {"task": c.task, "labels": c.labels, "tag_scheme": c.tag_scheme}
                                                  for name, c in loaded.items()})
        self.vocab = vocab
        for name, module in self.tasks.items():
            module.corpus, module.vocab = loaded[name], vocab.for_task(name)
            module.setup(stage)  # encodes with the shared vocabulary (TaggerDataModule never rebuilds a given one)
            self.datasets[name] = module.datasets

    @property
    def task_names(self) -> list[str]:
        return list(self.tasks)

    def train_dataloader(self) -> TaskBatches:
        return TaskBatches({name: m.train_dataloader() for name, m in self.tasks.items()}, self.temperature,
                           self.seed)

    def val_dataloader(self) -> list[DataLoader]:
        """One loader per task, in task order (Lightning's ``dataloader_idx`` is the task's position)."""
        return [m.val_dataloader() for m in self.tasks.values()]

    def test_dataloader(self) -> list[DataLoader]:
        return [m.test_dataloader() for m in self.tasks.values()]


class _Preloaded:
    """A task's corpus read once: the vocabulary is built from its training split before its data module encodes
    it, and the data module's ``corpus.load()`` gets the same DatasetDict back."""

    def __init__(self, module: TaggerDataModule):
        self.corpus, self.task = module.corpus, module.task
        self.tag_scheme = getattr(module.corpus, "tag_scheme", None)
        self.max_train_len = module.max_train_len
        self.dsd = module.corpus.load()
        self.labels = list(self.dsd["train"].features["tags"].feature.names)

    def load(self):
        return self.dsd

    def train_tokens(self) -> list[list[str]]:
        """The training sentences the data module trains on (``max_train_len`` applies)."""
        return [t for t in self.dsd["train"]["tokens"]
                if self.max_train_len is None or len(t) <= self.max_train_len]
