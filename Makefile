# make train | make test | make test-slow | make compare | make serve | make bench | make constraints
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
export HF_DATASETS_OFFLINE := 1
export HF_HUB_OFFLINE := 1

.PHONY: setup train test test-slow test-all compare serve bench clean-runs

# constraints.txt pins every package to the versions the tests last passed with (make constraints rewrites it)
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first, at the version constraints.txt pins: the CPU wheel on disk; a bare `torch` can pull a multi-GB CUDA build
	$(PY) -m pip install --quiet -c constraints.txt torch
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $@

# after a dependency change in pyproject.toml: pip install -e '.[dev]' (without -c), run the tests, then this
.PHONY: constraints
constraints:
	$(PY) scripts/freeze_constraints.py

# data/ -> ../shared/data when it exists (override with TAGGER_DATA_DIR or data_dir=...)
data:
	@if [ ! -e data ] && [ -d ../shared/data ]; then ln -s ../shared/data data && echo "data -> ../shared/data"; fi

setup: $(STAMP) data

train: setup
	$(PY) -m tagger.train experiment=pos $(ARGS)

test: setup
	$(PY) -m pytest -m "not slow" -q $(ARGS)

test-slow: setup
	$(PY) -m pytest -m slow -q $(ARGS)

test-all: setup
	$(PY) -m pytest -q $(ARGS)

# -- comparison reports: sweep -> report (tagger.report). A failed sweep job does not stop the report
# (leading '-'): the report lists it. `make report-pos ARGS=--no-eval` re-renders without checkpoints.
.PHONY: compare-pos compare-ner train-compare-pos train-compare-ner report-pos report-ner ablation

# The comparison of the defaults: window_fc, BiLSTM and self-attention with GloVe 6B 50d vectors, 3 seeds, on EWT
# (POS) and CoNLL-2003 (NER), two sweeps on the two cores at once (1 thread each), into multirun/cross_corpus/CORPUS
# (the layout of make cross-corpus). The report of a task covers every vectors run on its corpus there: the
# defaults' run set, and the tuned self-attention of make cross-corpus where it has run.
compare: compare-pos compare-ner

SA_MODEL_pos := self_attention
SA_MODEL_ner := self_attention_ner
DATA_pos := ud_ewt
DATA_ner := conll2003
TITLE_pos := UD English EWT UPOS: window_fc vs BiLSTM vs self-attention with GloVe 6B 50d vectors
TITLE_ner := CoNLL-2003 NER: window_fc vs BiLSTM vs self-attention (CRF heads) with GloVe 6B 50d vectors

compare-pos compare-ner: compare-%: train-compare-%
	$(MAKE) report-$*

train-compare-pos train-compare-ner: train-compare-%: setup
	-$(PY) -m tagger.train -m experiment=compare_$* embedder=glove model=bilstm,window_fc $(CC_SWEEP) & \
	  $(PY) -m tagger.train -m experiment=compare_$* embedder=glove model=$(SA_MODEL_$*) $(CC_SWEEP); wait

