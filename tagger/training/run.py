"""One training run, from a composed config to a run dir (``python -m tagger.train`` is its Hydra entry).

Reads straight down: instantiate data -> model -> callbacks/loggers -> trainer, fit, evaluate the
best checkpoint on dev and test, write ``metrics.json`` into the run dir, return the results (their dev
metric is what a sweeper optimises).
"""
from __future__ import annotations

import json
import logging
import os
import platform
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytorch_lightning as pl  # noqa: E402
import torch  # noqa: E402
from hydra.utils import instantiate  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from tagger.artifacts.checkpoint import load_checkpoint  # noqa: E402
from tagger.artifacts.provenance import git_commit  # noqa: E402
from tagger.data.vectors import load_vectors  # noqa: E402
from tagger.fileio import write_json  # noqa: E402
from tagger.inference.scoring import evaluate_split, evaluate_tasks  # noqa: E402
from tagger.metrics import MAIN_METRIC, SELECTION  # noqa: E402
from tagger.models.multitask import build_model  # noqa: E402
from tagger.training.lightning_module import TaggerModule  # noqa: E402
from tagger.training.multitask import MultiTaskModule, multitask_datamodule, task_configs  # noqa: E402
from tagger.training.threads import training_threads  # noqa: E402
from tagger.training.transfer import check_compatible, copy_parameters, lineage, task_source  # noqa: E402

log = logging.getLogger(__name__)

if not OmegaConf.has_resolver("main_metric"):
    # data=multitask: the combined score of its tasks (tagger/training/multitask.py)
    OmegaConf.register_new_resolver("main_metric", lambda task: SELECTION if task == "multitask" else MAIN_METRIC[task])

MODEL_GROUPS = ("embedder", "model", "head")


def model_config(cfg: DictConfig) -> dict[str, Any]:
    """What a checkpoint needs to rebuild the model and use it as trained (a run of several ``tasks``: their heads
    in place of the one ``head``)."""
    groups = ("embedder", "model") if cfg.get("tasks") else MODEL_GROUPS
    config = {k: OmegaConf.to_container(cfg[k], resolve=True) for k in groups}
    if cfg.get("tasks"):
        config["tasks"] = task_configs(cfg)
    if cfg.data.get("doc_window"):
        config["doc_window"] = int(cfg.data.doc_window)
    if cfg.get("aux"):
        config["aux"] = OmegaConf.to_container(cfg.aux, resolve=True)
    return config


def resolved(cfg: DictConfig) -> dict[str, Any]:
    """The run's config as plain data, without Hydra's own node."""
    return {k: OmegaConf.to_container(v, resolve=True) if OmegaConf.is_config(v) else v
            for k, v in ((k, cfg[k]) for k in cfg if k != "hydra")}


def command_line() -> str:
    """The command that reproduces this run (its Hydra overrides)."""
    from hydra.core.hydra_config import HydraConfig

    try:
        overrides = HydraConfig.get().overrides.task
    except ValueError:  # composed outside @hydra.main (tests)
        return "python -m tagger.train"
    return " ".join(["python -m tagger.train", *overrides])


def _instantiate_all(group: DictConfig | None) -> list[Any]:
    return [instantiate(c) for c in (group or {}).values() if c is not None and "_target_" in c]


