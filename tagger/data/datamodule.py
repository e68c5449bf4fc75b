"""LightningDataModule: corpus -> vocab (train only, in ``setup``) -> length-bucketed padded batches."""
from __future__ import annotations

import math
from typing import Any, Iterator

import pytorch_lightning as pl
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Sampler

from tagger.data.encoding import EncodedRows, document_runs, encode_sentence, join, pack, split_docs
from tagger.data.vocab import IGNORE_INDEX, Vocab


class BucketBatchSampler(Sampler[list[int]]):
    """Batches of sentences of similar length, so little of each batch is padding.

    Training: shuffle (seeded by ``seed + epoch``), sort within pools of ``pool`` batches, shuffle the
    batches. Evaluation: sort everything by length. Under torch.distributed each rank takes every
    ``world_size``-th batch (Lightning's distributed sampler is switched off for this sampler).
    """

    def __init__(self, lengths: list[int], batch_size: int, shuffle: bool, seed: int = 0, pool: int = 50):
        if batch_size < 1:
            raise ValueError(f"data.batch_size must be >= 1, got {batch_size}")
        self.lengths, self.batch_size, self.shuffle, self.seed, self.pool = lengths, batch_size, shuffle, seed, pool
        self.epoch = 0

    @property
    def sampler(self) -> "BucketBatchSampler":
        """Lightning sets the epoch of a training loader's ``sampler`` and ``batch_sampler.sampler`` at every epoch
        start, never of the batch sampler itself: this is where it finds :meth:`set_epoch`."""
        return self

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _batches(self) -> list[list[int]]:
        n = len(self.lengths)
        if not self.shuffle:
            order = sorted(range(n), key=lambda i: self.lengths[i])
            return [order[i : i + self.batch_size] for i in range(0, n, self.batch_size)]
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        perm = torch.randperm(n, generator=g).tolist()
        size = self.batch_size * self.pool
        batches = []
        for start in range(0, n, size):
            chunk = sorted(perm[start : start + size], key=lambda i: self.lengths[i])
            batches += [chunk[i : i + self.batch_size] for i in range(0, len(chunk), self.batch_size)]
        return [batches[i] for i in torch.randperm(len(batches), generator=g).tolist()]

    def _shard(self, batches: list[list[int]]) -> list[list[int]]:
        if not (dist.is_available() and dist.is_initialized()):
            return batches
        world, rank = dist.get_world_size(), dist.get_rank()
        per_rank = math.ceil(len(batches) / world)
        # equal counts keep ranks in step; a repeated evaluation batch is counted once (TaggerModule gathers by index)
        batches = batches + batches[: per_rank * world - len(batches)]
        return batches[rank::world]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self._shard(self._batches()))

    def __len__(self) -> int:
        n = math.ceil(len(self.lengths) / self.batch_size) if not self.shuffle else len(self._batches())
        if dist.is_available() and dist.is_initialized():
            return math.ceil(n / dist.get_world_size())
        return n


class CPUBatches(pl.LightningDataModule):
    """A data module whose batches are built on the CPU: on the CPU they stay as they are, since Lightning's walk
    over every batch's collection to move it costs ~3% of a CPU fit (py-spy, experiment=pos)."""

    def transfer_batch_to_device(self, batch: Any, device: torch.device, dataloader_idx: int) -> Any:
        if device.type == "cpu":
            return batch
        return super().transfer_batch_to_device(batch, device, dataloader_idx)


