"""Run by gpu-validate in each candidate interpreter (its path as given, the argument): one JSON line saying
whether a CUDA torch is importable.

Plain syntax: the interpreter may be old. It never creates a CUDA context (is_available asks NVML / the driver
for a device count only), so it cannot disturb the measurements that follow.
"""

import json
import sys

out = {"candidate": sys.argv[1] if len(sys.argv) > 1 else None, "executable": sys.executable,
       "prefix": sys.prefix, "python": sys.version.split()[0]}
try:
    import torch

    out["torch"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["is_available"] = bool(torch.cuda.is_available())
    if out["is_available"]:
        out["device_count"] = torch.cuda.device_count()
        out["device0"] = torch.cuda.get_device_name(0)
        out["arch_list"] = torch.cuda.get_arch_list()
except Exception as exc:  # an ImportError, or a broken install: both are answers
    out["error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
