"""Shared fixtures: tiny corpora written by the tests, composed real configs, tiny trained runs."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

CONF_DIR = str(Path(__file__).resolve().parents[1] / "conf")  # the Hydra configs of the checkout
REAL_DATA = Path(os.environ.get("TAGGER_DATA_DIR", Path(__file__).resolve().parents[1] / "data"))

# a toy grammar: DET ADJ? NOUN VERB DET NOUN, with some names for NER
_DET, _ADJ = ["the", "a", "this"], ["big", "red", "old", "happy"]
_NOUN, _VERB = ["cat", "dog", "house", "tree", "car"], ["sees", "likes", "finds", "eats"]
_PER, _LOC = [["John"], ["Mary", "Smith"], ["Anna"]], [["Paris"], ["New", "York"], ["Rome"]]


def _pos_sentence(rng: random.Random) -> list[tuple[str, str]]:
    s = [(rng.choice(_DET), "DET")]
    if rng.random() < 0.5:
        s.append((rng.choice(_ADJ), "ADJ"))
    s += [(rng.choice(_NOUN), "NOUN"), (rng.choice(_VERB), "VERB"), (rng.choice(_DET), "DET"), (rng.choice(_NOUN), "NOUN")]
    if rng.random() < 0.5:
        s.append((".", "PUNCT"))
    return s


def _ner_sentence(rng: random.Random) -> list[tuple[str, str]]:
    """IOB1 tags, as in CoNLL-2003."""
    per, loc = rng.choice(_PER), rng.choice(_LOC)
    s = [(w, "I-PER") for w in per] + [(rng.choice(_VERB), "O")]
    s += [("in", "O")] + [(w, "I-LOC") for w in loc] + [(".", "O")]
    return s


def write_conllu(path: Path, n: int, seed: int) -> Path:
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        sent = _pos_sentence(rng)
        if i % 5 == 0:  # documents of 5 sentences
            lines.append(f"# newdoc id = d{seed}-{i // 5}")
        lines += [f"# sent_id = s{seed}-{i}", "# text = " + " ".join(w for w, _ in sent)]
        lines += [f"{j}\t{w}\t{w.lower()}\t{t}\t{t[:2]}\t_\t0\tdep\t_\t_" for j, (w, t) in enumerate(sent, 1)]
        lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_conll(path: Path, n: int, seed: int) -> Path:
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        if i % 5 == 0:  # documents of 5 sentences
            lines += ["-DOCSTART- -X- O O", ""]
        lines += [f"{w} NN I-NP {t}" for w, t in _ner_sentence(rng)] + [""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_data(tmp_path_factory) -> Path:
    """data dir laid out like ../shared/data, with tiny generated corpora."""
    root = tmp_path_factory.mktemp("data")
    (root / "ud_english_ewt").mkdir()
    (root / "conll2003").mkdir()
    for split, n, seed in (("train", 60, 1), ("dev", 12, 2), ("test", 12, 3)):
        write_conllu(root / "ud_english_ewt" / f"en_ewt-ud-{split}.conllu", n, seed)
    for name, n, seed in (("eng.train", 60, 1), ("eng.testa", 12, 2), ("eng.testb", 12, 3)):
        write_conll(root / "conll2003" / name, n, seed)
    return root


def compose(overrides: list[str], output_dir: Path):
    """The real conf/train.yaml composed as Hydra would, for tests."""
    import tagger.training.run  # noqa: F401  (registers the main_metric resolver)
    from tagger.training.configs import compose as compose_config

    return compose_config(overrides, output_dir, CONF_DIR)


FAST = ["trainer.max_epochs=2", "~callbacks.progress_bar", "+trainer.enable_progress_bar=false", "data.batch_size=8", "threads=1"]


def best_checkpoint_state(ckpt: dict) -> dict:
    """The state of the ModelCheckpoint that keeps best.ckpt, in a checkpoint (the other one, last_checkpoint,
    monitors nothing)."""
    (state,) = [v for k, v in ckpt["callbacks"].items() if k.startswith("ModelCheckpoint") and "'monitor': None" not in k]
    return state


def train_tiny(tmp: Path, data_dir: Path, overrides: list[str]) -> Path:
    from tagger.training.run import train

    cfg = compose([f"data_dir={data_dir}", *FAST, *overrides], tmp)
    train(cfg)
    return tmp


@pytest.fixture(scope="session")
def tiny_pos_run(tmp_path_factory, tiny_data) -> Path:
    """A run dir of a tiny self-attention POS tagger (metrics.json, checkpoints/best.ckpt, vocab.json)."""
    return train_tiny(tmp_path_factory.mktemp("pos_run"), tiny_data,
                      ["model=self_attention", "model.d_model=32", "model.heads=2", "model.ffn_dim=32", "trainer.max_epochs=12"])


@pytest.fixture(scope="session")
def tiny_ner_run(tmp_path_factory, tiny_data) -> Path:
    """A run dir of a tiny self-attention + CRF NER tagger."""
    return train_tiny(tmp_path_factory.mktemp("ner_run"), tiny_data,
                      ["data=conll2003", "model=self_attention", "head=crf", "model.d_model=32", "model.heads=2",
                       "model.ffn_dim=32", "trainer.max_epochs=12"])


@pytest.fixture(scope="session")
def tiny_ner_from_pos_run(tmp_path_factory, tiny_data, tiny_pos_run) -> Path:
    """A tiny self-attention + CRF NER tagger started from the tiny POS tagger (init_from: embedder and encoder
    transferred, head fresh)."""
    return train_tiny(tmp_path_factory.mktemp("ner_from_pos_run"), tiny_data,
                      ["data=conll2003", "model=self_attention", "head=crf", "model.d_model=32", "model.heads=2",
                       "model.ffn_dim=32", "trainer.max_epochs=12", f"init_from={tiny_pos_run}"])


# a tiny model of two tasks: EWT-like UPOS (softmax) and CoNLL-like entities (CRF) on one encoder
MULTITASK = ["experiment=multitask", "embedder=default", "model.d_model=32", "model.heads=2", "model.ffn_dim=32",
             "tasks.pos.data.batch_size=8", "tasks.ner.data.batch_size=8"]


def train_tiny_tasks(tmp: Path, data_dir: Path, overrides: list[str]) -> Path:
    """train_tiny for a multi-task run: batch sizes are per task (tasks.NAME.data.batch_size)."""
    from tagger.training.run import train

    fast = [f for f in FAST if not f.startswith("data.")]
    train(compose([f"data_dir={data_dir}", *fast, *MULTITASK, *overrides], tmp))
    return tmp


@pytest.fixture(scope="session")
def tiny_multitask_run(tmp_path_factory, tiny_data) -> Path:
    """A run dir of a tiny two-task tagger: tasks pos (EWT-like, softmax) and ner (CoNLL-like, CRF)."""
    return train_tiny_tasks(tmp_path_factory.mktemp("multitask_run"), tiny_data, ["trainer.max_epochs=8"])


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A private BentoML model store for the test (BENTOML_HOME too, for subprocesses)."""
    from bentoml._internal.configuration.containers import BentoMLContainer
    from bentoml._internal.models import ModelStore

    home = tmp_path / "bentoml"
    (home / "models").mkdir(parents=True)
    monkeypatch.setenv("BENTOML_HOME", str(home))
    BentoMLContainer.model_store.set(ModelStore(str(home / "models")))
    yield home
    BentoMLContainer.model_store.reset()