report-pos report-ner: report-%: setup
	$(PY) -m tagger.report multirun/cross_corpus/$(DATA_$*)/*-glove_seed* --out reports/$* --title "$(TITLE_$*)" $(ARGS)

# make report-multitask: the multi-task model (experiment=multitask seeds 1-3, in MT_RUNS) beside the single-task
# self-attention default of each task (make compare's seeds 1-3, lines of reports/results.jsonl: scores only), one
# report per task (--task) -> MT_OUT/pos, MT_OUT/ner
MT_RUNS ?= multirun/multitask
MT_OUT ?= reports/multitask
MT_BASE_pos := experiment=compare_pos model=self_attention embedder=glove
MT_BASE_ner := experiment=compare_ner data=conll2003 model=self_attention_ner embedder=glove
TITLE_MT_pos := UD English EWT UPOS: the multi-task model (UPOS + CoNLL-2003 entities, one encoder) beside the single-task self-attention
TITLE_MT_ner := CoNLL-2003 NER: the multi-task model (UPOS + CoNLL-2003 entities, one encoder) beside the single-task self-attention
TITLE_MT_transfer = $(1): self-attention fine-tuned from the multi-task model beside fine-tuned from the CoNLL-2003 model
.PHONY: multitask report-multitask report-multitask-pos report-multitask-ner
# make multitask: experiment=multitask seeds 1-3, three trainings at once on 1 thread each (multirun/multitask), then
# fine-tuning from its seed 1 on BTC and WikiGold (experiment=ner_finetune, seeds 1-3: beside the fine-tuning from
# the CoNLL-2003 model of make transfer) and make report-multitask
MT_SWEEP := hydra.sweep.dir=multirun/multitask 'hydra.sweep.subdir=$${model_name}-multitask_seed$${seed}'
multitask: setup
	-for s in 1 2 3; do $(PY) -m tagger.train -m experiment=multitask seed=$$s $(MT_SWEEP) & done; wait
	-$(PY) -m tagger.train -m experiment=ner_finetune data=btc,wikigold seed=1,2,3 \
	  init_from=multirun/multitask/self_attention_ner-multitask_seed1 $(call TR_SWEEP,finetune_frommt)
	$(MAKE) report-multitask

# the two reports of one task each, and the transfer reports: each small corpus's runs fine-tuned from the multi-task
# model (make multitask) beside those fine-tuned from the CoNLL-2003 model (make transfer)
report-multitask: report-multitask-pos report-multitask-ner
	for d in btc wikigold; do $(PY) -m tagger.report multirun/transfer/$$d/self_attention_ner-finetune_seed* \
	  multirun/transfer/$$d/self_attention_ner-finetune_frommt_seed* --out $(MT_OUT)/transfer_$$d \
	  --title "$(call TITLE_MT_transfer,$$d)" $(ARGS) || exit 1; done

report-multitask-pos report-multitask-ner: report-multitask-%: setup
	$(PY) -m tagger.report $(MT_RUNS) --task $* --out $(MT_OUT)/$* --baseline '$(MT_BASE_$*)' --title "$(TITLE_MT_$*)" $(ARGS)

ablation: setup
	-$(PY) -m tagger.train -m experiment=ablate_attention
	$(PY) -m tagger.report multirun/ablate_attention --out reports/ablation $(ARGS)
	-$(PY) -m tagger.train -m experiment=length_extrapolation
	$(PY) -m tagger.report multirun/length_extrapolation --out reports/length_extrapolation $(ARGS)

# make cross-corpus: window_fc, BiLSTM and self-attention, from scratch and with GloVe 6B 50d vectors, on BTC and
# WikiGold (seeds 1-2), with the vectors on CoNLL-2003 and EWT (make compare, seeds 1-3), and the tuned
# self-attention configurations with the vectors (experiment=*_self_attention_best embedder=glove, seeds 1-3; the
# NER one also on BTC and WikiGold, seeds 1-2); then
# the reports (reports/cross_corpus/btc|wikigold, reports/ner, reports/pos) and the mean-dev table in
# reports/cross_corpus. Several hours on 2 cores.
CC_MODELS_ner := window_fc,bilstm,self_attention_ner
CC_MODELS_pos := window_fc,bilstm,self_attention
CC_SWEEP := hydra.sweep.dir=multirun/cross_corpus 'hydra.sweep.subdir=$${data_name}/$${model_name}-$${hydra:runtime.choices.embedder}_seed$${seed}'
.PHONY: cross-corpus report-cross-corpus

CC_SWEEP_TUNED := hydra.sweep.dir=multirun/cross_corpus 'hydra.sweep.subdir=$${data_name}/$${model_name}_best-$${hydra:runtime.choices.embedder}_seed$${seed}'

cross-corpus: setup
	-$(PY) -m tagger.train -m experiment=compare_ner data=btc,wikigold model=$(CC_MODELS_ner) embedder=default,glove seed=1,2 $(CC_SWEEP)
	-$(MAKE) train-compare-pos train-compare-ner
	-$(PY) -m tagger.train -m experiment=ner_self_attention_best embedder=glove seed=1,2,3 $(CC_SWEEP_TUNED) & \
	  $(PY) -m tagger.train -m experiment=pos_self_attention_best embedder=glove seed=1,2,3 $(CC_SWEEP_TUNED); wait
	-$(PY) -m tagger.train -m experiment=ner_self_attention_best data=btc,wikigold embedder=glove seed=1,2 $(CC_SWEEP_TUNED)
	$(MAKE) report-cross-corpus

report-cross-corpus: setup report-pos report-ner
	for d in btc wikigold; do \
	  $(PY) -m tagger.report multirun/cross_corpus/$$d --out reports/cross_corpus/$$d --title "$$d: the window_fc, BiLSTM and self-attention runs of make cross-corpus" $(ARGS) || exit 1; done
	$(PY) -m tagger.report.results multirun/cross_corpus/btc/*-default_seed* multirun/cross_corpus/wikigold/*-default_seed* --variant "$(CC_SCRATCH)"
	$(PY) -m tagger.report.results $(foreach m,window_fc bilstm self_attention self_attention_ner,multirun/cross_corpus/*/$(m)-glove_seed*) --variant "$(CC_GLOVE)"
	$(PY) -m tagger.report.results multirun/cross_corpus/*/*_best-glove_seed* --variant "$(CC_TUNED)"
	$(PY) -m tagger.report.results --compare reports/cross_corpus/README.md --title "Across corpora: from scratch and with GloVe 6B 50d vectors (make cross-corpus)" \
	  --column "from scratch=$(CC_SCRATCH)|rare-word dropout alpha 1.0 (embedder.rare_word_dropout=1.0)|rare-word dropout alpha 1.0 (embedder.rare_word_dropout=1.0), the run set of reports/ner" \
	  --column "GloVe 6B 50d=$(CC_GLOVE)" --column "tuned self-attention + GloVe=$(CC_TUNED)"
# make transfer: each encoder fine-tuned from its CoNLL-2003 model with GloVe (seed 1 of make compare, or
# TRANSFER_SRC=DIR holding MODEL-glove_seed1) on BTC and WikiGold, beside the same encoders from scratch with GloVe
# (self-attention: also the tuned fine-tuning recipe); seeds 1-3 for self-attention, 1-2 for the others; then
# make report-transfer (reports/transfer/btc, reports/transfer/wikigold, results.jsonl). About 3 hours on 2 cores.
TRANSFER_SRC ?= multirun/cross_corpus/conll2003
TR_SWEEP = hydra.sweep.dir=multirun/transfer 'hydra.sweep.subdir=$${data_name}/$${model_name}-$(1)_seed$${seed}'
TR_FINETUNED := fine-tuned from CoNLL-2003 (init_from, experiment=ner_finetune)
TR_FINETUNED_SA := fine-tuned from CoNLL-2003, tuned recipe (init_from, experiment=ner_finetune_self_attention)
TR_FINETUNED_BEST := fine-tuned from the tuned CoNLL-2003 model (experiment=ner_self_attention_best), tuned recipe (init_from, experiment=ner_finetune_self_attention)
TR_FINETUNED_SA_SWA := fine-tuned from CoNLL-2003, tuned recipe, weight averaging from epoch 10 (init_from, experiment=ner_finetune_self_attention callbacks=swa callbacks.weight_averaging.start=0.4)
TR_FROM_POS := started from the EWT POS model, cross-task (init_from, experiment=ner_finetune)
.PHONY: transfer report-transfer
transfer: setup
	-$(PY) -m tagger.train -m experiment=ner_finetune_self_attention data=btc,wikigold seed=1,2,3 \
	  init_from=$(TRANSFER_SRC)/self_attention_ner-glove_seed1 $(call TR_SWEEP,finetune_tuned)
	-$(PY) -m tagger.train -m experiment=ner_finetune data=btc,wikigold seed=1,2,3 \
	  init_from=$(TRANSFER_SRC)/self_attention_ner-glove_seed1 $(call TR_SWEEP,finetune)
	-for m in bilstm window_fc; do $(PY) -m tagger.train -m experiment=ner_finetune model=$$m data=btc,wikigold seed=1,2 \
	  init_from=$(TRANSFER_SRC)/$$m-glove_seed1 $(call TR_SWEEP,finetune); done
	-$(PY) -m tagger.train -m experiment=ner data=btc,wikigold seed=1,2,3 $(call TR_SWEEP,scratch)
	$(MAKE) transfer-best-source transfer-cross-task
	$(MAKE) report-transfer

# the tuned fine-tuning from the tuned self-attention CoNLL-2003 model (experiment=ner_self_attention_best with GloVe,
# whose block 2 already attends to the whole row of document context as the recipe's does)
TR_BEST_SRC ?= multirun/transfer/src/conll2003-self_attention_best-glove_seed1
.PHONY: transfer-best-source transfer-cross-task
transfer-best-source: setup
	test -f $(TR_BEST_SRC)/metrics.json || $(PY) -m tagger.train experiment=ner_self_attention_best embedder=glove seed=1 \
	  hydra.run.dir=$(TR_BEST_SRC)
	-$(PY) -m tagger.train -m experiment=ner_finetune_self_attention data=wikigold,btc seed=1,2,3 \
	  init_from=$(TR_BEST_SRC) $(call TR_SWEEP,finetune_bestsrc)

# cross-task: the EWT POS model (experiment=pos) starting a CoNLL-2003 NER model of the same encoder, beside that NER
# model from scratch (reports/transfer/conll2003)
TR_POS_SRC ?= multirun/transfer/src/ud_ewt-pos_seed1
transfer-cross-task: setup
	test -f $(TR_POS_SRC)/metrics.json || $(PY) -m tagger.train experiment=pos seed=1 hydra.run.dir=$(TR_POS_SRC)
	-$(PY) -m tagger.train experiment=ner_finetune data=conll2003 model=self_attention init_from=$(TR_POS_SRC) seed=1 \
	  hydra.run.dir=multirun/transfer/conll2003/self_attention-from_pos_seed1
	-$(PY) -m tagger.train experiment=ner model=self_attention seed=1 \
	  hydra.run.dir=multirun/transfer/conll2003/self_attention-scratch_seed1

# the reports score each init_from source zero-shot on the corpus beside its fine-tuned and from-scratch runs
report-transfer: setup
	for d in btc wikigold; do \
	  $(PY) -m tagger.report multirun/transfer/$$d --out reports/transfer/$$d --no-eval \
	    --title "$$d: fine-tuned from CoNLL-2003 (init_from), from scratch and zero-shot" $(ARGS) || exit 1; done
	$(PY) -m tagger.report multirun/transfer/conll2003 --out reports/transfer/conll2003 --no-eval \
	  --title "conll2003: started from the EWT POS model (init_from, cross-task) and from scratch" $(ARGS)
	$(PY) -m tagger.report.results multirun/transfer/*/*-finetune_tuned_seed* --variant "$(TR_FINETUNED_SA)"
	$(PY) -m tagger.report.results multirun/transfer/*/*-finetune_bestsrc_seed* --variant "$(TR_FINETUNED_BEST)"
	$(PY) -m tagger.report.results multirun/transfer/conll2003/*-from_pos_seed* --variant "$(TR_FROM_POS)"
	-$(PY) -m tagger.report.results $(TR_BEST_SRC) --variant "$(CC_TUNED)"
	-$(PY) -m tagger.report.results $(TR_POS_SRC) --variant "$(CC_GLOVE)"
	-$(PY) -m tagger.report.results multirun/transfer/wikigold/*-finetune_tuned_swa_seed* --variant "$(TR_FINETUNED_SA_SWA)"
	$(PY) -m tagger.report.results multirun/transfer/*/*-finetune_seed* --variant "$(TR_FINETUNED)"
	$(PY) -m tagger.report.results multirun/transfer/*/*-scratch_seed* --variant "$(CC_GLOVE)"

CC_SCRATCH := from scratch, defaults (experiment=compare_ner)
CC_GLOVE := GloVe 6B 50d vectors (embedder=glove)
CC_TUNED := tuned self-attention with GloVe 6B 50d vectors (experiment=ner_self_attention_best or pos_self_attention_best, embedder=glove)

# make serve [SERVE_TASK=pos|ner] [SERVE_NAME=tagger] [PORT=3000]: if SERVE_NAME:latest is not in the
# BentoML model store yet, package the best available run (a reports/**/best.json whose checkpoint is here, else the best dev score
# under multirun/ and runs/), then serve it on localhost: http://127.0.0.1:$(PORT)/ui
# make package [RUN=run_dir|best.json] [SERVE_NAME=...]: package a run (default: the best) as a new version
SERVE_TASK ?= pos
SERVE_NAME ?= tagger
PORT ?= 3000
.PHONY: package

