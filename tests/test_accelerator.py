"""``offload_fixer.accelerator``: ``run`` where the local backend is the accelerator, on the CPU.

``OFFLOAD_FIXER_EMULATE_ACCELERATOR=tpu`` takes the accelerator path here: libtpu compiles each
compilation first (compile-only) and its rejection is raised as the chip raises it. What the
chip itself printed for the same runs is compared in ``test_accelerator_transcripts.py``.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil

import pytest

from offload_fixer import jax_compat
from offload_fixer.accelerator import Accelerator, AcceleratorRun
from offload_fixer.exit_codes import ExitCode
from offload_fixer.model import MemoryFigures, byte_size
from offload_fixer.report_file import read_report_file
from offload_fixer.runner import run_program
from tests.cli_support import REPO, offload_fixer

PROGRAMS = REPO / "tests" / "accelerator_programs"
EMULATED = {"OFFLOAD_FIXER_EMULATE_ACCELERATOR": "tpu"}
FAILED = re.compile(r"^offload-fixer: (?P<name>.+) at (?P<where>\S+) does not compile for tpu: (?P<said>.+)$", re.M)

pytestmark = [
    pytest.mark.skipif(
        not jax_compat.host_memory_on_this_backend(), reason="the programs need pinned_host memory (JAX >= 0.5 on CPU)"
    ),
    pytest.mark.skipif(importlib.util.find_spec("libtpu") is None, reason="the emulated TPU is libtpu, compile-only"),
]


def _eager_slice_refusal() -> tuple[str, str]:
    """The code and the first words of the installed libtpu's refusal of an eager element read
    of a host buffer: OFL1208's slice in two dimensions, a bug fixed in libtpu 0.0.46.3; after
    it, the lane-slice copy of OFL1210."""
    from offload_fixer.jax_compat.compiler_bugs import compiler_release, known_bug

    if known_bug("tpu-async-slice-dimensions", "tpu", compiler_release("tpu")) is not None:
        return "OFL1208", "UNIMPLEMENTED: Async slice only supports slicing in 1 dimension\n"
    return "OFL1210", "UNIMPLEMENTED: Slicing lane dimension is only supported when the lane slice size is a multiple"


def findings(proc, report) -> list[tuple[str, int, str | None]]:
    """(code, line, output) of every finding of a run's JSON report."""
    assert report.exists(), proc.stderr
    return sorted(
        (d["code"], d["span"]["line"], d.get("output_path")) for d in json.loads(report.read_text())["diagnostics"]
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["momentum_on_host", "rollout_buffer", "trajectory_on_host"])
def test_every_failing_compilation_is_found_in_one_run_as_on_the_cpu(name, tmp_path):
    """Two compilations of each program fail on a TPU, one of them an eager operation: the
    run goes past both, prints each in the compiler's words instead of JAX's traceback, and
    finds what ``run`` finds where nothing fails (the CPU); the program prints what it does
    without the tool."""
    program = PROGRAMS / f"{name}.py"
    on_cpu = offload_fixer("run", "--format", "json", "-o", str(tmp_path / "cpu.json"), str(program))
    emulated = offload_fixer("run", "--format", "json", "-o", str(tmp_path / "tpu.json"), str(program), **EMULATED)

    failed = FAILED.findall(emulated.stderr)
    assert len(failed) == 2 and sum(name.endswith("(eager)") for name, _, _ in failed) == 1, emulated.stderr
    assert "Traceback" not in emulated.stderr
    assert emulated.stderr.count("from here on comes from a patched compilation") == 2
    assert findings(emulated, tmp_path / "tpu.json") == findings(on_cpu, tmp_path / "cpu.json")
    assert emulated.returncode == on_cpu.returncode == ExitCode.FINDINGS
    assert emulated.stdout == on_cpu.stdout  # numbers exact in float32, patched or not


def test_the_failures_are_recorded_and_the_program_goes_on():
    """In the program's own process: each failure with the compiler's verdict, whether the
    analysis predicted it and that it was patched; the program ends well."""
    run = AcceleratorRun(Accelerator("tpu", emulated=True), "tpu", say=lambda text: None)
    result = run_program(str(PROGRAMS / "rollout_buffer.py"), target="tpu", accelerator=run)

    code, refusal = _eager_slice_refusal()
    assert result.program_exit_code == 0 and result.stopped is None
    assert [(f.name, f.verdict.code, f.predicted, f.patched) for f in run.failures] == [
        ("jit(every_eighth)", "OFL1213", True, True),
        ("dynamic_slice (eager)", code, True, True),
    ]
    assert run.failures[1].message.startswith(refusal)


def test_no_keep_going_stops_at_the_first_failure_without_a_traceback():
    run = AcceleratorRun(Accelerator("tpu", emulated=True), "tpu", keep_going=False, say=lambda text: None)
    result = run_program(str(PROGRAMS / "rollout_buffer.py"), target="tpu", accelerator=run)

    assert result.stopped is not None and result.stopped.failure.name == "jit(every_eighth)"
    assert result.program_exception is None
    assert [f.name for f in run.failures] == ["jit(every_eighth)"]


def test_verbose_shows_jaxs_traceback_of_the_failure_from_the_programs_own_lines():
    said: list[str] = []
    run = AcceleratorRun(Accelerator("tpu", emulated=True), "tpu", say=said.append, verbose=True)
    run_program(str(PROGRAMS / "rollout_buffer.py"), target="tpu", accelerator=run)

    tracebacks = [text for text in said if text.startswith("Traceback (most recent call last):")]
    assert len(tracebacks) == 2
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', tracebacks[1])
    assert frames == [
        (str(PROGRAMS / "rollout_buffer.py"), "34", "<module>"),
        (str(PROGRAMS / "rollout_buffer.py"), "30", "main"),
    ]
    assert f"\njax.errors.JaxRuntimeError: {_eager_slice_refusal()[1]}" in tracebacks[1]


