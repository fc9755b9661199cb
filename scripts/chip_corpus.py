"""The chip as the judge: a corpus of programs, and each fix the tool writes, run on an attached
accelerator in one process, recorded for CI (which has none) to hold the tool's predictions to.

Two steps, on two machines:

``prepare DIR`` (any machine, CPU): copies the corpus into DIR (the fix-quality programs, the
examples) with each program's fixed variant as ``offload-fixer`` writes it
(``scripts/fix_quality.py --save-fixed``), and a ``manifest.json`` holding what the tool said of
each: the compile outcome it predicts for the TPU, whether it writes a fix and the fix's cost
line (HBM from the compiler's memory analysis, bytes moved per call), the jitted functions, the
intended host outputs, and the outputs of the unfixed program on the CPU.

``run DIR --out RECORD`` (the machine with the chip; runs on CPU too, to test it): one process.
Per program and variant: the verdict (``ok``, or the error's type and first line: error 1200
raised at compile as ``JaxRuntimeError``), the outputs (a digest, and per leaf its shape, dtype,
memory kind, sum and first values, enough to compare with ``allclose``), the compiler's
``memory_analysis()`` of each jitted function the program calls (never the allocator's peak,
which leaves temporaries out) and its median step time, with the JAX, jaxlib and libtpu
versions and the device kind. A program the tool predicts aborts the compiler is not run (an
abort would end the process); the record says so. The record is written after each program,
so whatever ends the run leaves what was measured.

    .venv/bin/python scripts/chip_corpus.py prepare /tmp/chip-corpus
    python3 scripts/chip_corpus.py run /tmp/chip-corpus --out tests/chip/record.json
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import hashlib
import importlib.util
import io
import itertools
import json
import os
import runpy
import shutil
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUALITY = ROOT / "tests" / "fixes" / "quality"
LARGE = ROOT / "tests" / "chip" / "programs"
"""Programs at the sizes offload is for, lowered only on the CPU (``main()``), run on the chip."""
EXAMPLES = ROOT / "examples"
FIRST_VALUES = 8
_names = itertools.count()


# ---------------------------------------------------------------------------------------
# Outputs: a digest and a summary that allclose can compare
def summarise(outputs: Any) -> dict[str, Any]:
    """The outputs' pytree as leaves, each with its shape, dtype, memory kind, sum and first
    values, and one digest of all their bytes."""
    import jax
    import numpy as np

    paths, treedef = jax.tree_util.tree_flatten_with_path(outputs)
    digest = hashlib.sha256(str(treedef).encode())
    summary = []
    for path, leaf in paths:
        sharding = getattr(leaf, "sharding", None)
        value = np.asarray(jax.device_get(leaf))
        digest.update(value.tobytes())
        flat = value.reshape(-1)
        numeric = np.issubdtype(value.dtype, np.number) or value.dtype == np.bool_
        summary.append(
            {
                "path": jax.tree_util.keystr(path),
                "shape": list(value.shape),
                "dtype": str(value.dtype),
                "memory_kind": getattr(sharding, "memory_kind", None),
                "sum": float(np.sum(flat, dtype=np.float64)) if numeric else None,
                "first": [float(v) for v in flat[:FIRST_VALUES]] if numeric else [],
            }
        )
    return {"digest": digest.hexdigest(), "leaves": summary}


def same_numbers(a: dict[str, Any], b: dict[str, Any], rtol: float = 1e-4, atol: float = 1e-5) -> bool:
    """Whether two :func:`summarise` records hold the same numbers (``allclose`` on the sums and
    the first values of each leaf, shapes and dtypes equal)."""
    import math

    if len(a["leaves"]) != len(b["leaves"]):
        return False

    def close(x: float | None, y: float | None, scale: float = 1.0) -> bool:
        if x is None or y is None:
            return x is y
        return math.isclose(x, y, rel_tol=rtol, abs_tol=atol * scale)

    for left, right in zip(a["leaves"], b["leaves"]):
        if left["shape"] != right["shape"] or left["dtype"] != right["dtype"]:
            return False
        size = max(1, math.prod(left["shape"]))
        if not close(left["sum"], right["sum"], size):
            return False
        if len(left["first"]) != len(right["first"]) or not all(
            close(x, y) for x, y in zip(left["first"], right["first"])
        ):
            return False
    return True


# ---------------------------------------------------------------------------------------
# prepare (CPU)
def prepare(directory: Path, programs: list[str]) -> None:
    """The corpus in ``directory``: each program, its fixed variant (or, where the tool refused
    every candidate, the first one unchecked: the chip judges the refusal), and the manifest."""
    directory.mkdir(parents=True, exist_ok=True)
    fixed = directory / "fixed"
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", "--xla_force_host_platform_device_count=8"),
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, str(ROOT / "scripts" / "fix_quality.py"), "--strategy", "auto"]
    entries = []
    rows_file = directory / "quality.json"
    names = [n for n in programs if (QUALITY / f"{n}.py").exists()]
    if names or not programs:
        subprocess.run(
            [*command, "--json", str(rows_file), "--save-fixed", str(fixed), *names], check=False, env=env, cwd=ROOT
        )
        entries += [_entry(row, QUALITY, directory, fixed) for row in json.loads(rows_file.read_text())]
    for large in sorted(LARGE.glob("*.py")):
        if not programs or large.stem in programs:
            done = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "judge-large", str(large), str(directory)],
                env={**env, "XLA_FLAGS": ""},
                cwd=ROOT,
                capture_output=True,
                text=True,
            )
            entries.append(
                json.loads(done.stdout.splitlines()[-1])
                if done.returncode == 0
                else {"program": large.stem, "kind": "large", "error": done.stderr[-2000:]}
            )
    for example in sorted(EXAMPLES.glob("*.py")):
        entries.append(_prepare_example(example, directory, env))
    for package in sorted(p.parent for p in EXAMPLES.glob("training/*/__main__.py")):
        entries.append(_prepare_package(package, directory, env))
    shutil.copy(QUALITY / "quality_shardings.py", directory / "quality_shardings.py")
    (directory / "manifest.json").write_text(json.dumps(entries, indent=1))


def _entry(row: dict[str, Any], corpus: Path, directory: Path, fixed: Path) -> dict[str, Any]:
    """A fix-quality row as the manifest keeps it, its files copied into ``directory``."""
    name = row["program"]
    source = corpus / f"{name}.py"
    shutil.copy(source, directory / f"{name}.py")
    entry = {
        "program": name,
        "kind": "quality" if corpus == QUALITY else "large",
        "source_sha256": _sha(source),
        "functions": row.get("functions", []),
        "predicted": row.get("predicted", {}),
        "intended_host_outputs": row.get("intended_host_outputs", []),
        "fix": row["fix"],
        "why": row["why"],
        "summary": row.get("summary", ""),
        "hbm_after": row.get("hbm_after"),
        "hbm_no_offload": row.get("hbm_no_offload"),
        "moved": row.get("moved"),
        "cpu_outputs": row.get("cpu_outputs"),
        "variants": _variants(source),
    }
    for variant in ("fixed", "refused"):
        made = fixed / (f"{name}.py" if variant == "fixed" else f"{name}.refused.py")
        if made.exists():
            shutil.copy(made, directory / f"{name}.{variant}.py")
            entry[f"{variant}_sha256"] = _sha(made)
    if "fixed_sha256" in entry and "donate_arg" in (directory / f"{name}.fixed.py").read_text():
        aborts = _aborts_on_one_device(directory / f"{name}.fixed.py")
        if aborts is not None:
            entry["predicted"] = {**entry["predicted"], "fixed": "aborted"}
            entry["aborts"] = aborts
    return entry


def _aborts_on_one_device(program: Path) -> str | None:
    """Why ``program`` would abort the process with one device, as the chip has (``None``
    where it would not), in the words of ``offload-fixer run``, which stops a program at such a
    call: the fix is verified on the corpus's eight-device meshes, and on one device JAX may
    give a donated host buffer to another output, which PjRt aborts on returning (not on every
    run: the CPU aborted 3 runs of 4 of one program); the chip's run of the corpus is one
    process."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=1"}
    done = subprocess.run(
        [sys.executable, "-m", "offload_fixer", "run", "--exit-zero", program.name],
        cwd=program.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    said = [line for line in done.stderr.splitlines() if "would abort the process" in line]
    return said[0].split(": ", 1)[-1][:600] if said else None


def judge_large(source: Path, directory: Path) -> dict[str, Any]:
    """What the tool says of a program at the size offload is for, run here only as far as its
    ``main()`` lowers it: each finding, the compiler's verdict on the program (deviceless), the
    verification stage's choice (the fix written, or why none is), and the first candidate plan
    unchecked (``NAME.refused.py``), which the chip judges too."""
    from offload_fixer.fixes import apply_plans, plan_fixes
    from offload_fixer.fixes.candidates import candidate_plans
    from offload_fixer.runner import run_program
    from offload_fixer.verify.stage import Verifier

    copy = directory / source.name
    shutil.copy(source, copy)
    with contextlib.redirect_stdout(io.StringIO()):
        result = run_program(str(copy), [], target="tpu", confirm=True)
    reports = [r for r in result.reports if r.function is not None]
    diagnostics = [d for r in reports for d in r.diagnostics]
    plans = [p for p in plan_fixes(diagnostics, "auto", reports=reports) if p.path == str(copy)]
    verifier = Verifier(result.reports, result.calls, "tpu")
    alternatives = candidate_plans(diagnostics, "auto", reports=reports, eligible=lambda plan: plan.safety == "safe")
    chosen, _ = verifier.choose_file(str(copy), plans, False, alternatives) if plans else (None, [])
    entry: dict[str, Any] = {
        "program": source.stem,
        "kind": "large",
        "source_sha256": _sha(source),
        "functions": list(dict.fromkeys(r.function.name for r in reports if r.diagnostics)),
        "findings": sorted({d.code for d in diagnostics}),
        "predicted": {"original": _worst([r.predicted.outcome for r in reports if r.predicted])},
        "compiler": [
            r.xla.message.splitlines()[0] if r.xla and r.xla.message else "compiled" for r in reports if r.xla
        ],
        "intended_host_outputs": [],
        "variants": _variants(source),
        "notes": list(verifier.notes),
    }
    if chosen is not None and chosen.error is None and chosen.changed:
        (directory / f"{source.stem}.fixed.py").write_text(chosen.new_text)
        entry.update(
            fix="fixed", summary="; ".join(verifier.notes), predicted={**entry["predicted"], "fixed": "compiled"}
        )
    else:
        entry.update(fix="left", why=str(chosen.error) if chosen is not None and chosen.error else "no plan")
        unchecked = apply_plans(plans, write=False)[0] if plans else None
        if unchecked is not None and unchecked.error is None and unchecked.changed:
            (directory / f"{source.stem}.refused.py").write_text(unchecked.new_text)
            entry["refused_sha256"] = hashlib.sha256(unchecked.new_text.encode()).hexdigest()
    return entry


def _worst(outcomes: list[str]) -> str:
    return next((o for o in ("aborted", "rejected") if o in outcomes), "compiled")


def _variants(source: Path) -> dict[str, dict[str, str]]:
    """A program's ``CHIP_VARIANTS``: more runs of the original, each under its environment
    (the same model without its offload, to measure what the offload saves)."""
    import ast

    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "CHIP_VARIANTS" for t in node.targets
        ):
            return dict(ast.literal_eval(node.value))
    return {}