package: setup
	$(PY) -m tagger.commands.package $(if $(RUN),$(RUN),--best --task $(SERVE_TASK)) --name $(SERVE_NAME)

serve: setup
	$(PY) -m tagger.commands.package --best --task $(SERVE_TASK) --name $(SERVE_NAME) --if-missing
	TAGGER_MODEL=$(SERVE_NAME):latest $(VENV)/bin/bentoml serve serve.service:TaggingService --host 127.0.0.1 --port $(PORT)

# -- speed and reliability. `make bench [RUN=run_dir]`: the inference backends and the spaCy peers on EWT
# (reports/bench.md); `make bench-families`: each model family, training and HTTP (reports/bench_families.md).
# `make bench-train`: the default POS model's training speed against spaCy's efficiency tagger on EWT, the whole fit
# and the time to a dev accuracy (reports/bench_training.md; BENCH_ARGS='--rounds 2' takes turns twice).
# All need a quiet machine. BENCH_ARGS=--quick checks a bench in minutes.
# make fuzz / make soak serve a trained run (RUN=run_dir, default: a comparison run) on a free port.
.PHONY: fuzz kill-resume soak bench-families bench-ab bench-train

# the bench extra (spaCy's en_core_web_sm, py-spy), installed once per change of the dependencies
BENCH_STAMP := $(VENV)/.bench-installed-stamp
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -c constraints.txt -e '.[bench]'
	touch $@

