"""The facts snapshot (schema ``gpu-doctor.facts/v1``): everything the probes learned, nothing judged.

Facts are immutable dataclasses. A value that could not be learned is ``None`` — never a guess —
and the reason lands in :attr:`Facts.errors`; where a value came from lands in :attr:`Facts.sources`
(``"driver.userspace": "nvml:nvmlSystemGetDriverVersion"``). The JSON form is a public contract,
described by ``doctor/schemas/facts-v1.json`` which is generated from these classes
(``scripts/gen_schema.py``) and checked on every write and load.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import field
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar, Union, overload

if TYPE_CHECKING:  # the active tests' facts are read only from a snapshot that has them (see _hints)
    from doctor.model.facts_active import ActiveFacts
from doctor.model.records import dataclass
from doctor.model.versions import cuda_version, cudnn_version
from doctor.safeio import InputError, load_json, package_data

FACTS_SCHEMA = "gpu-doctor.facts/v1"


@dataclass(frozen=True)
class ContainerToolkit:
    """The NVIDIA Container Toolkit: installed or not, its version, the engines configured for it."""
    installed: bool | None = None
    version: str | None = None
    engines: list[str] = field(default_factory=list)
    runtime_configured: bool | None = None


@dataclass(frozen=True)
class HostInfo:
    """The operating system, kernel and architecture, and whether this is a container, WSL or a VM."""
    os_id: str | None = None
    os_version: str | None = None
    os_pretty: str | None = None
    kernel: str | None = None
    arch: str | None = None
    glibc: str | None = None
    gcc: str | None = None
    container: str | None = None
    wsl: bool | None = None
    container_toolkit: ContainerToolkit | None = None
    pci_nvidia_gpus: int | None = None  # NVIDIA display devices on the PCI bus; None when sysfs is unreadable


@dataclass(frozen=True)
class Package:
    """One installed package of the driver (dpkg, rpm, pacman or the .run installer)."""
    name: str
    version: str | None = None
    manager: str | None = None  # dpkg | rpm


@dataclass(frozen=True)
class XidEvent:
    """One Xid error the kernel log holds for a GPU."""
    xid: int
    pci_bus_id: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class DriverInfo:
    """The NVIDIA driver: its kernel module, its user space, their packages and what the driver reports."""
    kernel_module: str | None = None
    module_loaded: bool | None = None
    userspace: str | None = None
    cuda_driver_api: str | None = None
    smi_cuda_version: str | None = None  # nvidia-smi's "CUDA Version" (XML <cuda_version>): the driver's CUDA
    cuda_init_error: str | None = None
    nvml_error: str | None = None
    module_flavor: str | None = None  # open | proprietary
    nouveau_loaded: bool | None = None
    secure_boot: bool | None = None
    running_kernel: str | None = None
    module_for_running_kernel: bool | None = None
    next_boot_kernel: str | None = None
    module_for_next_boot_kernel: bool | None = None
    packages: list[Package] = field(default_factory=list)
    device_nodes: list[str] = field(default_factory=list)
    xid_events: list[XidEvent] = field(default_factory=list)


@dataclass(frozen=True)
class GpuProcess:
    """A process using a GPU."""
    pid: int | None = None
    name: str | None = None
    used_mib: int | None = None


@dataclass(frozen=True)
class MigDevice:
    """A MIG instance of a GPU."""
    index: int | None = None
    uuid: str | None = None
    name: str | None = None
    memory_total_mib: int | None = None


@dataclass(frozen=True)
class Gpu:
    """One GPU, as NVML, nvidia-smi or a report describes it."""
    index: int | None = None
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    pci_device_id: str | None = None
    compute_capability: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    mig_mode: bool | None = None
    persistence_mode: bool | None = None
    ecc_uncorrected: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    temperature_c: int | None = None
    power_draw_w: float | None = None
    utilization_pct: int | None = None  # GPU busy time over the last sample period (NVML / nvidia-smi)
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    throttle_reasons: list[str] | None = None  # active slowdown reasons; None when unknown
    processes: list[GpuProcess] = field(default_factory=list)
    mig_devices: list[MigDevice] = field(default_factory=list)
    source: str | None = None  # nvml | nvidia-smi | pci

    def __post_init__(self) -> None:
        # One representation of the PCI device id, whichever source gave it: NVML and sysfs give 0x233010DE,
        # nvidia-smi -q -x 233010DE (the H100 of issue 24 had both, in one report and its nvidia-smi).
        d = self.pci_device_id
        if isinstance(d, str) and len(d) in (8, 10) and d[:-8] in ("", "0x", "0X") \
                and all(c in "0123456789abcdefABCDEF" for c in d[-8:]):
            object.__setattr__(self, "pci_device_id", "0x" + d[-8:].upper())


@dataclass(frozen=True)
class Toolkit:
    """One CUDA toolkit found on the machine (a directory, a distribution package or pip wheels)."""
    root: str
    version: str | None = None
    nvcc_version: str | None = None
    source: str | None = None


@dataclass(frozen=True)
class LibRef:
    """A library or program the loader or PATH resolves, with its version."""
    path: str
    version: str | None = None
    stub: bool | None = None


@dataclass(frozen=True)
class LoaderInfo:
    """What the dynamic loader and PATH resolve: nvcc, libcudart, libcudnn, libcuda."""
    nvcc_on_path: LibRef | None = None
    libcudart: LibRef | None = None
    libcudnn: LibRef | None = None
    libcuda: LibRef | None = None


@dataclass(frozen=True)
class Cudnn:
    """One cuDNN found: a header, a library or a pip wheel."""
    version: str | None = None
    location: str | None = None
    source: str | None = None  # header | library | pip | conda


@dataclass(frozen=True)
class DeepResult:
    """What a framework answered when imported in its environment (`--deep`)."""
    is_available: bool | None = None
    device_count: int | None = None
    error: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    arch_list: list[str] | None = None

    def __post_init__(self) -> None:
        # One representation of a version: torch answers cuDNN as an integer (92400), CuPy its CUDA runtime
        # (13020), and a snapshot of an earlier release may hold either undecoded.
        if self.cudnn is not None:
            object.__setattr__(self, "cudnn", cudnn_version(self.cudnn))
        if self.cuda is not None:
            object.__setattr__(self, "cuda", cuda_version(self.cuda))


@dataclass(frozen=True)
class PyPackage:
    """One installed Python package (a framework or an NVIDIA wheel) of an environment."""
    name: str
    version: str | None = None
    cuda: str | None = None
    cudnn: str | None = None
    cpu_only: bool | None = None
    arch_list: list[str] | None = None
    loaded_libraries: list[str] | None = None
    deep: DeepResult | None = None

    def __post_init__(self) -> None:
        if self.cuda is not None:  # one representation of a CUDA version (13020 -> 13.2), as DeepResult's
            object.__setattr__(self, "cuda", cuda_version(self.cuda))


@dataclass(frozen=True)
class PythonEnv:
    """One Python environment whose frameworks are checked."""
    executable: str
    version: str | None = None
    origin: str | None = None  # --python | VIRTUAL_ENV | CONDA_PREFIX | PATH
    error: str | None = None
    packages: list[PyPackage] = field(default_factory=list)


@dataclass(frozen=True)
class ProbeError:
    """Why a probe could not learn something."""
    probe: str
    reason: str


ENV_NAMES = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "LD_LIBRARY_PATH",
    "PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CONDA_PREFIX",
    "VIRTUAL_ENV",
)


@dataclass(frozen=True)
class Facts:
    """What the probes learned about one machine, or what a snapshot or report recorded (gpu-doctor.facts/v1)."""
    schema: str = FACTS_SCHEMA
    collected_at: str | None = None
    host: HostInfo = field(default_factory=HostInfo)
    driver: DriverInfo = field(default_factory=DriverInfo)
    gpus: list[Gpu] = field(default_factory=list)
    toolkits: list[Toolkit] = field(default_factory=list)
    loader: LoaderInfo = field(default_factory=LoaderInfo)
    cudnn: list[Cudnn] = field(default_factory=list)
    python_envs: list[PythonEnv] = field(default_factory=list)
    env: dict[str, str | None] = field(default_factory=dict)
    active: ActiveFacts | None = None  # what `smoke` / `oom` measured (doctor/model/facts_active.py); None: no test ran
    errors: list[ProbeError] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any) -> Facts:
        """Build facts from JSON data; raises :class:`FactsError` when it is not a v1 snapshot."""
        if not isinstance(data, dict):
            raise FactsError("a facts snapshot is a JSON object")
        schema = data.get("schema")
        if schema != FACTS_SCHEMA:
            raise FactsError(f"schema is {schema!r}, expected {FACTS_SCHEMA!r}")
        problems = validate(data, facts_schema())
        if problems:
            raise FactsError(problems[0])
        return _build(cls, data)


class FactsError(ValueError):
    """A snapshot that cannot be read as gpu-doctor facts v1."""


def load_facts(text: str | bytes) -> Facts:
    """Facts from a snapshot's text; :class:`FactsError` (one line) for anything that is not one.

    The JSON is read with :func:`doctor.safeio.load_json`: numbers too long to print, NaN and
    Infinity, and nesting deeper than the stack are refused there, so no later step meets them.
    """
    try:
        data = load_json(text)
    except InputError as exc:
        raise FactsError(str(exc)) from None
    return Facts.from_dict(data)


# --- typed conversion -------------------------------------------------------------------------

T = TypeVar("T")


@overload
def _build(tp: type[T], value: Any) -> T: ...
@overload
def _build(tp: Any, value: Any) -> Any: ...


def _build(tp: Any, value: Any) -> Any:
    """``value`` (validated against the schema first) as type ``tp``: a class gives an instance of it."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if value is None else _build(args[0], value)
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_build(item, v) for v in value]
    if origin is dict:
        _k, item = typing.get_args(tp)
        return {k: _build(item, v) for k, v in value.items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        hints = _hints(tp)
        kwargs = {f.name: _build(hints[f.name], value[f.name]) for f in dataclasses.fields(tp) if f.name in value}
        return tp(**kwargs)
    if tp is float and isinstance(value, int):
        return float(value)
    return value


@cache
def _hints(tp: type) -> dict[str, Any]:
    if tp is Facts:  # ActiveFacts lives in its own module, imported when a snapshot is read, not for `check`
        from doctor.model.facts_active import ActiveFacts

        return typing.get_type_hints(tp, localns={"ActiveFacts": ActiveFacts})
    return typing.get_type_hints(tp)


# --- JSON Schema ------------------------------------------------------------------------------


def schema_for(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a facts type (used by scripts/gen_schema.py to write the shipped file)."""
    if tp is Any:
        return {}
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        inner = schema_for(args[0], defs)
        if not inner:
            return inner
        if "type" in inner and isinstance(inner["type"], str):
            return {**inner, "type": [inner["type"], "null"]}
        return {"anyOf": [inner, {"type": "null"}]}
    if origin is list:
        return {"type": "array", "items": schema_for(typing.get_args(tp)[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": schema_for(typing.get_args(tp)[1], defs)}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # placeholder against recursion
            hints = _hints(tp)
            defs[name] = {
                "type": "object",
                "properties": {f.name: schema_for(hints[f.name], defs) for f in dataclasses.fields(tp)},
                # Within v1 a field added later is optional on read: only fields without a default are required,
                # so a snapshot written before a field existed loads with that field unknown.
                "required": [f.name for f in dataclasses.fields(tp)
                             if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING],
            }
        return {"$ref": f"#/$defs/{name}"}
    return {str: {"type": "string"}, int: {"type": "integer"}, float: {"type": "number"},
            bool: {"type": "boolean"}}[tp]


def generate_facts_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    schema_for(Facts, defs)
    top = defs.pop("Facts")
    top["properties"]["schema"] = {"const": FACTS_SCHEMA}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/nvgpu-doctor/schemas/facts-v1.json",
        "title": "gpu-doctor facts snapshot, version 1",
        **top,
        "$defs": dict(sorted(defs.items())),
    }


@cache
def facts_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(package_data("doctor", "schemas/facts-v1.json").decode("utf-8"))
    return schema


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
    "object": (dict,),
    "array": (list,),
}


def validate(value: Any, schema: dict[str, Any], root: dict[str, Any] | None = None, where: str = "$") -> list[str]:
    """A small JSON Schema validator for the keywords our schemas use; returns the problems found.

    The full ``jsonschema`` package is a test dependency only: it costs more start-up time than
    the whole check, and the tests assert both agree on our schemas.
    """
    root = root if root is not None else schema
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return validate(value, root["$defs"][name], root, where)
    if "const" in schema:
        return [] if value == schema["const"] else [f"{where}: must be {schema['const']!r}"]
    if "anyOf" in schema:
        for sub in schema["anyOf"]:
            if not validate(value, sub, root, where):
                return []
        return [f"{where}: matches none of the allowed forms"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} is not one of {schema['enum']}"]
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        ok = any(
            isinstance(value, _JSON_TYPES[n]) and not (n in ("integer", "number") and isinstance(value, bool))
            for n in names
        )
        if not ok:
            return [f"{where}: expected {' or '.join(names)}, got {type(value).__name__}"]
    problems: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{where}: missing {key!r}")
        for key, sub in value.items():
            if key in props:
                problems += validate(sub, props[key], root, f"{where}.{key}")
            elif isinstance(schema.get("additionalProperties"), dict):
                problems += validate(sub, schema["additionalProperties"], root, f"{where}.{key}")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += validate(item, schema["items"], root, f"{where}[{i}]")
    return problems
