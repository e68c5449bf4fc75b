"""The ``tagger`` command: one entry point for the project's commands.

``tagger SUBCOMMAND [ARGS]`` runs the subcommand's module (``tagger train ...`` is ``python -m tagger.train ...``);
``tagger --help`` lists them and ``tagger SUBCOMMAND --help`` describes each (``train``'s is Hydra's, with the
config groups). Each module is imported only when its subcommand runs, so ``tagger --help`` is instant.
"""
from __future__ import annotations

import importlib
import os
import sys

# name -> (module whose main runs, one line for --help)
COMMANDS: dict[str, tuple[str, str]] = {
    "train": ("tagger.train", "train a tagger; Hydra overrides, e.g. data=conll2003 model=bilstm head=crf"),
    "tune": ("tagger.commands.tune", "search hyper-parameters with Optuna: hparams_search=NAME, --storage URL shared "
             "by processes (tune extra)"),
    "evaluate": ("tagger.commands.evaluate", "score a model on a labelled file (--input), or a run on its own corpus"),
    "predict": ("tagger.commands.predict",
                "tag a file (tokens, raw text, conll, conllu, jsonl) -> jsonl, conll or conllu"),
    "package": ("tagger.commands.package", "put a run into the BentoML model store (serve extra)"),
    "serve": ("tagger.commands.serve", "serve a packaged model or a run over HTTP (serve extra)"),
    "report": ("tagger.report.build", "comparison report of trained runs (tables, plots, best.json)"),
    "export": ("tagger.commands.export", "export a model's encoder to ONNX (onnx extra)"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    return "\n".join(["usage: tagger SUBCOMMAND [ARGS]   (tagger SUBCOMMAND --help for its options)", "",
                      "Sequence labelling (POS, NER): train, evaluate, tag, package and serve taggers.", "",
                      "subcommands:", *lines, "",
                      "Python: import tagger; nlp = tagger.load(RUN_DIR); nlp('Some text.')  (docs/usage.md)"])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        print(f"tagger: unknown subcommand {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(COMMANDS[name][0])
    if name == "train":
        # Hydra's own command line (overrides, --help, -m, --cfg) reads sys.argv
        sys.argv = ["tagger train", *rest]
        module.main()
        return 0
    return int(module.main(rest) or 0)


def console(argv: list[str] | None = None) -> int:
    """The console script: :func:`main`, ending quietly when the reader of stdout goes away (``tagger ... | head``)
    as Unix tools do; the redirect keeps the interpreter's last flush from raising again (Python docs, SIGPIPE)."""
    try:
        code = main(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(console())
