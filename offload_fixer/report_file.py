"""``--report FILE``: what `offload-fixer run` found, written for `offload-fixer fix` and the
language server to read back -- the reports, the files' hashes and the lines their findings
name, the pod the run was made for (``--topology``), and with ``--confirm`` each compilation's
call as shapes and shardings, so the fixed function can be lowered again without the program's
data (for the same pod: a mesh is kept as the ids of its devices)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from offload_fixer.model import MeasuredFix, Report, Span
from offload_fixer.topology import Topology, UnknownTopology, parse_topology

if TYPE_CHECKING:
    pass

REPORT_FILE_VERSION = 1


@dataclass(frozen=True)
class AbstractCall:
    """A checked compilation's function and its arguments as shapes and shardings: enough to
    lower the function again, from its fixed source, without the program's data."""

    fun: Any
    args: tuple
    kwargs: dict
    jit_options: dict | None = None
    """The options ``jax.jit`` was given (``jax_compat.jit_options``), to jit the fixed function
    again where its jit is built inside a function; not saved in report files."""


def abstract_arguments(args: tuple) -> tuple:
    """``args`` as shapes and shardings; an array the program passed uncommitted (``jnp.ones``:
    JAX places it beside the other arguments) without its device, as JAX treats it: recorded
    on its device, it would not lower beside an argument sharded over several."""
    import jax

    def shape_of(leaf: Any) -> Any:
        if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
            committed = getattr(leaf, "committed", True)
            sharding = getattr(leaf, "sharding", None) if committed else None
            return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)
        return leaf

    return jax.tree_util.tree_map(shape_of, args)


# ---------------------------------------------------------------------------------------
# Report files (``--report FILE``), read back by the fix step
@dataclass(frozen=True)
class ReportFile:
    target: str
    jax_version: str
    reports: tuple[Report, ...]
    sources: dict[str, str]
    lines: dict[str, dict[int, tuple[str, str, str]]] = field(default_factory=dict)
    """Per source file, each line a finding names with its neighbours (before, the line,
    after) as analysed: the editor finds the line again after edits elsewhere."""
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    """``run --confirm --report``: each report's arguments, encoded (:func:`decode_call`)."""
    fixes: tuple[MeasuredFix, ...] = ()
    """``run --fix``/``--diff`` where the compiler is installed: each fix compiled, with its
    memory figures, for the editor to title the same quick fix with."""
    topology: Topology | None = None
    """``run --topology``: the pod the program saw, whose devices the calls' meshes name and
    for which ``fix --confirm`` compiles."""

    def stale_sources(self) -> list[str]:
        """Files changed (or gone) since they were analysed: fixes must not touch them."""
        return [path for path, digest in self.sources.items() if sha256_of(path) != digest]


def write_report_file(
    path: str,
    reports: Iterable[Report],
    target: str,
    sources: dict[str, str] | None = None,
    texts: dict[str, str] | None = None,
    calls: dict[int, AbstractCall] | None = None,
    fixes: Sequence[MeasuredFix] = (),
    topology: Topology | None = None,
    directory: str | None = None,
) -> None:
    """Write the reports as JSON (:func:`encode_report_file`), atomically, into ``directory``
    (the real path of the file's folder as it was checked before the run; resolved now when
    not given): a folder swapped for a symlink since raises
    :class:`~offload_fixer.resolved_paths.PathChangedError`, nothing written."""
    from offload_fixer.resolved_paths import Directory, resolve

    data = encode_report_file(reports, target, sources, texts, calls, fixes, topology)
    folder, name = os.path.split(os.path.abspath(path))
    with Directory(directory or resolve(folder)) as opened:
        opened.write_atomically(name, data)


def encode_report_file(
    reports: Iterable[Report],
    target: str,
    sources: dict[str, str] | None = None,
    texts: dict[str, str] | None = None,
    calls: dict[int, AbstractCall] | None = None,
    fixes: Sequence[MeasuredFix] = (),
    topology: Topology | None = None,
) -> bytes:
    """The reports as the JSON of a report file; ``sources`` defaults to hashing the files now,
    ``texts`` (the files as hashed) to reading them now. ``calls`` (``--confirm``): each
    report's arguments as shapes, for ``fix --confirm`` to compile the fixed functions with.
    ``fixes``: the fixes the run compiled, with their figures. ``topology``: the pod the
    program saw (``--topology``)."""
    from offload_fixer import jax_compat

    reports = list(reports)
    if sources is None:
        sources, texts = {}, {}
        for report in reports:
            for source in report_paths(report):
                data = read_source_bytes(source)
                if data is not None and source not in sources:
                    sources[source] = hashlib.sha256(data).hexdigest()
                    texts[source] = data.decode("utf-8", "replace")
    record = {
        "version": REPORT_FILE_VERSION,
        "target": target,
        "topology": None if topology is None else {"name": topology.name, "num_slices": topology.num_slices},
        "jax_version": jax_compat.installed_version(),
        "reports": [report.to_dict() for report in reports],
        "sources": dict(sorted(sources.items())),
        "lines": _named_lines(reports, texts or {}),
        "calls": {
            str(index): encoded for index, call in (calls or {}).items() if (encoded := encode_call(call)) is not None
        },
        "fixes": [fix.to_dict() for fix in fixes],
    }
    return (json.dumps(record, indent=1) + "\n").encode("utf-8")


