"""The ordered registry of checks. Report order, ``--list-checks`` and docs/checks.md read it."""

from __future__ import annotations

from doctor.checks import active, compat, driver, environment, gpus, image, lifecycle, toolkit
from doctor.registry import Check

REGISTRY: list[Check] = [
    *driver.CHECKS,
    *compat.CHECKS_DRIVER,
    *lifecycle.CHECKS,
    *gpus.CHECKS,
    *toolkit.CHECKS,
    *compat.CHECKS_TOOLKIT,
    *toolkit.CUDNN_CHECKS,
    *compat.CHECKS_CUDNN,
    *environment.FRAMEWORK_CHECKS,
    *compat.CHECKS_FRAMEWORK,
    *environment.ENV_CHECKS,
    *image.CHECKS,
    *compat.CHECKS_IMAGE,
    *active.CHECKS,
]


def by_id(check_id: str) -> Check | None:
    return next((c for c in REGISTRY if c.id == check_id), None)
