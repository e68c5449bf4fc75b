# make train | make test | make test-slow | make compare | make serve | make bench
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export HF_DATASETS_OFFLINE := 1
export HF_HUB_OFFLINE := 1

.PHONY: setup train test test-slow test-all compare serve bench clean-runs

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: the CPU wheel on disk; a bare `torch` can pull a multi-GB CUDA build
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# data/ -> ../shared/data when it exists (override with TAGGER_DATA_DIR or data_dir=...)
data:
	@if [ ! -e data ] && [ -d ../shared/data ]; then ln -s ../shared/data data && echo "data -> ../shared/data"; fi

setup: $(STAMP) data

train: setup
	$(PY) -m tagger.train $(ARGS)

test: setup
	$(PY) -m pytest -m "not slow" -q $(ARGS)

test-slow: setup
	$(PY) -m pytest -m slow -q $(ARGS)

test-all: setup
	$(PY) -m pytest -q $(ARGS)
