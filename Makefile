# slmsql-hub — two commands on a fresh machine: `make quickstart` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
TORCH_VERSION := 2.13.0
SHELL := /bin/bash

.PHONY: setup quickstart ablations transfer heldout gpu-wheels gpu-check test test-slow test-all lint clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	# torch first: the CPU wheel lies on local disk; a bare `torch` requirement would pull a CUDA build.
	$(PIP) install "torch==$(TORCH_VERSION)"
	# the [inspect] extra too, so the slow suite runs `inspect eval` of the world task (the core install stays lean)
	$(PIP) install -e ".[dev,inspect]"
	touch $@

setup: $(VENV)/.installed

# The main job on the embedded world: every stage of the study into outputs/quickstart (reuses finished stages).
quickstart: setup
	$(VENV)/bin/slmsql quickstart $(ARGS)

# The ablation study (issue #13) from a finished quickstart (run first when missing) into outputs/ablations/;
# finished (variant, seed) folders are reused. ABLATE_ARGS passes e.g. --variants frozen high_lr --seeds 0.
ablations: quickstart
	$(VENV)/bin/slmsql ablate --config recipes/world/ablations.yaml $(ABLATE_ARGS)

# The transfer study (issue #22, recipes/world/transfer.yaml): each planted world is built with the recipe's
# plant, the quickstart's stages up to SFT 2 (what `ablate` reads) run on it into outputs/transfer/worlds/<world>/ (a
# finished stage is reused), then one `slmsql ablate` per world (--run-dir picks it) into outputs/transfer/<world>/,
# apart from the run it reads (#34); the natural world is the quickstart's run. Finished
# (variant, seed) folders are reused. TRANSFER_ARGS passes e.g. --seeds 0 to every world. The last step joins the
# worlds into one transfer report (Holm across them) in outputs/transfer/.
# The three worlds' ablates run at once (issue #39): each run is one thread, so the cores one world's preparation
# or its last runs leave idle go to another's runs; nothing a world computes depends on the others. Each keeps its
# own output folder and its log in outputs/transfer/logs/<world>.log. The quickstart stages before them run one at
# a time (two threads each).
TRANSFER := recipes/world/transfer.yaml
TRANSFER_WORLDS := plant70 plant100 natural
transfer_run_plant70 := outputs/transfer/worlds/plant70
transfer_run_plant100 := outputs/transfer/worlds/plant100
transfer_run_natural := outputs/quickstart
transfer: quickstart
	$(VENV)/bin/slmsql world build --out outputs/transfer/worlds/plant70/world --plant comparison_inclusive --plant-rate 0.7
	$(VENV)/bin/slmsql quickstart --out outputs/transfer/worlds/plant70 --until sft2
	$(VENV)/bin/slmsql world build --out outputs/transfer/worlds/plant100/world --plant comparison_inclusive --plant-rate 1.0
	$(VENV)/bin/slmsql quickstart --out outputs/transfer/worlds/plant100 --until sft2
	$(MAKE) --no-print-directory -j $(words $(TRANSFER_WORLDS)) $(TRANSFER_WORLDS:%=transfer-world-%)
	$(VENV)/bin/slmsql ablate --config $(TRANSFER) --combine

transfer-world-%:
	mkdir -p outputs/transfer/logs
	set -o pipefail; PYTHONUNBUFFERED=1 $(VENV)/bin/slmsql ablate --config $(TRANSFER) \
		--run-dir $(transfer_run_$*) $(TRANSFER_ARGS) 2>&1 | tee outputs/transfer/logs/$*.log

# The held-out world for the diagnosis rule (issue #36, recipes/world/transfer_heldout.yaml): a second plant
# (value_case: category values written in lower case) at a rate in support and one out of support, each built
# and run up to SFT 2 as in `transfer`, one `slmsql ablate` per world into outputs/heldout/<world>/, then one
# report across them. HELDOUT_ARGS passes e.g. --seeds 0 to every world.
HELDOUT := recipes/world/transfer_heldout.yaml
heldout: setup
	$(VENV)/bin/slmsql world build --out outputs/heldout/worlds/value_case70/world --plant value_case --plant-rate 0.7
	$(VENV)/bin/slmsql quickstart --out outputs/heldout/worlds/value_case70 --until sft2
	$(VENV)/bin/slmsql world build --out outputs/heldout/worlds/value_case100/world --plant value_case --plant-rate 1.0
	$(VENV)/bin/slmsql quickstart --out outputs/heldout/worlds/value_case100 --until sft2
	$(VENV)/bin/slmsql ablate --config $(HELDOUT) --run-dir outputs/heldout/worlds/value_case70 $(HELDOUT_ARGS)
	$(VENV)/bin/slmsql ablate --config $(HELDOUT) --run-dir outputs/heldout/worlds/value_case100 $(HELDOUT_ARGS)
	$(VENV)/bin/slmsql ablate --config $(HELDOUT) --combine

# The GPU check (issue #39, benchmarks/README.md): the world's stages on CUDA in bf16, small, timed, into
# outputs/gpu_check. It runs on the GPU machine's own python (no .venv: its torch is the CUDA one), from a copy of
# the checkout plus wheels/, which `make gpu-wheels` fills where there is network (GPU_PYTHON_VERSION: the GPU
# machine's Python) and this target installs offline first. GPU_PIP_ARGS passes e.g. --break-system-packages.
GPU_PYTHON ?= python3
GPU_PYTHON_VERSION ?= 3.11
gpu-wheels:
	PYTHON=$(PYTHON) PYTHON_VERSION=$(GPU_PYTHON_VERSION) bash benchmarks/gpu_wheels.sh

gpu-check:
	if [ -d wheels ]; then $(GPU_PYTHON) -m pip install $(GPU_PIP_ARGS) --no-index --find-links wheels -r benchmarks/gpu_wheels.txt; fi
	$(GPU_PYTHON) benchmarks/gpu_check.py --out outputs/gpu_check --force $(GPU_CHECK_ARGS)

# ruff, then the layers contract in pyproject.toml (an upward import anywhere fails it).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

# The default suite (fast + doctests); slow end-to-end tests run in `test-slow`.
test: setup lint
	$(PY) -m pytest -m "not slow" -q

# pytest exits 5 when no test is marked slow yet: that is not a failure.
test-slow: setup
	$(PY) -m pytest -m slow -q tests || [ $$? -eq 5 ]

test-all: test test-slow

clean:
	rm -rf $(VENV) outputs .pytest_cache