def _prepare_example(example: Path, directory: Path, env: dict[str, str]) -> dict[str, Any]:
    """An example copied, what ``offload-fixer run`` predicts of it (the errors it reports, an
    eager operation's included), and its fixed variant where ``run --fix`` writes one."""
    shutil.copy(example, directory / example.name)
    env = {**env, "XLA_FLAGS": ""}  # the examples build their meshes over jax.devices()
    command = [sys.executable, "-m", "offload_fixer", "run"]
    done = subprocess.run(
        [*command, "--format", "json", example.name], capture_output=True, text=True, cwd=directory, env=env
    )
    try:
        found = json.loads(done.stdout)
    except json.JSONDecodeError:
        found = {}
    diagnostics = found.get("diagnostics", []) if isinstance(found, dict) else found
    errors = sorted({d["code"] for d in diagnostics if d.get("severity") == "error"})
    entry: dict[str, Any] = {
        "program": example.stem,
        "kind": "example",
        "source_sha256": _sha(example),
        "predicted": {"original": "fails" if errors else "runs"},
        "predicted_codes": errors,
    }
    scratch = directory / "scratch"
    scratch.mkdir(exist_ok=True)
    shutil.copy(example, scratch / example.name)
    done = subprocess.run([*command, "--fix", example.name], capture_output=True, text=True, cwd=scratch, env=env)
    fixed = scratch / example.name
    if fixed.read_bytes() != example.read_bytes():
        shutil.copy(fixed, directory / f"{example.stem}.fixed.py")
        entry["fixed_sha256"] = _sha(fixed)
        entry["predicted"]["fixed"] = "runs"
        entry["fix"] = "fixed"
        entry["summary"] = " ".join(line for line in done.stderr.splitlines() if "the fix compiles" in line)
    else:
        entry["fix"] = "left"
        entry["why"] = " ".join(line for line in done.stderr.splitlines() if "fix refused" in line)[-600:]
    return entry


