#!/usr/bin/env bash
# The planner's answers on a fixed set of machine descriptions (issue 20's closing note): run it on two
# checkouts and diff the outputs to see what changed. Offline; reads only the bundled matrix and examples.
# Usage: bash benchmarks/planner_cases.sh [python]   (from the repository root)
set -u
py=${1:-python3}
run() { echo "### gpu-doctor $*"; "$py" -m doctor "$@" 2>&1 | grep -v "^  base image\|^  source\|data reviewed"; echo; }
run plan --gpu GH200 --driver 580.65.06 --python 3.12
run plan --gpu "NVIDIA GB10" --driver 580.95.05 --python 3.12
run plan --gpu "NVIDIA Thor" --driver 580.00 --python 3.12
run plan --gpu "Orin (nvgpu)" --driver 540.4.0 --python 3.10
run plan --gpu A100 --driver 570.124.04 --python 3.11 --platform linux-aarch64
run plan --gpu "Tesla K80" --driver 470.256.02 --python 3.9
run plan --gpu "Tesla V100-SXM2-16GB" --driver 580.65.06 --want "torch>=2.15" --python 3.12
run plan --gpu "Tesla P100-PCIE-16GB" --driver 580.65.06 --want "torch>=2.15" --python 3.12
run plan --gpu A100 --driver-cuda 12.2 --python 3.11
run plan --gpu "NVIDIA GeForce RTX 4090" --driver 550.54.14 --want "tensorflow>=2.16" --python 3.11
run plan --gpu "H100 80GB HBM3" --driver 535.104.05 --want jax --python 3.12
run plan --gpu "NVIDIA GB300" --driver 570.124.04 --python 3.12
run matrix cuda 13.3
run matrix gpu GH200
run matrix gpu "Orin (nvgpu)"
for ex in r470-geforce-cu124-torch debian12-535-no-gpu; do
  echo "### gpu-doctor fix --facts doctor/examples/$ex.json (steps)"
  "$py" -m doctor fix --facts "doctor/examples/$ex.json" | grep "^#   [0-9]\.\|^#   note" ; echo
done
