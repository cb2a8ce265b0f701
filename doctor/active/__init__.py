"""Active tests: run something on the GPU and judge what happened (``gpu-doctor smoke``, ``gpu-doctor oom``).

The GPU work happens in a spawned child process (:mod:`doctor.active.gpu_child`) that talks to the CUDA
driver API through ctypes and prints one JSON event per line; the parent (:mod:`doctor.active.runner`)
reads them with a watchdog, so a hung kernel or driver becomes a finding instead of a hung doctor.
What the child measured is judged by pure functions (:mod:`doctor.active.judge`), like every check.
Nothing here imports a framework; :mod:`doctor.active.frameworks` runs those in the target environment.
"""