def train(cfg: DictConfig) -> dict[str, Any]:
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    pl.seed_everything(cfg.seed, workers=True)
    threads = training_threads(cfg.get("threads"))
    if threads is not None:
        torch.set_num_threads(threads)

    vectors = load_vectors(cfg.embedder.vectors, cfg.embedder.get("vectors_max_words")) \
        if cfg.embedder.get("vectors") else None
    config = model_config(cfg)
    source, start = None, None
    if cfg.get("init_from"):  # a trained model to start from (tagger/training/transfer.py)
        from tagger.artifacts import runs

        source = runs.resolve(str(cfg.init_from))
        start = runs.load(source)
        check_compatible(start.config, config)
    # data objects (vectors, later the vocabulary) reach constructors as Python values, never as config
    if cfg.get("tasks"):  # one corpus per task, one vocabulary (tagger/data/multitask.py)
        datamodule = multitask_datamodule(cfg, vectors=vectors, base_vocab=start.vocab if start else None)
    else:
        datamodule = instantiate(cfg.data, _partial_=True)(vectors=vectors, base_vocab=start.vocab if start else None)
    datamodule.setup("fit")  # builds the vocab from train (+ vector words); saved with the run and every checkpoint
    vocab = datamodule.vocab
    vocab.save(out / "vocab.json")
    tagger = build_model(config, vocab, vectors)
    init, finetune = None, {}
    if start is not None:
        label_map = OmegaConf.to_container(cfg.transfer.label_map) or {}
        source_tagger, source_vocab, source_config, source_task = start.tagger, start.vocab, start.config, None
        if vocab.tasks is None:  # a multi-task source lends one task's head (tagger/training/transfer.py)
            source_tagger, source_vocab, source_config, source_task = task_source(
                start.tagger, start.vocab, start.config, vocab, cfg.transfer.get("task"), label_map)
        report = copy_parameters(tagger, vocab, source_tagger, source_vocab, config, source_config, label_map)
        init = lineage(str(cfg.init_from), source, start, report, label_map) | ({"source_task": source_task}
                                                                               if source_task else {})
        finetune = {"body_lr_scale": cfg.transfer.lr_scale, "freeze_body_epochs": cfg.transfer.freeze_epochs}
    module_class = MultiTaskModule if vocab.tasks is not None else TaggerModule
    module = module_class(tagger, vocab, config, optimizer=instantiate(cfg.optimizer), **cfg.schedule, **finetune)
    n_params = sum(p.numel() for p in tagger.parameters() if p.requires_grad)
    heads = [task["head"] for task in config["tasks"].values()] if vocab.tasks is not None else [config["head"]]
    log.info("model: %s encoder, %s head, %d parameters", cfg.model._target_.rsplit(".", 1)[-1],
             "+".join(head["_target_"].rsplit(".", 1)[-1] for head in heads), n_params)

    callbacks = _instantiate_all(cfg.get("callbacks"))
    trainer: pl.Trainer = instantiate(cfg.trainer, callbacks=callbacks, logger=_instantiate_all(cfg.get("logger")))
    started = time.perf_counter()
    trainer.fit(module, datamodule=datamodule, ckpt_path=cfg.get("ckpt_path"))
    fit_seconds = time.perf_counter() - started
    if not trainer.is_global_zero:
        return {}

    ckpt = getattr(trainer.checkpoint_callback, "best_model_path", "") or ""
    results: dict[str, Any] = {
        "task": vocab.task if vocab.tasks is None else "multitask",
        "data": cfg.get("data_name"),
        "model": cfg.get("model_name"),
        "head": cfg.get("head_name"),
        "seed": cfg.seed,
        "main_metric": MAIN_METRIC[vocab.task] if vocab.tasks is None else SELECTION,
        "params": n_params,
        "epochs": trainer.current_epoch,
        "global_steps": trainer.global_step,
        "best_checkpoint": ckpt or None,
        "last_checkpoint": str(Path(ckpt).with_name("last.ckpt")) if ckpt else None,
        "best_epoch": None,
        "fit_seconds": round(fit_seconds, 1),
        "train_seconds": round(module.train_seconds, 1),
        "train_tokens": module.train_tokens,
        "train_tokens_per_s": round(module.train_tokens / module.train_seconds, 1) if module.train_seconds else None,
        "threads": torch.get_num_threads(),
        "machine": platform.machine(),
        "command": command_line(),
        "git": git_commit(),
        "init_from": init,
        "config": resolved(cfg),
    }
    if vocab.tasks is not None:
        results["tasks"] = {name: spec["task"] for name, spec in vocab.tasks.items()}
    if cfg.get("evaluate", True):
        # evaluate the best checkpoint (not the last weights) on whole splits, on one process
        evaluated = load_checkpoint(ckpt) if ckpt else None
        model, eval_vocab = (evaluated.tagger, evaluated.vocab) if evaluated else (module.tagger.eval(), vocab)
        results["best_epoch"] = evaluated.epoch if evaluated else None
        for split, key in (("validation", "dev"), ("test", "test")):
            if vocab.tasks is not None:  # each task on its own corpus's split, and their combination
                results[key] = evaluate_tasks(model, eval_vocab, {name: data[split] for name, data in
                                                                  datamodule.datasets.items() if split in data})
                log.info("%s %s = %.2f", key, SELECTION, results[key][SELECTION])
            elif split in datamodule.datasets:
                results[key] = evaluate_split(model, eval_vocab, datamodule.datasets[split])
                log.info("%s %s = %.2f", key, results["main_metric"], results[key][results["main_metric"]])
    write_json(out / "metrics.json", results)  # atomic: a run dir never holds a half-written metrics.json
    print(json.dumps({k: results.get(k, {}).get(results["main_metric"]) if isinstance(results.get(k), dict) else None
                      for k in ("dev", "test")} | {"metric": results["main_metric"], "run_dir": str(out)}))
    return results

