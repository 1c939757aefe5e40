# kanx: `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV     ?= .venv
PY       := $(VENV)/bin/python
# Extra pip arguments for torch, e.g. TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
TORCH_PIP_ARGS ?=
TORCH_VERSION  ?= 2.13.0
SHARED_DATA    := $(abspath ../shared/data)
# Exported only where the data is: an empty variable would still read as set.
ifneq ($(wildcard $(SHARED_DATA)/concrete.csv),)
export KANX_DATA_DIR ?= $(SHARED_DATA)
endif

# reproduce-tables (kanx/reproduce.py, also kanx-reproduce)
SCALE    ?= full
DATASETS ?=
LAUNCHER ?= packed
RESULTS  ?=
OVERRIDES ?=
GROUP    ?=
PACK_SIZE ?=

.PHONY: help install run formula test test-full test-ci test-portable test-cuda test-slurm lint reproduce-tables analyze docs-calibration docs-reproduction study bench bench-paper clean

help: ## Show this help
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST) \
	  | sed 's/$$(TORCH_VERSION)/$(TORCH_VERSION)/g'  # the help names the values in force, not the variables

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

install: $(PY) ## Create .venv and install kanx (CPU torch==$(TORCH_VERSION) if torch is absent)
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==$(TORCH_VERSION) $(TORCH_PIP_ARGS)
	@$(PY) -c "import kanx, hydra, pymoo, submitit, setuptools_scm, mypy, tensorboard" 2>/dev/null && $(PY) -m pip show -q kanx >/dev/null 2>&1 || $(PY) -m pip install -q -e '.[test]'

run: install ## Train the embedded default (z = sin(x + y^2), EFX, the paper's Fig. 1) end to end
	$(PY) -m kanx.train +condition=EFX
	$(PY) -m kanx.draw outputs/sin_xy2/EFX/default/beta=0.2,seed=0

formula: install ## Symbolic formula of the default run (after make run): formula.json/.tex/.png in its folder
	$(PY) -m kanx.formula outputs/sin_xy2/EFX/default/beta=0.2,seed=0

test: install ## Fast test suite, in-process (includes one small real sweep through the CLI)
	$(PY) -m pytest

test-full: test ## Every test but the SLURM ones: make test, then those that start processes, build the wheel, train long, or dry-run the offline GPU job
	$(PY) -m pytest -m "(slow or offline_gpu) and not slurm"

test-ci: test ## What CI runs before test-portable and the SLURM tests: make test-full without the smoke pipeline of every dataset (marker pipeline), for CI's 30-minute budget
	$(PY) -m pytest -m "(slow or offline_gpu) and not slurm and not pipeline"

# test-portable: another CPU's vector kernels, emulated on this one. torch reads ATEN_CPU_CAPABILITY at import (its own
# kernels), MKL reads MKL_ENABLE_INSTRUCTIONS (matrix products); each leg first checks that torch took the capability.
PORTABLE_TESTS := -m "(committed or bitwise) and not slow and not slurm and not offline_gpu" -p no:cacheprovider
HOST_AVX512    := $(shell grep -qw avx512f /proc/cpuinfo 2>/dev/null && echo yes)
define portable_leg
	ATEN_CPU_CAPABILITY=$(1) $(PY) -c "import sys, torch; c = torch.backends.cpu.get_cpu_capability(); \
	  print('make test-portable: torch CPU capability', c, '(MKL: $(2))'); sys.exit(c != '$(1)'.upper())"
	ATEN_CPU_CAPABILITY=$(1) MKL_ENABLE_INSTRUCTIONS=$(2) $(PY) -m pytest $(PORTABLE_TESTS)
endef

test-portable: install ## The tests that read committed records (marker committed) or claim bit-equality of two code paths (bitwise), under torch's and MKL's baseline kernels and, on an AVX-512 host, their AVX2 ones (what another CPU computes)
	$(call portable_leg,default,SSE4_2)
	$(if $(HOST_AVX512),$(call portable_leg,avx2,AVX2),@echo "make test-portable: no AVX-512 here, so native is the AVX2 leg")

test-cuda: install ## GPU tests (tests/test_cuda.py; skipped without CUDA) and the benchmark on the GPU
	$(PY) -m pytest tests/test_cuda.py -rs
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) scripts/benchmarks/bench.py --device cuda --quick

test-slurm: install ## Tests against a real local SLURM cluster (root; ../shared/slurm)
	$(PY) -m pytest -m slurm -rs

lint: install ## ruff (pyproject.toml [tool.ruff]), mypy over kanx/ ([tool.mypy]); the import contracts are tests/test_imports.py
	$(VENV)/bin/ruff check kanx hydra_plugins tests scripts
	$(VENV)/bin/mypy

reproduce-tables: install ## Paper sweeps + analysis: [SCALE=full|smoke] [DATASETS="concrete ..."] [RESULTS=dir] [LAUNCHER=packed|basic|slurm] [JOBS=n] [GROUP=auto|all|condition|sweep] [PACK_SIZE=n]
	$(PY) -m kanx.reproduce --scale $(SCALE) --launcher $(LAUNCHER) --jobs $(or $(JOBS),$(if $(filter smoke,$(SCALE)),2,1)) $(if $(GROUP),--group $(GROUP)) \
	  $(if $(PACK_SIZE),--pack-size $(PACK_SIZE)) $(if $(DATASETS),--datasets $(DATASETS)) $(if $(RESULTS),--results $(RESULTS)) $(OVERRIDES)

analyze: install ## Analysis only: python -m kanx.analyze RESULTS (RESULTS=dir, default outputs/paper)
	$(PY) -m kanx.analyze $(or $(RESULTS),outputs/paper)

docs-calibration: install ## docs/CALIBRATION.md from the records under results/calibration
	$(PY) scripts/studies/calibrate.py report

docs-reproduction: install ## docs/REPRODUCTION.md: Concrete (results/paper-refit256, results/paper) vs the published values, and the other families
	$(PY) scripts/reproduction_doc.py

study: install ## A study beyond the paper at its protocol, then its tables: STUDY=inputs|nodes|distractors|search [JOBS=n] [SCALE=smoke] (docs/STUDIES.md)
	@case "$(STUDY)" in inputs|nodes) $(PY) scripts/studies/factor_study.py run $(STUDY) --jobs $(or $(JOBS),1) --scale $(SCALE) $(OVERRIDES);; \
	  distractors) $(PY) scripts/studies/distractors.py run $(if $(filter smoke,$(SCALE)),--quick) $(OVERRIDES);; \
	  search) $(PY) scripts/studies/search_vs_grid.py run $(if $(filter smoke,$(SCALE)),--scale tiny) $(OVERRIDES);; \
	  *) echo "make study: STUDY='$(STUDY)' is not one of: inputs, nodes, distractors, search" >&2; exit 2;; esac

bench: install ## Speed benchmark: kanx packed vs pykan (installs the bench extra); BASELINE=REV also times kanx of commit REV
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) scripts/benchmarks/bench.py $(if $(BASELINE),--baseline-commit $(BASELINE))

bench-paper: install ## Whole-paper cost estimate on this device: mixed packs vs one sweep per pack [DEVICE=cpu|cuda] [PACK_SIZE=n]
	$(PY) scripts/benchmarks/bench_paper.py --device $(or $(DEVICE),cpu) $(if $(PACK_SIZE),--pack-size $(PACK_SIZE))

clean: ## Remove caches (keeps .venv and outputs/)
	rm -rf .pytest_cache .ruff_cache .mypy_cache build *.egg-info
	find . -name __pycache__ -type d -prune -not -path './$(VENV)/*' -exec rm -rf {} +
