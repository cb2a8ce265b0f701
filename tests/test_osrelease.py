"""`check` reads os-release without importing distro (~10 ms of every run: it imports logging), and reports what
distro reported: the same ID, version and name on real files and on generated ones, and distro's own answer
(through the host probe) wherever the file is not one the fast reading can answer for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import distro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.host import Host
from doctor.probes import hostinfo, osrelease
from doctor.probes.base import Recorder

DATA = Path(__file__).resolve().parent / "data" / "os-release"
REPO = Path(__file__).resolve().parent.parent


def _by_distro(root: Path) -> dict[str, str | None]:
    info = distro.LinuxDistribution(include_lsb=False, include_uname=False, include_oslevel=False,
                                    root_dir=str(root))
    data = info.os_release_info()
    return {"ID": info.id() or None, "VERSION_ID": data.get("version_id"), "PRETTY_NAME": data.get("pretty_name")}


def _root(tmp_path: Path, content: bytes, where: str = "etc/os-release") -> Path:
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / where).write_bytes(content)
    return tmp_path


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.iterdir()))
def test_real_os_release_files_read_as_distro_reads_them(tmp_path: Path, name: str) -> None:
    root = _root(tmp_path, (DATA / name).read_bytes())
    fast = osrelease.read(Host(root=root))
    assert fast is not None and fast == _by_distro(root)


_value = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_quoted = st.one_of(_value, _value.map(lambda v: f'"{v}"'), _value.map(lambda v: f"'{v}'"),
                    _value.map(lambda v: v.replace(" ", "\\ ")))
_key = st.sampled_from(["ID", "id", "Id", "VERSION_ID", "PRETTY_NAME", "NAME", "VERSION", "ID_LIKE", "# ID",
                        "VERSION_CODENAME"])
_line = st.one_of(st.tuples(_key, _quoted).map(lambda kv: f"{kv[0]}={kv[1]}"), _value, st.just(""))
_ids = st.sampled_from(["ubuntu", "OL", "ol", "opensuse-leap", "Red Hat", "debian", "", '""', "rhel "])


@settings(max_examples=300, deadline=None)
@given(lines=st.lists(_line, max_size=8), os_id=_ids, newline=st.sampled_from(["\n", "\r\n", "\r"]),
       where=st.sampled_from(["etc/os-release", "usr/lib/os-release"]))
def test_generated_os_release_files_read_as_distro_reads_them_or_left_to_it(
        tmp_path_factory: pytest.TempPathFactory, lines: list[str], os_id: str, newline: str, where: str) -> None:
    root = _root(tmp_path_factory.mktemp("osr"), newline.join([*lines, f"ID={os_id}", *lines]).encode(), where)
    try:
        expected = _by_distro(root)
    except (OSError, UnicodeDecodeError, ValueError):
        expected = None  # distro raises: the probe records why, through distro, as before
    fast = osrelease.read(Host(root=root))
    if fast is not None:
        assert fast == expected
    # whatever the fast reading answered, the host probe reports distro's answer (or distro's error)
    rec = Recorder()
    reported = hostinfo._os_release(Host(root=root), rec, fast)
    assert reported == (expected if expected is not None else {})


def test_an_os_release_without_id_or_not_utf8_is_distro_s_to_read(tmp_path: Path) -> None:
    assert osrelease.read(Host(root=_root(tmp_path / "a", b'NAME="Some Linux"\nVERSION_ID=1\n'))) is None
    assert osrelease.read(Host(root=_root(tmp_path / "b", b"ID=caf\xe9\n"))) is None
    assert osrelease.read(Host(root=_root(tmp_path / "c", b'ID="unclosed\n'))) is None
    assert osrelease.read(Host(root=tmp_path / "d")) is None  # none at all


def test_check_imports_neither_distro_nor_logging_where_os_release_names_its_id() -> None:
    """What the user gains: `check` no longer imports distro, logging and traceback (~8 ms)."""
    code = ("import sys, io, contextlib\nfrom doctor.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main(['check'])\n"
            "print(sorted(m for m in ('distro', 'logging', 'traceback') if m in sys.modules))\n")
    if osrelease.read(Host()) is None:
        pytest.skip("this machine's os-release is one only distro reads")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert out.stdout.strip().splitlines()[-1] == "[]"
