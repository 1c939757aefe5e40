#!/usr/bin/env bash
# Prepare, on this machine, what scripts/offline_gpu/run.sh needs on an offline GPU node (one that
# reaches no package registry): the wheels of what the job imports and the node's image lacks (its
# python3 is 3.12 with torch, numpy, pandas, matplotlib, scipy, pytest, pyyaml, sympy, tabulate, tqdm,
# cffi, platformdirs, packaging, cloudpickle, typing_extensions), into .whl/, and the real
# data (Concrete, Superconductor) from ../shared/data into .data/, and the checkpoints of unfinished
# runs into .ckpt/ (scripts/offline_gpu/checkpoints.sh). The folders are git-ignored
# and are copied to the node beside the working tree: .whl/, .data/, .ckpt/.
# Only training's imports come as wheels (hydra-core, omegaconf, antlr4: 0.4 MB): the job runs no
# analysis (--no-analysis), so pymoo and its dependencies (6.7 MB) stay here, leaving that room
# under the copy step's 64 MiB to the checkpoints.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-.venv/bin/python}
rm -rf .whl && mkdir -p .whl .data  # no stale wheels from an earlier list
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
# Binary wheels for CPython 3.12 (pure-Python ones too, where published as wheels).
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}" -d .whl \
  hydra-core==1.3.8 omegaconf==2.3.1
# `make bench` in the job times pykan beside kanx: pykan declares no dependencies, and imports
# scikit-learn (with joblib and threadpoolctl) at run time (about 14 MB of wheels).
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}" -d .whl \
  pykan==0.2.8 scikit-learn==1.7.2 joblib==1.5.2 threadpoolctl==3.6.0
# antlr4-python3-runtime 4.9.3 (what omegaconf pins) is published as a source archive only:
# build its pure-Python wheel here.
$PY -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
cp ../shared/data/concrete.csv ../shared/data/superconductor.csv .data/
# The checkpoints of unfinished runs, as they are now (the CPU may have advanced them since the
# last job), for the job to resume.
bash scripts/offline_gpu/checkpoints.sh
# The tree is copied too (64 MiB in all): set aside what the job does not read; unpack.sh
# (or `bash scripts/offline_gpu/stash.sh back`) restores it.
bash scripts/offline_gpu/stash.sh out
du -sh .whl .data .ckpt
ls .whl