STEP_LINE = re.compile(
    r"^offload-fixer:   (?P<name>\S+): step (?P<before>[\d.]+) ms -> (?P<after>[\d.]+) ms, "
    r"HBM (?P<hbm_before>[\d.]+ \w+) -> (?P<hbm_after>[\d.]+ \w+) \(the compiler's memory analysis; before: ",
    re.M,
)


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_run_fix_carries_the_fixed_programs_figures_on_the_accelerator_into_the_fix_records(fmt, tmp_path):
    """``run --fix`` runs the fixed program again on the accelerator and prints each fixed
    compilation's step and HBM before and after; the fix's record in the JSON document (SARIF:
    the run's ``properties.fixes``) and in the run report carries the same figures."""
    shutil.copy(REPO / "examples" / "optimizer_offload_broken.py", tmp_path)
    output, report = tmp_path / f"out.{fmt}", tmp_path / "report.json"
    argv = ("--format", fmt, "-o", str(output), "--report", str(report), "--fix", "optimizer_offload_broken.py")
    proc = offload_fixer("run", *argv, cwd=tmp_path, **EMULATED)

    assert proc.returncode == ExitCode.CLEAN, proc.stderr
    assert "offload-fixer: the fix held: every fixed compilation compiled" in proc.stderr
    printed = [m.groupdict() for m in STEP_LINE.finditer(proc.stderr)]
    assert [p["name"] for p in printed] == ["jit(train_step)"], proc.stderr
    document = json.loads(output.read_text())
    fixes = document["fixes"] if fmt == "json" else document["runs"][0]["properties"]["fixes"]
    assert [(fix["written"], fix["held"], len(fix["steps"])) for fix in fixes] == [(True, True, 1)]
    step = fixes[0]["steps"][0]
    assert (step["compilation"], step["function"], step["before_patched"]) == ("jit(train_step)", "train_step", True)
    assert step["step_before_ms"] > 0 and step["step_after_ms"] > 0
    assert step["calls_before"] > 0 and step["calls_after"] > 0
    assert f"{step['step_before_ms']:.2f}" == printed[0]["before"]
    assert f"{step['step_after_ms']:.2f}" == printed[0]["after"]
    for when in ("before", "after"):
        memory = MemoryFigures(**step[when])
        assert byte_size(memory.device_total) == printed[0][f"hbm_{when}"]
    assert f"offload-fixer:   {step['summary']}\n" in proc.stderr
    assert fixes[0]["summary"].startswith("held on tpu (emulated: libtpu ")
    # the run report reads back the same record (the editor and `fix` read it there)
    assert [fix.to_dict() for fix in read_report_file(str(report)).fixes] == fixes


def test_a_programs_own_error_is_the_programs(tmp_path):
    """An error of the program's own (not an offload the compiler rejects) ends it as it
    would without the tool: its traceback, exit 3."""
    program = tmp_path / "own_error.py"
    program.write_text(
        "import jax\nimport jax.numpy as jnp\n\n\n@jax.jit\ndef step(x):\n"
        "    raise RuntimeError('the program raised this itself')\n\n\nstep(jnp.ones(3))\n"
    )
    proc = offload_fixer("run", str(program), cwd=tmp_path, **EMULATED)

    assert proc.returncode == ExitCode.PROGRAM_FAILED
    assert "RuntimeError: the program raised this itself" in proc.stderr
    assert "does not compile" not in proc.stderr


def test_an_unknown_accelerator_to_emulate_is_a_usage_error(tmp_path):
    proc = offload_fixer(
        "run", str(PROGRAMS / "rollout_buffer.py"), cwd=tmp_path, OFFLOAD_FIXER_EMULATE_ACCELERATOR="npu"
    )

    assert proc.returncode == ExitCode.USAGE
    assert "OFFLOAD_FIXER_EMULATE_ACCELERATOR='npu': expected tpu or gpu" in proc.stderr


def test_on_the_accelerator_itself_its_verdict_confirms_the_findings_it_names(tpu_compiler):
    """``--confirm`` on the chip: its compile of the program is the judge (libtpu's verdict on
    the same module here, deviceless, is what the chip said: the transcripts show it)."""
    import jax
    import jax.numpy as jnp

    from offload_fixer import analyze
    from offload_fixer.xla.confirm import without_offload
    from offload_fixer.xla.oracle import module_text

    spec = importlib.util.spec_from_file_location("momentum_on_host", PROGRAMS / "momentum_on_host.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shape = jax.ShapeDtypeStruct(module.SHAPE, jnp.float32)
    lowered = jax_compat.lower_for_platform(module.evaluate, (shape, shape), {}, "tpu")
    report = analyze(lowered, target="tpu")
    run = AcceleratorRun(Accelerator("tpu"), "tpu")
    run.verdicts[id(report)] = tpu_compiler.judge(lowered)

    judged = run.judged(report, confirm=True)
    (error,) = judged.by_code("OFL1200")
    assert error.confirmed and error.xla_message.startswith("INVALID_ARGUMENT: E1200: CompileTimeHost")
    assert error.confirmed_by == f"{tpu_compiler.compiler} on {jax.devices()[0].device_kind}"
    assert [d.confirmed for d in judged.by_code("OFL1201")] == [None]  # a warning: the chip's compile says nothing
    assert judged.unpredicted == ()

    # The same compilation compiled where the analysis predicted error 1200: said as a difference.
    run.verdicts[id(report)] = tpu_compiler.judge(without_offload(module_text(lowered)))
    (difference,) = run.judged(report).unpredicted
    assert difference == f"the analysis predicts E1200, {tpu_compiler.compiler} on this machine says compiled"
