"""Token representation shared by every encoder: word embedding (optionally from pretrained vectors) ++
character-CNN features."""
from __future__ import annotations

import logging
import torch
import torch.nn as nn
import torch.nn.functional as F

from tagger.data.vocab import PAD_ID, UNK_ID
from tagger.models.conv import TokenConv

log = logging.getLogger(__name__)


class CharCNN(nn.Module):
    """Characters -> one vector per word (convolution + max over characters).

    Unseen words still get a representation from their spelling (suffixes, capitals, digits).
    """

    def __init__(self, num_chars: int, char_dim: int = 30, filters: int = 50, kernel: int = 3):
        super().__init__()
        self.embed = nn.Embedding(num_chars, char_dim, padding_idx=PAD_ID)
        self.conv = TokenConv(char_dim, filters, kernel, padding=kernel // 2)
        self.output_dim = filters

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        """chars (B,T,L) long -> (B,T,filters)."""
        B, T, L = chars.shape
        h = self.conv(self.embed(chars.view(B * T, L)))  # (B*T, L, char_dim) -> (B*T, L, filters)
        h = h.masked_fill((chars.view(B * T, L, 1) == PAD_ID), float("-inf")).amax(dim=1)  # (B*T, filters)
        h = torch.nan_to_num(h, neginf=0.0)  # padding words have no characters at all
        return torch.tanh(h).view(B, T, -1)


CASING = ("padding", "numeric", "mainly_numeric", "all_lower", "all_upper", "initial_upper", "contains_digit", "other")
_UPPER, _LOWER, _DIGIT, _OTHER = 1, 2, 3, 4  # character classes (0: padding)


class Casing(nn.Module):
    """Characters -> one casing class per word (Reimers & Gurevych 2017, ``CASING``) -> an embedding.

    The class is read off the character ids with a per-character table built from the character
    vocabulary, so it needs no extra input: a lowercased word vocabulary keeps "Apple" and "apple"
    in one vector and this feature tells them apart. Unknown characters count as ``other``.
    """

    def __init__(self, chars: list[str], dim: int):
        super().__init__()
        table = [0, _OTHER] + [_UPPER if c.isupper() else _LOWER if c.islower() else _DIGIT if c.isdigit() else _OTHER
                               for c in chars[2:]]  # PAD, UNK, then the vocabulary
        self.register_buffer("char_class", torch.tensor(table), persistent=False)
        self.embed = nn.Embedding(len(CASING), dim, padding_idx=0)
        self.output_dim = dim

    def classes(self, chars: torch.Tensor) -> torch.Tensor:
        """chars (B,T,L) long -> casing class ids (B,T), indices into ``CASING``."""
        cls = self.char_class[chars]  # (B,T,L)
        n = (cls > 0).sum(-1)  # (B,T) characters per word
        digits, lower, upper = ((cls == k).sum(-1) for k in (_DIGIT, _LOWER, _UPPER))  # (B,T) each
        out = torch.full_like(n, CASING.index("other"))
        # later assignments win: from the weakest rule to the strongest (padding, n == 0, last)
        out = torch.where(digits > 0, CASING.index("contains_digit"), out)
        out = torch.where(cls[..., 0] == _UPPER, CASING.index("initial_upper"), out)
        out = torch.where(upper == n, CASING.index("all_upper"), out)
        out = torch.where(lower == n, CASING.index("all_lower"), out)
        out = torch.where(2 * digits > n, CASING.index("mainly_numeric"), out)
        out = torch.where(digits == n, CASING.index("numeric"), out)
        return torch.where(n == 0, CASING.index("padding"), out)

    def forward(self, chars: torch.Tensor) -> torch.Tensor:
        """chars (B,T,L) -> (B,T,dim)."""
        return self.embed(self.classes(chars))


FINETUNE = ("train_words", "all", "none", "concat")


class Embedder(nn.Module):
    """words (B,T), chars (B,T,L) -> (B,T,output_dim).

    ``word_dropout`` replaces each word id by UNK with that probability during training, so the
    UNK vector is trained and the model leans on characters for rare words. ``rare_word_dropout``
    (alpha) also replaces a word seen n times in training with probability alpha / (alpha + n)
    (Kiperwasser & Goldberg 2016): UNK is then trained in the contexts of rare words, which are
    the contexts unseen words appear in. It needs ``word_counts`` (``Vocab.counts``).
    ``case_dim > 0`` adds a casing-class embedding (``Casing``), which needs ``chars`` (``Vocab.chars``).

    Pretrained vectors (``vectors``: the source, recorded; the rows arrive as ``vector_rows``, one per
    vocabulary word, with ``vector_found`` marking the words that have one): they initialise the word table.
    Ids below ``trained_words`` are training words, the rest vector words (``Vocab.num_trained``).
    ``finetune_vectors="train_words"`` trains the rows of training words and keeps the vector words' rows as
    read, in a float16 buffer that the checkpoint carries (unseen words keep the meaning the vectors gave them,
    and the optimiser never touches the large table); ``"all"`` trains every row; ``"none"`` keeps every word
    that has a vector as read and trains only the rows of training words without one (and UNK), so seen and
    unseen words share one vector space; ``"concat"`` gives every word its trained row (training words
    initialised from their vectors; every other word UNK's row) beside its vector as read (zeros without one), a
    word vector of twice ``word_dim``: word dropout reaches only the trained half, so the encoder learns to tag a
    word that dropped to UNK by its vector, as it must tag a word only the vectors know.
    Rebuilding a saved model passes no rows: the state dict fills the table.
    """

    def __init__(
        self,
        num_words: int,
        num_chars: int,
        word_dim: int = 100,
        char_dim: int = 30,
        char_filters: int = 50,
        char_kernel: int = 3,
        dropout: float = 0.33,
        word_dropout: float = 0.05,
        rare_word_dropout: float = 0.0,
        word_counts: list[int] | None = None,
        case_dim: int = 0,
        chars: list[str] | None = None,
        vectors: str | None = None,
        vectors_max_words: int | None = None,
        finetune_vectors: str = "train_words",
        trained_words: int | None = None,
        vector_rows: torch.Tensor | None = None,
        vector_found: torch.Tensor | None = None,
    ):
        super().__init__()
        if finetune_vectors not in FINETUNE:
            raise ValueError(f"embedder.finetune_vectors must be one of {FINETUNE}, got {finetune_vectors!r}")
        if vectors and word_dim <= 0:
            raise ValueError("embedder.vectors needs a word table: embedder.word_dim must be > 0")
        if vector_rows is not None and vector_rows.shape != (num_words, word_dim):
            raise ValueError(f"embedder.word_dim ({word_dim}) must equal the dimension of embedder.vectors "
                             f"({vectors}: {vector_rows.shape[-1]})")
        tuned = num_words if not vectors or finetune_vectors == "all" or trained_words is None else trained_words
        # fixed_vectors holds the rows of ids >= fixed_start: past the training words, or every word (none, concat)
        every_word = bool(vectors) and trained_words is not None and finetune_vectors in ("none", "concat")
        self.concat = every_word and finetune_vectors == "concat"
        self.fixed_start = 0 if every_word else tuned
        self.word = nn.Embedding(tuned, word_dim, padding_idx=PAD_ID) if word_dim > 0 else None
        self.char = CharCNN(num_chars, char_dim, char_filters, char_kernel) if char_filters > 0 else None
        if self.word is None and self.char is None:
            raise ValueError("embedder: word_dim and char_filters cannot both be 0")
        # small uniform init (±sqrt(3/dim), unit variance per vector): N(0,1) rows saturate the encoders early
        for emb in (self.word, self.char.embed if self.char else None):
            if emb is not None:
                bound = (3.0 / emb.embedding_dim) ** 0.5
                nn.init.uniform_(emb.weight, -bound, bound)
                emb.weight.data[PAD_ID].zero_()
        # vector rows kept as read: (num_words - fixed_start, word_dim) float16
        self.register_buffer("fixed_vectors", torch.zeros(num_words - self.fixed_start, max(word_dim, 0),
                                                          dtype=torch.float16)
                             if self.fixed_start < num_words else None)
        # finetune_vectors=none: which words read their fixed row (num_words,) bool; the state dict carries it
        self.register_buffer("fixed_found", torch.zeros(num_words, dtype=torch.bool)
                             if every_word and not self.concat else None)
        if vector_rows is not None:
            self._init_from_vectors(vector_rows, vector_found, tuned)
        self.dropout = nn.Dropout(dropout)
        self.word_dropout = word_dropout
        self.rare_word_dropout = rare_word_dropout
        if rare_word_dropout < 0:
            raise ValueError(f"embedder.rare_word_dropout must be >= 0, got {rare_word_dropout}")
        if rare_word_dropout > 0:
            if word_counts is None:
                raise ValueError("embedder.rare_word_dropout needs the training word counts, which this vocabulary "
                                 "does not have (it was saved before they were kept): rebuild it by training again")
            counts = torch.tensor(word_counts, dtype=torch.float)  # (num_words,)
            # PAD and UNK have count 0 -> probability 1, harmless: PAD is never dropped, UNK stays UNK
            self.register_buffer("rare_drop_p", rare_word_dropout / (rare_word_dropout + counts), persistent=False)
        if case_dim < 0:
            raise ValueError(f"embedder.case_dim must be >= 0, got {case_dim}")
        if case_dim > 0 and chars is None:
            raise ValueError("embedder.case_dim needs the character vocabulary (chars)")
        self.case = Casing(chars, case_dim) if case_dim > 0 else None
        self.output_dim = (max(word_dim, 0) * (2 if self.concat else 1) + (self.char.output_dim if self.char else 0)
                           + (self.case.output_dim if self.case else 0))

    @torch.no_grad()
    def _init_from_vectors(self, rows: torch.Tensor, found: torch.Tensor | None, tuned: int) -> None:
        """rows (num_words, word_dim), found (num_words,) bool: copy the found vectors into the table."""
        found = torch.ones(rows.shape[0], dtype=torch.bool) if found is None else found.clone()
        found[:2] = False  # PAD stays zero, UNK keeps its random init
        table = self.word.weight  # (tuned, word_dim)
        table[found[:tuned]] = rows[:tuned][found[:tuned]].to(table.dtype)
        if self.fixed_vectors is not None:
            kept = rows[self.fixed_start:] * found[self.fixed_start:, None]  # words without a vector: zeros
            self.fixed_vectors.copy_(kept.to(torch.float16))
        if self.fixed_found is not None:
            self.fixed_found.copy_(found)
        log.info("pretrained vectors: %d of %d vocabulary words have one (%d trained rows)",
                 int(found.sum()), rows.shape[0], tuned)

    def lookup(self, words: torch.Tensor, dropped: torch.Tensor | None = None) -> torch.Tensor:
        """Word ids (B,T) -> word vectors (B,T,word_dim), or (B,T,2*word_dim) with finetune_vectors=concat: trained
        rows, and the fixed vector rows past them (with finetune_vectors=none, also below them for the words that
        have a vector). ``dropped``: the ids after word dropout (training), which concat reads for its trained half."""
        dropped = words if dropped is None else dropped
        if self.fixed_vectors is None:
            return self.word(dropped)
        n = self.word.num_embeddings
        if self.concat:
            tuned = self.word(torch.where(dropped < n, dropped, UNK_ID))  # (B,T,word_dim)
            return torch.cat([tuned, self.fixed_vectors[words].to(tuned.dtype)], dim=-1)  # (B,T,2*word_dim)
        words = dropped
        tuned = self.word(words.clamp(max=n - 1))  # (B,T,word_dim)
        fixed = self.fixed_vectors[(words - self.fixed_start).clamp(min=0)].to(tuned.dtype)  # (B,T,word_dim)
        use_fixed = words >= n if self.fixed_found is None else self.fixed_found[words]  # (B,T)
        return torch.where(use_fixed.unsqueeze(-1), fixed, tuned)

    def forward(self, words: torch.Tensor, chars: torch.Tensor, types: torch.Tensor | None = None) -> torch.Tensor:
        """words (B,T) and chars (B,T,L), each token's characters -> (B,T,output_dim). With ``types`` (B,T), chars is
        (U,L), the characters of the batch's distinct words, and types each token's row of it (the empty word at
        padding): their spelling features are computed once per distinct word and gathered per token, which gives what
        the (B,T,L) form gives for ``chars[types]``."""
        feats = []
        if self.word is not None:
            if self.training and (self.word_dropout > 0 or self.rare_word_dropout > 0):
                p = torch.full_like(words, self.word_dropout, dtype=torch.float)  # (B,T)
                if self.rare_word_dropout > 0:
                    p = torch.maximum(p, self.rare_drop_p[words])
                drop = (torch.rand_like(p) < p) & (words != PAD_ID)
                feats.append(self.lookup(words, words.masked_fill(drop, UNK_ID)))  # (B,T,word_dim or 2*word_dim)
            else:
                feats.append(self.lookup(words))
        if types is None:
            spelling = self.spelling(chars)  # (B,T,char_filters+case_dim) or None
        else:
            per_type = self.spelling(chars.unsqueeze(0))  # (1,U,char_filters+case_dim) or None
            spelling = None if per_type is None else per_type.squeeze(0)[types]  # (B,T,char_filters+case_dim)
        if spelling is not None:
            feats.append(spelling)  # (B,T,char_filters+case_dim)
        return self.dropout(torch.cat(feats, dim=-1))  # (B,T,output_dim)

    def spelling(self, chars: torch.Tensor) -> torch.Tensor | None:
        """What a word's characters give: chars (B,T,L) -> char CNN ++ casing (B,T,char_filters+case_dim), None
        without either. The serving graph calls it once per distinct word, so both paths compose it the same way."""
        feats = [m(chars) for m in (self.char, self.case) if m is not None]
        return torch.cat(feats, dim=-1) if feats else None