def read_report_file(path: str) -> ReportFile:
    """A saved report; ``ValueError`` (or ``OSError``) saying what is wrong with the file. A
    FIFO or device is refused by its type before anything is read."""
    from offload_fixer.source.decoding import read_regular_file

    raw = read_regular_file(path)
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{path}: not a JSON report ({exc})") from None
    if not isinstance(data, dict) or data.get("version") != REPORT_FILE_VERSION:
        found = data.get("version") if isinstance(data, dict) else None
        raise ValueError(f"{path}: not an offload-fixer report of version {REPORT_FILE_VERSION} (found {found!r})")
    try:
        reports = data["reports"]
        sources = data.get("sources", {})
        if not isinstance(reports, list) or not isinstance(sources, dict):
            raise TypeError("'reports' must be a list and 'sources' an object")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in sources.items()):
            raise TypeError("'sources' must map file paths to sha256 strings")
        lines = data.get("lines", {})
        if not isinstance(lines, dict) or not all(isinstance(v, dict) for v in lines.values()):
            raise TypeError("'lines' must map file paths to objects of line numbers")
        calls = data.get("calls", {})
        if not isinstance(calls, dict) or not all(isinstance(v, dict) for v in calls.values()):
            raise TypeError("'calls' must map report indices to objects")
        fixes = data.get("fixes", [])
        if not isinstance(fixes, list):
            raise TypeError("'fixes' must be a list")
        target, jax_version = data["target"], data["jax_version"]
        if not isinstance(target, str) or not isinstance(jax_version, str):
            raise TypeError("'target' and 'jax_version' must be strings")
        pod = data.get("topology")
        if pod is not None and not (
            isinstance(pod, dict) and isinstance(pod.get("name"), str) and type(pod.get("num_slices")) is int
        ):
            raise TypeError("'topology' must be an object of a 'name' and a 'num_slices'")
        return ReportFile(
            target=target,
            jax_version=jax_version,
            reports=tuple(Report.from_dict(r) for r in reports),
            sources=dict(sources),
            lines={
                source: {int(line): tuple(context) for line, context in numbered.items()}
                for source, numbered in lines.items()
            },
            calls={int(index): call for index, call in calls.items()},
            fixes=tuple(MeasuredFix.from_dict(fix) for fix in fixes),
            topology=None if pod is None else parse_topology(pod["name"], pod["num_slices"]),
        )
    except UnknownTopology as exc:
        raise ValueError(f"{path}: not a valid report: 'topology': {exc}") from None
    except KeyError as exc:
        raise ValueError(f"{path}: not a valid report: missing {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: not a valid report: {exc}") from None


# ---------------------------------------------------------------------------------------
# Abstract calls in a report file: pytrees of dicts, lists and tuples over array shapes
def encode_call(call: AbstractCall) -> dict[str, Any] | None:
    """JSON for the call's arguments, or ``None`` where they hold something a file cannot
    carry (a pytree node of the user's own, a sharding over several devices that is not a
    mesh's). Each mesh the arguments are laid out on is written once, in ``meshes``: its axes,
    their types and the ids of its devices in order, which the arrays name by position."""
    meshes: list[Any] = []
    try:
        args, kwargs = _encode(call.args, meshes), _encode(call.kwargs, meshes)
    except _NotEncodable:
        return None
    encoded = {"args": args, "kwargs": kwargs}
    if meshes:
        from offload_fixer.jax_compat import mesh_axis_types

        encoded["meshes"] = [
            {
                "axes": [[name, int(size)] for name, size in mesh.shape.items()],
                "axis_types": mesh_axis_types(mesh),
                "devices": [d.id for d in mesh.devices.flat],
            }
            for mesh in meshes
        ]
    return encoded


def decode_call(data: dict[str, Any]) -> tuple[tuple, dict]:
    """The arguments of an encoded call, as ``ShapeDtypeStruct``s on this machine's device, or
    on the meshes they were laid out on, made of the devices of ``jax.devices()`` with the
    recorded ids (a pod's, seen through ``jax_compat.pod.pod_view``); :class:`MissingDevices`
    where there are no such devices."""
    meshes = [_decode_mesh(recorded) for recorded in data.get("meshes", [])]
    return tuple(_decode(data["args"], meshes)), dict(_decode(data["kwargs"], meshes))


class MissingDevices(ValueError):
    """A recorded call's mesh names devices this process does not see (the run's pod, or
    more CPU devices than this machine gives)."""


class _NotEncodable(Exception):
    pass


