#!/usr/bin/env bash
# Download, on a machine with internet, the wheels a lent GPU machine lacks for benchmarks/gpu_check.py
# (Python 3.12, manylinux x86-64), into benchmarks/wheels/ (ignored by git); prints each wheel and the
# total, and fails if the needed ones exceed the limit. What is needed and why: benchmarks/device_wheels.py.
#
#   bash benchmarks/device_wheels.sh              # then carry benchmarks/wheels/ to the GPU machine
#   PYTHON=.venv/bin/python LIMIT_MIB=48 bash benchmarks/device_wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
"${PYTHON:-python}" benchmarks/device_wheels.py --dest benchmarks/wheels --limit-mib "${LIMIT_MIB:-48}"
