"""The ordered registry of checks. Report order, ``--list-checks`` and docs/checks.md read it."""

from __future__ import annotations

from doctor.checks import driver, environment, gpus, toolkit
from doctor.registry import Check

REGISTRY: list[Check] = [
    *driver.CHECKS,
    *gpus.CHECKS,
    *toolkit.CHECKS,
    *toolkit.CUDNN_CHECKS,
    *environment.FRAMEWORK_CHECKS,
    *environment.ENV_CHECKS,
]


def by_id(check_id: str) -> Check | None:
    return next((c for c in REGISTRY if c.id == check_id), None)