def _encode(value: Any, meshes: list[Any]) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {"tuple": [_encode(v, meshes) for v in value]}
    if isinstance(value, list):
        return [_encode(v, meshes) for v in value]
    if type(value) is dict and all(isinstance(k, str) for k in value):
        return {"dict": {k: _encode(v, meshes) for k, v in value.items()}}
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        sharding: Any = getattr(value, "sharding", None)
        devices = getattr(sharding, "device_set", None)
        named = type(sharding).__name__ == "NamedSharding"
        array = {
            "shape": list(value.shape),
            "dtype": str(value.dtype),
            "memory_kind": getattr(sharding, "memory_kind", None),
            "named": named,
        }
        if devices is not None and len(devices) > 1:
            if not named:
                raise _NotEncodable("a sharding over several devices that is not a mesh's")
            if sharding.mesh not in meshes:
                meshes.append(sharding.mesh)
            array["mesh"] = meshes.index(sharding.mesh)
            array["spec"] = _encode_spec(sharding.spec)
        return {"array": array}
    raise _NotEncodable(type(value).__name__)


def _encode_spec(spec: Any) -> list[Any]:
    """A ``PartitionSpec``: per dimension, no axis, an axis, or several (a list)."""
    encoded: list[Any] = []
    for entry in spec:
        if entry is None or isinstance(entry, str):
            encoded.append(entry)
        elif isinstance(entry, tuple) and all(isinstance(axis, str) for axis in entry):
            encoded.append(list(entry))
        else:
            raise _NotEncodable(f"a partition spec entry {entry!r}")
    return encoded


def _decode(value: Any, meshes: list[Any]) -> Any:
    if isinstance(value, list):
        return [_decode(v, meshes) for v in value]
    if not isinstance(value, dict):
        return value
    if "tuple" in value:
        return tuple(_decode(v, meshes) for v in value["tuple"])
    if "dict" in value:
        return {k: _decode(v, meshes) for k, v in value["dict"].items()}
    import jax

    array = value["array"]
    kind = array.get("memory_kind")
    sharding: jax.sharding.Sharding | None = None
    if "mesh" in array:
        spec = jax.sharding.PartitionSpec(*(tuple(e) if isinstance(e, list) else e for e in array["spec"]))
        sharding = jax.sharding.NamedSharding(meshes[array["mesh"]], spec, memory_kind=kind)
    elif kind and array.get("named"):  # only a NamedSharding puts the memory space in the type
        mesh = jax.sharding.Mesh(jax.devices()[:1], ("x",))
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(), memory_kind=kind)
    elif kind:
        sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind=kind)
    return jax.ShapeDtypeStruct(tuple(array["shape"]), array["dtype"], sharding=sharding)


def _decode_mesh(recorded: dict[str, Any]) -> Any:
    import jax
    import numpy as np

    from offload_fixer.jax_compat import mesh_of

    by_id = {device.id: device for device in jax.devices()}
    ids = recorded["devices"]
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise MissingDevices(
            f"its mesh is made of {len(ids)} devices and this process sees {len(by_id)}, not device {missing[0]}"
        )
    names = tuple(name for name, _ in recorded["axes"])
    sizes = tuple(size for _, size in recorded["axes"])
    return mesh_of(np.array([by_id[i] for i in ids], dtype=object).reshape(sizes), names, recorded.get("axis_types"))


def _named_lines(reports: Sequence[Report], texts: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """The lines the reports' spans name, with one neighbour on each side, per file."""
    named: dict[str, dict[str, list[str]]] = {}
    split = {source: text.splitlines() for source, text in texts.items()}
    for report in reports:
        for d in report.diagnostics:
            places = [
                (s.path, s.line)
                for s in (d.span, d.return_span, d.origin.span if d.origin else None, *(step.span for step in d.trace))
                if s is not None
            ]
            if d.function is not None and d.function.path and d.function.line:
                places.append((d.function.path, d.function.line))
            for source, number in places:
                lines = split.get(source)
                if not lines or not 1 <= number <= len(lines):
                    continue
                at = number - 1
                context = [lines[at - 1] if at > 0 else "", lines[at], lines[at + 1] if at + 1 < len(lines) else ""]
                named.setdefault(source, {})[str(number)] = context
    return {source: dict(sorted(lines.items(), key=lambda kv: int(kv[0]))) for source, lines in sorted(named.items())}


def read_source_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError:
        return None


def report_paths(report: Report) -> list[str]:
    """Every source file a report points at: the function, origins, spans, trace steps."""
    spans: list[Span | None] = []
    paths = [report.function.path] if report.function and report.function.path else []
    for d in report.diagnostics:
        if d.function and d.function.path:
            paths.append(d.function.path)
        spans += [d.span, d.return_span, d.origin.span if d.origin else None]
        spans += [step.span for step in d.trace]
    paths += [s.path for s in spans if s is not None]
    return list(dict.fromkeys(p for p in paths if p and not p.startswith("<")))


def sha256_of(path: str) -> str | None:
    data = read_source_bytes(path)
    return None if data is None else hashlib.sha256(data).hexdigest()
