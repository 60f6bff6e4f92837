#!/usr/bin/env bash
# Fetch the wheels a device run of benchmarks/bench_gpu.py is given (its CARRY table) into
# .whl/ (git-ignored), for the device's Python 3.12 on manylinux x86_64, and check that they
# fit the device tool's carry limit. Then: `python benchmarks/bench_gpu.py --check`, and on
# the device: `python3 -m pip install --no-index --no-deps --target /tmp/site .whl/*.whl`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
mapfile -t reqs < <(python -c 'import runpy; print("\n".join(runpy.run_path("benchmarks/bench_gpu.py", run_name="carry")["CARRY"]))')
mkdir -p .whl
python -m pip download --no-deps --only-binary=:all: --implementation cp --python-version 3.12 \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux_2_28_x86_64 -d .whl "${reqs[@]}"
python benchmarks/bench_gpu.py --check
