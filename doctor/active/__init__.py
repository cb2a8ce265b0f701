"""Active tests: run something on the GPU and record what happened (``gpu-doctor smoke``, ``gpu-doctor oom``).

The GPU work happens in a spawned child process (:mod:`doctor.active.gpu_child`) that talks to the CUDA
driver API through ctypes and prints one JSON event per line; the parent (:mod:`doctor.active.runner`, on
:func:`doctor.host.stream`) reads them with a watchdog, so a hung kernel or driver becomes a finding instead
of a hung doctor, and the child dies with the doctor. What a test measured becomes facts
(:mod:`doctor.model.facts_active`, ``Facts.active``), and nothing here judges them: the registered checks of
:mod:`doctor.checks.active` do (one judge per test there), so a snapshot replays to the same findings. The
runners never import the checks, the engine or the pipeline. Nothing here imports a framework;
:mod:`doctor.active.frameworks` runs those in the target environment.
"""
