"""State that arrives on host and leaves on device (OFL1211): a ``pinned_host`` argument that
the step moves to device, updates and returns under its own keys with no ``out_shardings``
leaf for it. ``run`` reports each program of ``runner_programs/state_back_on_device`` at its
jit's ``in_shardings``, the Python API reports the same step, and neither reports the step
whose ``out_shardings`` keeps the state on host (what the finding's fix says), nor one that
declares the state's outputs device memory. The compiled program confirms both: host output
bytes 0 for the state that leaves on device, the state's size for the one kept on host."""

from __future__ import annotations

import json
import re
import runpy
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import offload_fixer
from offload_fixer import codes, jax_compat
from offload_fixer.model import Report
from tests.cli_support import REPO
from tests.cli_support import offload_fixer as offload_fixer_command

PROGRAMS = sorted((REPO / "tests" / "runner_programs" / "state_back_on_device").glob("*.py"))
EXPECT = re.compile(r"#\s*expect:\s*OFL1211\s+(\w+)")
needs_host_memory = pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED or not jax_compat.host_memory_on_this_backend(),
    reason=f"jax {jax.__version__}: the programs need memory spaces in types and pinned_host memory on the CPU",
)


def marked(program: Path) -> tuple[int, str]:
    """The line marked ``# expect: OFL1211 ARGUMENT`` and the argument it names."""
    for number, text in enumerate(program.read_text().splitlines(), start=1):
        found = EXPECT.search(text)
        if found:
            return number, found.group(1)
    raise AssertionError(f"{program} marks no line")


@needs_host_memory
@pytest.mark.parametrize("program", PROGRAMS, ids=[program.stem for program in PROGRAMS])
def test_run_reports_the_state_at_its_jit(program: Path):
    with tempfile.TemporaryDirectory() as directory:
        output = Path(directory) / "findings.json"
        proc = offload_fixer_command("run", "--format", "json", "-o", str(output), str(program))
        report = Report.from_dict(json.loads(output.read_text()))
    assert proc.returncode == 1, proc.stderr
    line, argument = marked(program)
    findings = report.by_code(codes.OFFLOAD_DOES_NOTHING)
    assert findings and all(f.origin is not None and f.origin.kind == "host_argument" for f in findings)
    for finding in findings:
        assert finding.span is not None and Path(finding.span.path).resolve() == program
        assert finding.span.line == line
        assert finding.message.startswith(f"Host argument {argument}")
        assert "after one step this state lives on device" in finding.message
        assert finding.fixes and "out_shardings" in finding.fixes[0].title


SHAPES = {
    "params": {"w": jax.ShapeDtypeStruct((64, 32), jnp.float32), "b": jax.ShapeDtypeStruct((32,), jnp.float32)},
    "x": jax.ShapeDtypeStruct((8, 64), jnp.float32),
    "y": jax.ShapeDtypeStruct((8, 32), jnp.float32),
}


def _adam(jit_options):
    namespace = runpy.run_path(str(REPO / "tests/runner_programs/state_back_on_device/adam_restored_state.py"))
    host, device = namespace["HOST"], namespace["DEVICE"]
    step = jax.jit(namespace["adam_step"], in_shardings=(device, host, device, device), **jit_options(host, device))
    state = {"mu": SHAPES["params"], "nu": SHAPES["params"]}
    return step, (SHAPES["params"], state, SHAPES["x"], SHAPES["y"])


@needs_host_memory
def test_the_api_reports_what_run_does():
    step, args = _adam(lambda host, device: {})
    findings = offload_fixer.check(step, *args).by_code(codes.OFFLOAD_DOES_NOTHING)
    assert {f.output_path for f in findings} | {p for f in findings for p in f.related_outputs} == {
        "[1]['mu']['b']",
        "[1]['mu']['w']",
        "[1]['nu']['b']",
        "[1]['nu']['w']",
    }


@needs_host_memory
@pytest.mark.parametrize(
    "declared",
    [lambda host, device: {"out_shardings": (device, host)}, lambda host, device: {"out_shardings": (device, device)}],
    ids=["state kept on host (the fix)", "state declared device"],
)
def test_a_declared_state_output_is_not_reported(declared):
    step, args = _adam(declared)
    assert not offload_fixer.check(step, *args).by_code(codes.OFFLOAD_DOES_NOTHING)


@needs_host_memory
def test_the_compiled_program_confirms_it(tpu_compiler):
    left = offload_fixer.check(*_flatten(_adam(lambda host, device: {})), confirm=True)
    kept = offload_fixer.check(*_flatten(_adam(lambda host, device: {"out_shardings": (device, host)})), confirm=True)
    assert left.by_code(codes.OFFLOAD_DOES_NOTHING) and not kept.by_code(codes.OFFLOAD_DOES_NOTHING)
    assert left.xla is not None and left.xla.memory is not None and left.xla.memory.host_output == 0
    # the state the step takes from host memory is the state it gives back there (padded as
    # the compiler lays it out)
    assert kept.xla is not None and kept.xla.memory is not None
    assert kept.xla.memory.host_output == kept.xla.memory.host_argument > 0


def _flatten(step_and_args):
    step, args = step_and_args
    return (step, *args)
