"""The static check never reports what the dynamic analysis (the judge) passes, on real programs."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from tests.cli_support import offload_fixer

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("static_vs_dynamic", ROOT / "scripts" / "static_vs_dynamic.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="the examples need pinned_host memory")
def test_no_static_false_positives_on_the_examples():
    matrix = _script().compare(sorted(ROOT.glob("examples/*.py")))
    assert not matrix.not_run
    assert not matrix.false_positive
    # the comparison is not vacuous: both sides agree on some findings and some clean functions
    assert matrix.true_positive and matrix.true_negative


@pytest.mark.slow
@pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="the packages need pinned_host memory")
def test_the_static_check_finds_the_training_packages_findings():
    """Multi-module packages: shardings in one module, jits in another, flags and configs."""
    packages = sorted(main.parent for main in ROOT.glob("examples/training/*/__main__.py"))
    matrix = _script().compare(packages)
    assert len(packages) == 4 and not matrix.not_run
    assert not matrix.false_positive
    assert matrix.true_positive and not matrix.false_negative
    assert matrix.true_negative


@pytest.mark.slow
@pytest.mark.skipif(not jax_compat.host_memory_on_this_backend(), reason="the corpus needs pinned_host memory")
def test_the_corpus_of_helpers_loops_custom_derivatives_and_containers():
    """tests/static_vs_dynamic/: programs a user writes (8-device meshes, scans streaming
    layers, loops, custom_vjp, dataclasses, helpers, where), run by the script as a user
    runs it (its own process: the meshes need 8 CPU devices before JAX starts)."""
    import subprocess

    programs = sorted(str(p) for p in (ROOT / "tests" / "static_vs_dynamic").glob("*.py"))
    assert len(programs) >= 60
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "static_vs_dynamic.py"), *programs],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
        env={**__import__("os").environ, "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]  # no static false positives
    summary = proc.stdout
    assert "0 static false positives" in summary and "not compared" not in summary
    found, total = (int(n) for n in summary.split("static finds ")[1].split(" dynamic")[0].split(" of "))
    assert found >= 0.95 * total
    # OFL1201 itself, where run reports it: per program, and never in a function where run does not
    host_compute = summary.split("host compute (OFL1201): the static check reports it in ")[1]
    reported, programs_with_host_compute = (int(n) for n in host_compute.split(" programs")[0].split(" of the "))
    assert reported >= 0.9 * programs_with_host_compute
    assert host_compute.split("), and alone in ")[1].startswith("0;")
    assert "; 0 static OFL1201 false positives" in summary


UNPINNED_PROGRAMS = sorted((ROOT / "tests" / "static_vs_dynamic").glob("unpinned_host_*.py"))


@pytest.mark.slow
@pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED,
    reason="before JAX 0.7.1 the CPU lowering run analyses loses a move to unpinned_host (tests/jax_compat/test_unpinned_host_lowering.py)",
)
@pytest.mark.parametrize("program", UNPINNED_PROGRAMS, ids=lambda path: path.stem)
def test_check_judges_each_unpinned_host_spelling_as_the_released_compiler(program, tpu_compiler):
    """A computed value moved to unpinned_host and returned, spelled with each sharding a user
    writes (jax.make_mesh's Explicit axes, Auto axes, jax.sharding.Mesh, one device,
    with_memory_kind): ``check`` (never runs the program) reports what ``run --confirm`` reports,
    and OFL1200 exactly where libtpu refuses the program (E1200)."""
    checked = offload_fixer("check", "--no-cache", "--format", "json", str(program))
    ran = offload_fixer("run", "--no-cache", "--confirm", "--format", "json", str(program))
    assert checked.returncode in (0, 1) and ran.returncode in (0, 1), checked.stderr + ran.stderr
    static = sorted(d["code"] for d in json.loads(checked.stdout)["diagnostics"])
    report = json.loads(ran.stdout)
    assert static == sorted(d["code"] for d in report["diagnostics"])
    (compilation,) = report["compilations"]
    assert compilation["xla"]["outcome"] == compilation["predicted"]["outcome"]
    assert ("OFL1200" in static) == (compilation["xla"]["error"] == "E1200")
    assert "OFL1204" in static
