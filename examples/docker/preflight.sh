#!/usr/bin/env bash
# Container entrypoint: run gpu-doctor before the workload, then exec it.
#   GPU_DOCTOR_MIN_GPUS  GPUs the workload needs (default 1)
#   GPU_DOCTOR_SKIP=1    start the workload even when the pre-flight fails (the report is still printed)
set -euo pipefail

min_gpus="${GPU_DOCTOR_MIN_GPUS:-1}"
if ! gpu-doctor check --require "gpus>=${min_gpus}"; then
  if [ "${GPU_DOCTOR_SKIP:-0}" = "1" ]; then
    echo "preflight: gpu-doctor found problems; starting anyway (GPU_DOCTOR_SKIP=1)" >&2
  else
    echo "preflight: gpu-doctor found problems; not starting. Set GPU_DOCTOR_SKIP=1 to start anyway." >&2
    exit 1
  fi
fi
exec "$@"