def _prepare_package(package: Path, directory: Path, env: dict[str, str]) -> dict[str, Any]:
    """An example package (``python -m examples.training.NAME``) copied with its folders, and
    what ``offload-fixer run -m`` predicts of it."""
    relative = package.relative_to(ROOT)
    shutil.copytree(package, directory / relative, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
    module = ".".join(relative.parts)
    done = subprocess.run(
        [sys.executable, "-m", "offload_fixer", "run", "--format", "json", "-m", module],
        capture_output=True,
        text=True,
        cwd=directory,
        env={**env, "XLA_FLAGS": ""},
    )
    try:
        found = json.loads(done.stdout)
    except json.JSONDecodeError:
        found = {}
    diagnostics = found.get("diagnostics", []) if isinstance(found, dict) else []
    errors = sorted({d["code"] for d in diagnostics if d.get("severity") == "error"})
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(package.glob("*.py"))))
    return {
        "program": module,
        "kind": "example-package",
        "source_sha256": digest.hexdigest(),
        "predicted": {"original": "fails" if errors else "runs"},
        "predicted_codes": errors,
        "fix": "left",
    }


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------
# run (the chip)
class Recorder:
    """Stands in for a module's jitted object while ``example()`` runs: keeps the concrete
    arguments of its first call, through ``jitted(...)`` or ``jitted.lower(...).compile()(...)``
    (then the compiled object too), and calls through."""

    def __init__(self, jitted: Any, compile_only: bool = False) -> None:
        self.jitted = jitted
        self.calls: list[tuple[tuple, dict]] = []
        self.compiled: Any = None
        self.compile_only = compile_only
        """Record the first call and stop the program there (:class:`Recorded`): a variant the
        tool refused is compiled for its memory figures, never run (it may abort the process)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.record(args, kwargs)
        if self.compile_only:
            raise Recorded
        return self.jitted(*args, **kwargs)

    def record(self, args: tuple, kwargs: dict) -> None:
        """The first call's arguments, and their shapes and shardings (a donated argument is
        deleted by the call; the shapes still lower)."""
        import jax

        if self.calls:
            return
        self.calls.append((args, kwargs))

        def shape(leaf: Any) -> Any:
            if isinstance(leaf, jax.Array):
                return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=leaf.sharding)
            return leaf

        self.abstract = jax.tree.map(shape, (args, kwargs))

    def lower(self, *args: Any, **kwargs: Any) -> Any:
        return _Through(self.jitted.lower(*args, **kwargs), "compile", self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.jitted, name)


class Recorded(Exception):
    """A compile-only variant reached its first call: the arguments are kept, nothing runs."""


class _Through:
    """A ``Lowered`` whose ``compile()`` gives a ``Compiled`` that records its first call."""

    def __init__(self, wrapped: Any, method: str, recorder: Recorder) -> None:
        self.wrapped, self.method, self.recorder = wrapped, method, recorder

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.wrapped, name)
        if name != self.method:
            return found

        def compile(*args: Any, **kwargs: Any) -> Any:
            compiled = found(*args, **kwargs)
            self.recorder.compiled = compiled

            def call(*call_args: Any, **call_kwargs: Any) -> Any:
                self.recorder.record(call_args, call_kwargs)
                if self.recorder.compile_only:
                    raise Recorded
                return compiled(*call_args, **call_kwargs)

            return call

        return compile


def _import(path: Path) -> Any:
    name = f"_chip_corpus_{next(_names)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    sys.path.insert(0, str(path.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def _recorders(module: Any, functions: list[str], compile_only: bool = False) -> dict[str, Recorder]:
    """Each module-level jitted object of a function named in ``functions``, replaced by a
    :class:`Recorder` under every name that holds it."""
    from offload_fixer.api import is_jitted, python_function

    found: dict[str, Recorder] = {}
    for attribute, value in list(vars(module).items()):
        if not is_jitted(value):
            continue
        name = getattr(python_function(value), "__name__", attribute)
        if name in functions or attribute in functions:
            recorder = found.setdefault(name, Recorder(value, compile_only))
            setattr(module, attribute, recorder)
    return found


def memory_figures(compiled: Any) -> dict[str, int] | None:
    analysis = compiled.memory_analysis()
    if analysis is None:
        return None
    fields = (
        "argument_size_in_bytes",
        "output_size_in_bytes",
        "temp_size_in_bytes",
        "alias_size_in_bytes",
        "host_argument_size_in_bytes",
        "host_output_size_in_bytes",
        "host_temp_size_in_bytes",
    )
    figures = {field: int(getattr(analysis, field, 0) or 0) for field in fields}
    figures["device_total"] = (
        figures["argument_size_in_bytes"]
        + figures["output_size_in_bytes"]
        + figures["temp_size_in_bytes"]
        - figures["alias_size_in_bytes"]
    )
    return figures


def measure(recorder: Recorder, repeat: int) -> dict[str, Any]:
    """The compiler's memory analysis of the recorded call and its median step time (fresh
    copies of the arguments for each step: a donated one is consumed by the call; none where
    ``repeat`` is 0, a program that times its own steps)."""
    import jax

    args, kwargs = recorder.calls[0]
    found: dict[str, Any] = {}
    try:
        abstract_args, abstract_kwargs = recorder.abstract
        compiled = recorder.compiled or recorder.jitted.lower(*abstract_args, **abstract_kwargs).compile()
    except Exception as exc:  # noqa: BLE001 - recorded as the verdict on this function
        return {"error": _one_line(exc)}
    found["memory"] = memory_figures(compiled)
    times = []
    for _ in range(repeat):
        try:
            fresh_args, fresh_kwargs = jax.tree.map(_copy, (args, kwargs))
            jax.block_until_ready((fresh_args, fresh_kwargs))
            start = time.perf_counter()
            jax.block_until_ready(compiled(*fresh_args, **fresh_kwargs))
            times.append(time.perf_counter() - start)
        except Exception as exc:  # noqa: BLE001
            found["time_error"] = _one_line(exc)
            break
    if times:
        found["step_ms"] = 1000 * statistics.median(times)
    return found


def _copy(leaf: Any) -> Any:
    import jax

    if isinstance(leaf, jax.Array):
        return jax.device_put(leaf, leaf.sharding, donate=False, may_alias=False)
    return leaf


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:  # XLA's status line, where the exception's text holds one
        if any(key in line for key in ("E1200", "INTERNAL", "UNIMPLEMENTED", "RESOURCE_EXHAUSTED", "INVALID")):
            return line[:600]
    return (lines[0] if lines else type(exc).__name__)[:600]


def run_program(path: Path, entry: dict[str, Any], repeat: int, compile_only: bool = False) -> dict[str, Any]:
    """One corpus program (or fixed variant) run in this process, as the record keeps it;
    ``compile_only``: up to its first call of a jitted function, which is compiled, not run."""
    result: dict[str, Any] = {"file": path.name}
    out = io.StringIO()
    argv = sys.argv
    sys.argv = [str(path)]  # the program reads its own command line, not this script's
    try:
        with contextlib.redirect_stdout(out):
            if entry["kind"] in ("example", "example-package"):
                start = time.perf_counter()
                if entry["kind"] == "example":
                    runpy.run_path(str(path), run_name="__main__")
                else:
                    root = str(path.parents[entry["program"].count(".")])
                    sys.path.insert(0, root)
                    try:
                        runpy.run_module(entry["program"], run_name="__main__", alter_sys=True)
                    finally:
                        sys.path.remove(root)
                result["seconds"] = time.perf_counter() - start
                result["verdict"] = "ok"
                result["stdout_sha256"] = hashlib.sha256(out.getvalue().encode()).hexdigest()
                result["stdout_tail"] = out.getvalue()[-400:]
                return result
            module = _import(path)
            recorders = _recorders(module, entry.get("functions", []), compile_only)
            try:
                outputs = module.example()
            except Recorded:
                result["verdict"] = "compiled only"
                result["functions"] = {name: measure(rec, 0) for name, rec in recorders.items() if rec.calls}
                return result
            import jax

            jax.block_until_ready(outputs)
        result["verdict"] = "ok"
        result["outputs"] = summarise(outputs)
        own = getattr(module, "STEP_MS", None)  # a program too large to copy its state times itself
        result["functions"] = {
            name: measure(rec, 0 if own is not None else repeat) for name, rec in recorders.items() if rec.calls
        }
        if own is not None:
            for figures in result["functions"].values():
                figures["step_ms"] = own
    except SystemExit as exc:  # the program ended itself: its exit status is the verdict
        result["verdict"] = "ok" if exc.code in (0, None) else "error"
        result["error"] = f"SystemExit: {exc.code}"
    except Exception as exc:  # noqa: BLE001 - the verdict on the program
        result["verdict"] = "error"
        result["error"] = _one_line(exc)
        result["traceback_tail"] = traceback.format_exc()[-1500:]
        called = {name: rec for name, rec in (locals().get("recorders") or {}).items() if rec.calls}
        result["functions"] = {name: measure(rec, 0) for name, rec in called.items()}
    finally:
        sys.argv = argv
        for recorder in (locals().get("recorders") or {}).values():  # their arrays freed for the next program
            recorder.calls.clear()
            recorder.compiled = None
        gc.collect()
    return result


def versions() -> dict[str, Any]:
    import importlib.metadata

    import jax
    import jaxlib

    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    device = jax.devices()[0]
    return {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "libtpu": version("libtpu"),
        "platform": device.platform,
        "device_kind": device.device_kind,
        "device_count": len(jax.devices()),
        "python": sys.version.split()[0],
        "date": datetime.date.today().isoformat(),
    }


def run(directory: Path, record_path: Path, repeat: int, only: list[str]) -> dict[str, Any]:
    entries = json.loads((directory / "manifest.json").read_text())
    if only:
        entries = [e for e in entries if e["program"] in only]
    record: dict[str, Any] = {"versions": versions(), "programs": []}
    for entry in entries:
        row = dict(entry)
        runs = [(variant, {}) for variant in ("original", "fixed", "refused")]
        runs += list((entry.get("variants") or {}).items())
        for variant, environment in runs:
            named = variant in ("fixed", "refused")
            path = directory / (f"{entry['program']}.{variant}.py" if named else f"{entry['program']}.py")
            if entry["kind"] == "example-package" and variant == "original":
                path = directory.joinpath(*entry["program"].split("."))  # run by module name
            if not path.exists():
                continue
            outcome = (entry.get("predicted") or {}).get(variant)
            if outcome == "aborted":
                row[variant] = {
                    "file": path.name,
                    "verdict": "skipped",
                    "why": entry.get("aborts") or "the tool predicts it aborts the compiler",
                }
                continue
            print(f"chip corpus: {path.name} {variant}", file=sys.stderr, flush=True)
            saved = {key: os.environ.get(key) for key in environment}
            os.environ.update(environment)
            try:
                row[variant] = run_program(path, entry, repeat, compile_only=variant == "refused")
            finally:
                for key, value in saved.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value
        record["programs"].append(row)
        record_path.write_text(json.dumps(record, indent=1))
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    made = commands.add_parser("prepare", help="copy the corpus and its fixed variants, with the tool's manifest")
    made.add_argument("directory", type=Path)
    made.add_argument("programs", nargs="*", help="fix-quality programs (default: all)")
    ran = commands.add_parser("run", help="run the corpus in this process and record what happened")
    ran.add_argument("directory", type=Path)
    ran.add_argument("--out", type=Path, required=True)
    ran.add_argument("--repeat", type=int, default=5, help="steps timed per function (median)")
    ran.add_argument("--only", nargs="*", default=[], help="programs to run (default: all)")
    large = commands.add_parser("judge-large", help="(prepare's own step) what the tool says of a large program")
    large.add_argument("source", type=Path)
    large.add_argument("directory", type=Path)
    args = parser.parse_args(argv)
    if args.command == "judge-large":
        sys.path.insert(0, str(ROOT))
        print(json.dumps(judge_large(args.source, args.directory)))
        return 0
    if args.command == "prepare":
        prepare(args.directory, args.programs)
        return 0
    sys.path.insert(0, str(ROOT))
    record = run(args.directory, args.out, args.repeat, args.only)
    failed = [p["program"] for p in record["programs"] if (p.get("fixed") or {}).get("verdict") == "error"]
    print(
        f"chip corpus: {len(record['programs'])} programs; fixed variants failing: {failed or 'none'}", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
