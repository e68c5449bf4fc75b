"""Write constraints.txt: exact pins of every package that ``pip install -e '.[all extras]'`` installs, at the
versions of the current environment.

    .venv/bin/python scripts/freeze_constraints.py [--out constraints.txt]     (make constraints)

pip's own resolver does the work: a dry-run install of the project with all its extras, ignoring what is
installed but constrained to ``pip freeze`` of this environment, reports the whole dependency closure (markers
and extras evaluated as pip would), and nothing else that happens to be installed here. torch is pinned
without its local label (``2.13.0``, not ``2.13.0+cpu``): ``make setup`` installs the CPU wheel first, and
the pin then holds whichever build of that version is installed. CUDA runtime wheels are left out.
"""
from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
# torch's CUDA runtime (what a CUDA build of torch requires by these names): the CPU build needs none of it
CUDA_RUNTIME = re.compile(r"^(nvidia-.*|triton|cuda-.*)$")


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def closure(pyproject: Path) -> dict[str, str]:
    """{normalised name: version} of the project's dependency closure with all extras, at installed versions."""
    project = tomllib.loads(pyproject.read_text())["project"]
    extras = ",".join(sorted(project.get("optional-dependencies", {})))
    freeze = subprocess.run([sys.executable, "-m", "pip", "freeze", "--exclude-editable"], check=True,
                            capture_output=True, text=True).stdout
    pins = [line for line in freeze.splitlines() if "==" in line and " @ " not in line]
    with tempfile.TemporaryDirectory() as tmp:
        frozen, report = Path(tmp, "frozen.txt"), Path(tmp, "report.json")
        frozen.write_text("\n".join(pins) + "\n")
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed",
                            "--report", str(report), "-c", str(frozen), f"{pyproject.parent}[{extras}]"],
                           capture_output=True, text=True)
        if r.returncode:  # e.g. pyproject.toml now asks for a version this environment lacks
            raise SystemExit(f"pip could not resolve {pyproject.parent}[{extras}] at the installed versions:\n{r.stderr}")
        installs = json.loads(report.read_text())["install"]
    found = {_name(i["metadata"]["name"]): i for i in installs}
    torch_deps = {_name(Requirement(r).name) for r in found["torch"]["metadata"].get("requires_dist", [])}
    drop = {_name(project["name"])} | {n for n in torch_deps if CUDA_RUNTIME.match(n)}
    pins = {n: i["metadata"]["version"] for n, i in found.items() if n not in drop}
    pins["torch"] = pins["torch"].split("+")[0]
    return pins


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "constraints.txt")
    args = parser.parse_args(argv)
    pins = closure(REPO / "pyproject.toml")
    header = [
        "# Exact versions of everything `pip install -e '.[all extras]'` installs; `make setup` installs with -c.",
        f"# Resolved for Python {platform.python_version()} on {sys.platform}/{platform.machine()}. "
        "Regenerate: make constraints",
    ]
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text("\n".join(header + [f"{n}=={v}" for n, v in sorted(pins.items())]) + "\n")
    tmp.replace(args.out)  # never a half-written constraints file
    print(f"{args.out}: {len(pins)} pins")
    return 0


if __name__ == "__main__":
    sys.exit(main())