class TaggerDataModule(CPUBatches):
    """Loads a corpus (``corpus.load() -> DatasetDict``), builds the vocab from train, serves batches.

    Pass ``vocab`` to evaluate a trained model: it is used as is and never rebuilt. ``vectors``
    (pretrained word vectors, a plain object: never a config value) add their words to the vocabulary built.
    ``base_vocab``: the vocabulary of a model training starts from (``init_from``): the vocabulary built extends
    it (:meth:`Vocab.build`).

    ``doc_window``: document context. Consecutive sentences of one document (the corpus's ``doc``
    column) are packed into rows of up to that many tokens, so the encoder sees the neighbouring
    sentences; loss and metrics still count every sentence once. The model saves the value and
    predicts documents in windows of that size (:class:`tagger.inference.predictor.Predictor`).
    """

    def __init__(
        self,
        corpus: Any,
        task: str,
        batch_size: int = 32,
        eval_batch_size: int = 128,
        min_freq: int = 1,
        lowercase: bool = False,
        normalize_digits: bool = True,
        case_fallback: bool = False,
        max_train_len: int | None = None,
        max_word_chars: int = 40,
        doc_window: int | None = None,
        seed: int = 0,
        num_workers: int = 0,
        vocab: Vocab | None = None,
        vectors: Any = None,
        tokenizer: str | None = None,
        base_vocab: Vocab | None = None,
    ):
        super().__init__()
        if task not in ("pos", "ner"):
            raise ValueError(f"data.task must be 'pos' or 'ner', got {task!r}")
        self.corpus, self.task = corpus, task
        self.batch_size, self.eval_batch_size = batch_size, eval_batch_size
        self.min_freq, self.lowercase, self.normalize_digits = min_freq, lowercase, normalize_digits
        self.case_fallback = case_fallback
        self.max_train_len, self.max_word_chars = max_train_len, max_word_chars
        if doc_window is not None and doc_window < 1:
            raise ValueError(f"data.doc_window must be a positive number of tokens or null, got {doc_window}")
        self.doc_window = doc_window
        self.seed, self.num_workers = seed, num_workers
        self.vocab, self.vectors, self.base_vocab = vocab, vectors, base_vocab
        self.tokenizer = tokenizer  # the corpus's tokenization convention, saved in the vocab (tagger.tokenize)
        self.datasets = None  # datasets.DatasetDict
        self.encoded: dict[str, EncodedRows] = {}

    def setup(self, stage: str | None = None) -> None:
        if self.encoded:
            return
        dsd = self.corpus.load()
        if self.max_train_len is not None:
            dsd["train"] = dsd["train"].filter(lambda ex: len(ex["tokens"]) <= self.max_train_len)
        self.datasets = dsd
        names = dsd["train"].features["tags"].feature.names
        if self.vocab is None:
            self.vocab = Vocab.build(
                dsd["train"]["tokens"], names, self.task, getattr(self.corpus, "tag_scheme", None),
                self.min_freq, self.lowercase, self.normalize_digits, self.case_fallback,
                vectors=self.vectors, tokenizer=self.tokenizer, base=self.base_vocab,
            )
        elif list(self.vocab.labels) != list(names):
            # the saved label order is the truth; remap this corpus's ClassLabel ids onto it
            missing = sorted(set(names) - set(self.vocab.labels))
            if missing:
                raise ValueError(f"corpus has tags the model was not trained on: {missing}")
        for split, ds in dsd.items():
            split_names = ds.features["tags"].feature.names
            to_model = [self.vocab.labels.index(n) if n in self.vocab.labels else IGNORE_INDEX for n in split_names]
            items = [encode_sentence(self.vocab, tokens, [to_model[t] for t in tags])
                     for tokens, tags in zip(ds["tokens"], ds["tags"])]
            if self.doc_window:
                runs = document_runs(split_docs(ds), len(items))
                rows = [[run[j] for j in row] for run in runs for row in pack([len(items[i]["words"]) for i in run],
                                                                              self.doc_window)]
            else:
                rows = [[i] for i in range(len(items))]
            self.encoded[split] = EncodedRows([join(items, row) for row in rows], self.max_word_chars)

    def tokens(self, split: str) -> list[list[str]]:
        return self.datasets[split]["tokens"]

    def _loader(self, split: str, train: bool) -> DataLoader:
        data = self.encoded[split]
        sampler = BucketBatchSampler(
            data.lengths,
            self.batch_size if train else self.eval_batch_size,
            shuffle=train,
            seed=self.seed,
        )
        return DataLoader(data, batch_sampler=sampler, num_workers=self.num_workers, collate_fn=data.collate)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("validation", False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", False)
