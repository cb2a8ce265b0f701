"""Container or not, from several signals: /.dockerenv alone does not make a container (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sysroot import build

from doctor.host import Host
from doctor.probes.hostinfo import detect_container

VM_ROOT = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n22 27 0:21 / /proc rw,relatime - proc proc rw\n"
DOCKER_ROOT = ("612 540 0:52 / / rw,relatime master:292 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/"
               "ABC:/var/lib/docker/overlay2/l/DEF,upperdir=/var/lib/docker/overlay2/x/diff\n")
PODMAN_ROOT = ("700 600 0:60 / / rw - overlay overlay rw,lowerdir=/var/lib/containers/storage/overlay/l/A,"
               "upperdir=/var/lib/containers/storage/overlay/b/diff\n")
CGROUP_V2 = "0::/\n"


@pytest.mark.parametrize(("files", "expected"), [
    # A VM (firecracker, a cloud image) built from a Docker image: the marker file, its own disk and init.
    ({"/.dockerenv": "", "/proc/self/mountinfo": VM_ROOT, "/proc/1/cgroup": CGROUP_V2}, None),
    # Docker with cgroup v2 and a private cgroup namespace: only the overlay root and the marker tell.
    ({"/.dockerenv": "", "/proc/self/mountinfo": DOCKER_ROOT, "/proc/1/cgroup": CGROUP_V2}, "docker"),
    ({"/proc/self/mountinfo": DOCKER_ROOT, "/proc/1/cgroup": CGROUP_V2}, "docker"),
    ({"/proc/self/mountinfo": PODMAN_ROOT}, "podman"),
    ({"/proc/1/cgroup": "12:pids:/docker/0123abcd\n"}, "docker"),
    ({"/proc/1/cgroup": "0::/kubepods/burstable/pod1/abc\n", "/.dockerenv": ""}, "kubernetes"),
    ({"/proc/1/environ": b"PATH=/bin\0container=podman\0", "/proc/self/mountinfo": VM_ROOT}, "podman"),
    ({"/proc/1/environ": b"container=systemd-nspawn\0"}, "systemd-nspawn"),
    ({"/.dockerenv": ""}, "docker"),  # nothing else readable: the marker is all there is
    ({"/proc/self/mountinfo": VM_ROOT, "/proc/1/cgroup": CGROUP_V2}, None),
])
def test_container_kind_from_signals(tmp_path: Path, files: dict, expected: str | None) -> None:
    root = build(tmp_path, files)
    assert detect_container(Host(root=root, env={})) == expected


def test_a_vm_built_from_a_docker_image_gets_its_kernel_module_checks(tmp_path: Path) -> None:
    """End to end: no 'docker container' finding and no container skip for such a VM."""
    import json

    from doctor.cli import main

    root = build(tmp_path, {"/.dockerenv": "", "/proc/self/mountinfo": VM_ROOT, "/proc/1/cgroup": CGROUP_V2,
                            "/etc/os-release": 'ID=debian\nVERSION_ID="12"\n'})
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        main(["check", "--root", str(root), "--json"])
    report = json.loads(out.getvalue())
    assert report["facts"]["host"]["container"] is None
    assert "container.no_gpu_passthrough" not in {f["code"] for f in report["findings"]}
