#!/usr/bin/env bash
# Prepare, on this machine, what scripts/gpu_window.sh needs on a GPU machine that reaches no
# package registry: the wheels of what kanx imports and the GPU image lacks (its python3 is
# 3.12 with torch, numpy, pandas, matplotlib, scipy, pytest, pyyaml, sympy, tabulate, tqdm,
# cffi, platformdirs, packaging, cloudpickle, typing_extensions), into .whl/, and the real
# data (Concrete, Superconductor) from ../shared/data into .data/, and the checkpoints of unfinished
# runs into .ckpt/ (scripts/gpu_checkpoints.sh). The folders are git-ignored
# and travel with the device tool's `carry: [".whl", ".data", ".ckpt"]`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
mkdir -p .whl .data
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
# Binary wheels for CPython 3.12 (pure-Python ones too, where published as wheels).
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}" -d .whl \
  hydra-core==1.3.8 omegaconf==2.3.1 pymoo==0.6.2 moocore==0.3.2 autograd==1.9.1 cma==4.5.0 alive-progress==3.3.0 about-time==4.2.1 graphemeu==0.7.2 deprecated==1.3.1 wrapt==2.5.2 submitit==1.5.4 xlrd==2.0.2
# antlr4-python3-runtime 4.9.3 (what omegaconf pins) is published as a source archive only:
# build its pure-Python wheel here.
$PY -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
cp ../shared/data/concrete.csv ../shared/data/superconductor.csv .data/
# The checkpoints of unfinished runs, as they are now (the CPU may have advanced them since the
# last window), for the window to resume.
bash scripts/gpu_checkpoints.sh
du -sh .whl .data .ckpt
ls .whl
