"""PTX kernels of the smoke test and the OOM probe (package data; loaded by doctor.active.gpu_child)."""
