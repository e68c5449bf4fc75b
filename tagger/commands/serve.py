"""``tagger serve [MODEL] [--host H] [--port P] [--name NAME]``: the HTTP service (``serve/service.py``) on a model.

MODEL is a BentoML model-store tag (default ``tagger:latest``), or a run dir, ``best.json`` or ``.ckpt`` file,
which is packaged into the store as a new version of NAME first. Runs ``bentoml serve serve.service:TaggingService`` with
``TAGGER_MODEL`` set; the page is at ``http://HOST:PORT/ui``. Needs the ``serve`` extra.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tagger serve", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", nargs="?", default="tagger:latest",
                        help="store tag, or a run dir / best.json / .ckpt to package first (default: %(default)s)")
    parser.add_argument("--name", default="tagger", help="store name when packaging a run (default: %(default)s)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3000)
    args = parser.parse_args(argv)
    try:
        import bentoml  # noqa: F401
    except ImportError:
        print("error: serving needs the serve extra: pip install 'tagger[serve]'", file=sys.stderr)
        return 1
    tag = args.model
    if Path(args.model).expanduser().exists():
        from tagger.artifacts.checkpoint import CheckpointError
        from tagger.artifacts.package import package

        try:
            tag = str(package(args.model, args.name).tag)
        except CheckpointError as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"packaged {args.model} as {tag}")
    command = [sys.executable, "-m", "bentoml", "serve", "serve.service:TaggingService", "--host", args.host,
               "--port", str(args.port)]
    return subprocess.call(command, env={**os.environ, "TAGGER_MODEL": tag})


if __name__ == "__main__":
    sys.exit(main())
