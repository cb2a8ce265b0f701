"""Fix intents: what a check says should change, as data — never prose, never argv.

The kinds are the remedy vocabulary's (:mod:`doctor.model.remedy`, where each is defined once); this module is
the part of it a check may attach to a finding.

A check that knows a remedy attaches one or more intents to its finding. The *kinds* of intent on one finding
are alternatives, best first: the planner (:mod:`doctor.fixplan`) chooses the first kind it can carry out here
("upgrade the driver", else "install a torch build this driver runs") and then does every intent of that kind
(reinstall the framework in each environment the finding names). Each intent names what it is
about — the Python environment, the package, the GPU, the kernel — so the planner never has to read a
finding's title or branch on its check id, and an environment that no intent names is left alone.

The planner weighs every intent against the facts and the matrix at once and renders one plan; every surface
(the fix line under a finding, ``explain``, the TUI, ``fix``, ``plan``) shows that plan.
"""

from __future__ import annotations

from doctor.model.remedy import (
    INTENTS,
    AttachGpu,
    BlacklistNouveau,
    InstallContainerToolkit,
    InstallCudaCompat,
    InstallCudnn,
    InstallDriverBranch,
    InstallToolkit,
    Intent,
    LoadModule,
    Manual,
    OnlyIfWanted,
    RebuildDkms,
    ReinstallFramework,
    ReloadDriver,
    UnsetEnvVar,
)
from doctor.model.remedy import intent_from_dict as from_dict

__all__ = ["INTENTS", "AttachGpu", "BlacklistNouveau", "InstallContainerToolkit", "InstallCudaCompat", "InstallCudnn",
           "InstallDriverBranch", "InstallToolkit", "Intent", "LoadModule", "Manual", "OnlyIfWanted", "RebuildDkms",
           "ReinstallFramework", "ReloadDriver", "UnsetEnvVar", "from_dict"]
