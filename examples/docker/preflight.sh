#!/usr/bin/env bash
# Container entrypoint: run gpu-doctor before the workload, then exec it.
#   GPU_DOCTOR_MIN_GPUS  GPUs the workload needs (default 1)
#   GPU_DOCTOR_PYTHON    the interpreter whose frameworks are checked (default: gpu-doctor's choice,
#                        $VIRTUAL_ENV, then $CONDA_PREFIX, then python3 on PATH)
#   GPU_DOCTOR_SKIP=1    start the workload even when the pre-flight does not pass (the report is still printed)
#
# Fail-closed, on purpose: the workload starts only when gpu-doctor exits 0 (ready, with evidence). Every
# other outcome keeps it from starting —
#   1    a check failed (the driver cannot run this CUDA, a GPU is missing, fewer GPUs than needed …);
#   4    too little evidence to call the host ready (no driver, GPU or framework could be examined: a
#        container started without --gpus / the NVIDIA runtime looks exactly like this);
#   2    gpu-doctor was called wrongly, 127 it is not installed, anything else it broke —
# because a job started on a host nobody could vouch for fails later, after it has taken its allocation
# (and, on a shared queue, someone else's). Set GPU_DOCTOR_SKIP=1 to fail open instead.
set -uo pipefail

min_gpus="${GPU_DOCTOR_MIN_GPUS:-1}"
check=(gpu-doctor check --require "gpus>=${min_gpus}")
if [ -n "${GPU_DOCTOR_PYTHON:-}" ]; then
  check+=(--python "$GPU_DOCTOR_PYTHON")
fi
"${check[@]}"
status=$?
if [ "$status" -ne 0 ]; then
  case "$status" in
    1) why="a check failed" ;;
    4) why="too little evidence to call this host ready (is the container started with GPU access?)" ;;
    127) why="gpu-doctor is not installed in this image" ;;
    *) why="gpu-doctor could not check this host (exit $status)" ;;
  esac
  if [ "${GPU_DOCTOR_SKIP:-0}" = "1" ]; then
    echo "preflight: $why; starting anyway (GPU_DOCTOR_SKIP=1)" >&2
  else
    echo "preflight: $why; not starting. Set GPU_DOCTOR_SKIP=1 to start anyway." >&2
    exit 1
  fi
fi
exec "$@"