# MULTITASK='MT_RUN POS_RUN NER_RUN' adds one multi-task model against the two single-task models in turn
bench: setup data $(BENCH_STAMP)
	$(PY) -m bench.backends $(RUN) $(BENCH_ARGS)
	$(if $(MULTITASK),$(PY) -m bench.multitask $(MULTITASK))

# make bench-ab OLD=CHECKOUT [RUN=...]: the default backend's tokens/s of an older checkout (a git worktree) against this one,
# taking turns in one run; BENCH_ARGS=... passes more (e.g. --rounds 8)
bench-ab: setup data
	$(PY) -m bench.ab $(OLD) . tag $(or $(RUN),$(error RUN=MODEL is required)) $(BENCH_ARGS)

bench-families: setup data
	$(PY) -m bench.families $(BENCH_ARGS)

bench-train: setup data $(BENCH_STAMP)
	$(PY) -m bench.training $(BENCH_ARGS)

fuzz: setup
	RUN=$(RUN) PY=$(PY) scripts/fuzz_service.sh

kill-resume: setup data
	PY=$(PY) scripts/kill_and_resume.sh

soak: setup data
	$(PY) scripts/with_service.py --fail-on-5xx $(if $(RUN),--run $(RUN)) -- \
	  '$(PY) -m bench.loadgen --url $$TAGGER_URL/tag --clients 32 --duration 60 --pid $$TAGGER_PID --max-errors 0'
