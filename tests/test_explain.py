"""``offload-fixer explain``: reading XLA's host-offload messages, and tying them to a dump.

The dumps are real: ``explain_fixtures/offload_scenarios.py`` lowers functions for TPU and
compiles them on the CPU backend with ``XLA_FLAGS=--xla_dump_to`` (the CPU compiler never
raises error 1200, so it writes every module). The error texts are the messages XLA prints,
embedded in tracebacks, naming instructions read from those dumps.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from string import Template

import pytest

from offload_fixer import jax_compat, xla_messages
from offload_fixer.explain import (
    TraceStep,
    explain,
    find_dumped_modules,
    parse_error_log,
    traceback_frames,
)

FIXTURES = Path(__file__).parent / "explain_fixtures"
SCENARIOS = FIXTURES / "offload_scenarios.py"
TYPED = jax_compat.regime() is jax_compat.Regime.TYPED
typed_only = pytest.mark.skipif(
    not TYPED,
    reason="these scenarios fail only where memory kinds are types (jax >= 0.7.1)",
)
propagation_only = pytest.mark.skipif(
    TYPED,
    reason="these scenarios fail only under propagated memory kinds (jax < 0.7.1)",
)


def render(name: str, **values: str) -> str:
    return Template((FIXTURES / name).read_text()).substitute(values)


# ---------------------------------------------------------------------------------------
# Reading the messages
def test_old_format_in_a_chained_traceback_is_read_once():
    errors = parse_error_log(render("old_format.log", instruction="tuple.64"))

    assert len(errors) == 1
    error = errors[0]
    assert (error.kind, error.code, error.instruction, error.custom_call) == (
        "output-not-host",
        1200,
        "tuple.64",
        False,
    )
    assert error.status == "INVALID_ARGUMENT"
    assert error.error_name is None and error.url is None
    assert error.line == 21
    assert error.diagnostic_code == "OFL1200"
    assert error.message.startswith("INVALID_ARGUMENT: Tensor which is moved to host (starting from tuple.64)")


def test_new_format_reads_the_code_line_and_the_link():
    text = render("new_format.log", reference="starting from square.790")
    [error] = parse_error_log(text)

    assert (error.code, error.error_name) == (
        1200,
        "CompileTimeHostOffloadOutputLocationMismatch",
    )
    assert error.instruction == "square.790" and not error.custom_call
    assert error.url == "https://openxla.org/xla/errors/error_1200"
    assert error.line == 9
    assert error.message.startswith("INVALID_ARGUMENT: E1200: CompileTimeHostOffloadOutputLocationMismatch: Tensor")
    assert error.message.endswith("for more details.")


def test_custom_call_form_names_the_move_itself():
    [error] = parse_error_log(render("new_format.log", reference='custom call "device_put.3"'))

    assert error.instruction == "device_put.3"
    assert error.custom_call


def test_instruction_trace_is_attached_to_the_error_after_it():
    errors = parse_error_log((FIXTURES / "vmodule_trace.log").read_text())

    [error] = [e for e in errors if e.kind == "output-not-host"]
    assert error.trace == (TraceStep("mul.3", ()), TraceStep("tuple.1", (1,)))
    assert error.trace_output_index == 1
    [warning] = [e for e in errors if e.severity == "warning"]
    assert (warning.kind, warning.instruction, warning.diagnostic_code) == (
        "device-compute-on-host",
        "mul.3",
        "OFL1201",
    )


def test_sibling_messages_each_get_their_kind_and_code():
    errors = parse_error_log((FIXTURES / "siblings.log").read_text())

    found = {(e.kind, e.instruction, e.diagnostic_code, e.severity) for e in errors}
    assert found == {
        ("dus-not-broadcast", "dynamic-update-slice.17", "OFL1202", "error"),
        ("while-condition", "compare.20", "OFL1205", "error"),
        ("pure-memory-offload", "add.5", "OFL1201", "error"),
        ("host-compute-disabled", None, "OFL1201", "error"),
        ("device-compute-on-host", "sine.4", "OFL1201", "warning"),
        ("slice-on-host", "dynamic-slice.9", "OFL1206", "warning"),
        ("multi-operand-crash", "add.7", None, "crash"),
    }
    assert [e.line for e in errors] == sorted(e.line for e in errors)


def test_a_log_without_offload_messages_explains_nothing():
    explanation = explain("Traceback (most recent call last):\nValueError: shapes do not match\n")

    assert explanation.errors == () and not explanation.has_errors
    assert "No XLA host-offload message" in explanation.text


@pytest.mark.parametrize("message", xla_messages.HOST_OFFLOADER_MESSAGES, ids=lambda m: m.kind)
def test_every_host_offloader_message_is_explained(message):
    """Each message XLA's host offloader prints, as a failing compile shows it, says what it means."""
    fields = {
        "name": "Arg_0.1",
        "start": "custom-call.2",
        "custom": "custom-call.2",
        "opcode": "slice",
        "index": "",
        "count": "2",
    }
    status = f"{message.status}: " if message.status else ""
    log = f"jaxlib.xla_extension.XlaRuntimeError: {status}{message.format(**fields)}\n"

    explanation = explain(log)

    assert [error.kind for error in explanation.errors] == [message.kind]
    if message.severity != "warning":
        assert "What it means:" in explanation.text


def test_traceback_frames_give_the_failing_call_and_the_script():
    text = render("old_format.log", instruction="tuple.64")
    frames = traceback_frames(text)

    assert frames[0].path == "/home/researcher/project/train.py" and frames[0].function == "<module>"
    explanation = explain(text)
    assert "The failing call: /home/researcher/project/train.py:81 (in main)." in explanation.text
    assert "offload-fixer run --target tpu /home/researcher/project/train.py" in explanation.text


def test_without_a_dump_the_message_is_explained_with_next_steps():
    explanation = explain(render("new_format.log", reference='custom call "device_put.3"'), target="gpu")

    text = explanation.text
    assert explanation.matches == () and explanation.reports == ()
    assert '"device_put.3" is the move to host itself' in text
    assert "offload-fixer run --target gpu /home/researcher/project/train.py" in text
    assert "XLA_FLAGS=--xla_dump_to=" in text
    assert "TF_CPP_VMODULE=host_offloader=1" in text
    expected_fix = (
        "jax.device_put(x, jax.memory.Space.Device)"
        if TYPED
        else 'jax.device_put(x, sharding.with_memory_kind("device"))'
    )
    assert expected_fix in text


CHIP_LOG = FIXTURES / "tpu_v5e_e1200.log"
"""``python3 tests/accelerator_programs/momentum_on_host.py`` on a TPU v5e (JAX 0.10.2, libtpu
0.0.42.1) without the tool, in a checkout at ``/work/main/.chip/43``: the TPU runtime's start-up
warning, then JAX's traceback of error 1200 in its coded form."""


def test_the_chips_log_is_read_in_its_coded_form():
    (error,) = parse_error_log(CHIP_LOG.read_text(encoding="utf-8"))

    assert (error.code, error.error_name, error.status) == (
        1200,
        "CompileTimeHostOffloadOutputLocationMismatch",
        "INVALID_ARGUMENT",
    )
    assert error.instruction == "snapshot.1"
    assert error.url == "https://openxla.org/xla/errors/error_1200"


def test_explain_maps_a_log_from_another_machine_to_the_project(tmp_path):
    """The log names the TPU machine's checkout; ``explain`` run in this project points at the
    same files here, through each path's tail below the project root, and says so."""
    from tests.cli_support import offload_fixer

    log = tmp_path / "chip.log"
    shutil.copy(CHIP_LOG, log)
    proc = offload_fixer("explain", str(log))

    assert proc.returncode == 1, proc.stderr
    program = "tests/accelerator_programs/momentum_on_host.py"
    assert f"The failing call: {program}:37 (in main)." in proc.stdout
    assert f"offload-fixer run --target tpu {program}" in proc.stdout
    assert f"note: the log's /work/main/.chip/43/{program} is {program} in this project" in proc.stdout
    assert "/work/main/.chip/43" not in proc.stdout.replace(f"note: the log's /work/main/.chip/43/{program}", "")
    assert "[1] XLA E1200 CompileTimeHostOffloadOutputLocationMismatch" in proc.stdout


def test_a_path_under_the_project_root_that_is_no_file_here_is_mapped_by_its_tail():
    """The chip's checkout may sit at this project's own path (a copy of the project in an
    ignored folder of it): its paths are under the root, but only their tails are files here."""
    from offload_fixer.explain.explainer import local_path

    root = Path(__file__).resolve().parents[1]
    program = root / "tests" / "accelerator_programs" / "momentum_on_host.py"
    copied = root / ".chip" / "43" / "tests" / "accelerator_programs" / "momentum_on_host.py"
    assert not copied.exists()
    assert local_path(str(copied), str(root)) == str(program)
    assert local_path(str(program), str(root)) is None  # a file of the project is left as it is


def test_a_path_no_tail_of_which_is_in_the_project_is_left_as_it_is(tmp_path):
    log = tmp_path / "chip.log"
    log.write_text(
        CHIP_LOG.read_text(encoding="utf-8").replace("tests/accelerator_programs/", "elsewhere/"), encoding="utf-8"
    )
    explanation = explain(log.read_text(encoding="utf-8"), project=Path(__file__).resolve().parents[1])

    assert "The failing call: /work/main/.chip/43/elsewhere/momentum_on_host.py:37 (in main)." in explanation.text
    assert explanation.notes == ()


def test_unknown_target_is_refused():
    with pytest.raises(ValueError, match="unknown target"):
        explain("", target="cpu")


def test_missing_dump_directory_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        explain(render("old_format.log", instruction="tuple.64"), tmp_path / "absent")


# ---------------------------------------------------------------------------------------
# Real dumps
@pytest.fixture(scope="session")
def full_dump(tmp_path_factory) -> Path:
    """XLA's text and proto HLO, its module.mlir copies, and JAX's StableHLO dump."""
    root = tmp_path_factory.mktemp("xla_dump")
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_dump_to={root} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto"
    env["JAX_DUMP_IR_TO"] = str(root / "jax")
    env["JAX_PLATFORMS"] = "cpu"
    # compiled, not read from the tests' compilation cache: XLA dumps only what it compiles, and
    # each xdist worker makes this dump of the same programs
    env["JAX_ENABLE_COMPILATION_CACHE"] = "0"
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent.parent), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, str(SCENARIOS)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return root


def copy_dump(source: Path, target: Path, keep) -> Path:
    """Copy the files ``keep`` accepts, at any depth."""
    shutil.copytree(
        source,
        target,
        ignore=lambda d, names: [n for n in names if not keep(Path(d) / n)],
    )
    return target


@pytest.fixture
def text_dump(full_dump, tmp_path) -> Path:
    return copy_dump(
        full_dump,
        tmp_path / "text",
        lambda p: p.name.endswith("before_optimizations.txt"),
    )


@pytest.fixture
def proto_dump(full_dump, tmp_path) -> Path:
    return copy_dump(
        full_dump,
        tmp_path / "proto",
        lambda p: p.name.endswith("before_optimizations.hlo.pb"),
    )


def hlo_text(dump: Path, function: str) -> str:
    """The function's first compilation (names are the same in its retrace)."""
    paths = sorted(dump.glob(f"module_*.jit_{function}.before_optimizations.txt"))
    return paths[0].read_text()


def parameter_name(hlo: str) -> str:
    hlo = hlo[hlo.index("ENTRY") :]
    return re.search(r"%?([\w.\-]+) = \S+ parameter\(0\)", hlo).group(1)


def root_name(hlo: str) -> str:
    entry = hlo[hlo.index("ENTRY") :]
    return re.search(r"ROOT %?([\w.\-]+) = ", entry).group(1)


def move_to_host_name(hlo: str) -> str:
    pattern = r"%?([\w.\-]+) = [^\n]*custom_call_target=\"annotate_device_placement\""
    return re.search(pattern, hlo).group(1)


def first_user_of_move_to_host(hlo: str) -> str:
    """XLA's starting instruction: the first user of the ``annotate_device_placement`` call."""
    move = move_to_host_name(hlo)
    return re.search(r"%?([\w.\-]+) = [^\n=]*\([^\n]*%?" + re.escape(move) + r"[,)]", hlo).group(1)


def returns_line(function: str) -> int:
    for number, line in enumerate(SCENARIOS.read_text().splitlines(), 1):
        if line.endswith(f"# returns: {function}"):
            return number
    raise AssertionError(function)


def test_dump_modules_pair_xla_and_jax_files(full_dump):
    modules = find_dumped_modules(full_dump)
    names = (
        [
            "jit_unpinned_pair",
            "jit_stream_param",
            "jit_unpinned_single",
            "jit_unpinned_pair",
        ]
        if TYPED
        else ["jit_move_then_scale", "jit_carry_host", "jit_move_then_scale"]
    )

    assert [m.name for m in modules] == names  # oldest first
    assert [m.number for m in modules] == sorted(m.number for m in modules)
    for module in modules:
        assert module.hlo_text and module.hlo_proto
        assert module.compiled, "the CPU compiler finished: after_optimizations exist"
    # JAX's files go with the latest compilation of each name; the retrace has the later one.
    first, retrace = modules[0], modules[-1]
    assert first.jax_mlir is None
    assert retrace.jax_mlir.endswith(f"_{retrace.name}_compile.mlir")
    assert retrace.jax_number > max(m.jax_number for m in modules[1:-1])


@propagation_only
@pytest.mark.parametrize("dump_kind", ["text_dump", "proto_dump", "full_dump"])
def test_old_format_error_maps_to_output_and_source(dump_kind, request):
    dump = request.getfixturevalue(dump_kind)
    starting = first_user_of_move_to_host(hlo_text(request.getfixturevalue("full_dump"), "move_then_scale"))
    log = render("old_format.log", instruction=starting)

    explanation = explain(log, dump)

    [match] = explanation.matches
    assert match.module.name == "jit_move_then_scale"
    assert match.located_by == "instruction"
    assert match.output_indices == (1,)
    [slot] = match.outputs
    assert slot.memory_kind == "device"
    assert slot.span.line == returns_line("move_then_scale")
    assert slot.path == ("[1]" if dump_kind == "full_dump" else None)
    [diagnostic] = match.diagnostics
    assert (diagnostic.code, diagnostic.output_index) == ("OFL1200", 1)
    assert diagnostic.origin.kind == "move_to_host"
    assert diagnostic.origin.span.line == returns_line("move_then_scale") - 1
    assert explanation.reports == (match.report,)
    assert f"following {starting} to the outputs" in explanation.text
    assert f"computed at {slot.span.path}:{slot.span.line}" in explanation.text


@propagation_only
def test_a_name_the_dump_cannot_place_falls_back_to_the_analysis(full_dump):
    """The carry's move feeds a tuple that HLO import folds into the while: the analysis decides."""
    starting = first_user_of_move_to_host(hlo_text(full_dump, "carry_host"))
    explanation = explain(render("old_format.log", instruction=starting), full_dump)

    [match] = explanation.matches
    assert match.module.name == "jit_carry_host"
    assert match.located_by == "analysis"
    assert match.output_indices == (0,)
    assert match.diagnostics[0].origin.span.line == returns_line("carry_host") - 2


@typed_only
@pytest.mark.parametrize("dump_kind", ["text_dump", "proto_dump", "full_dump"])
def test_new_format_root_tuple_maps_to_the_host_output(dump_kind, request):
    dump = request.getfixturevalue(dump_kind)
    name = root_name(hlo_text(request.getfixturevalue("full_dump"), "unpinned_pair"))
    log = render("new_format.log", reference=f"starting from {name}")

    explanation = explain(log, dump)

    [match] = explanation.matches
    assert match.module.name == "jit_unpinned_pair"
    # Output 2 is declared pinned_host: read from JAX's attributes or from S(5) in XLA's layout.
    assert match.entry_outputs[2].memory_kind == "pinned_host"
    assert not [d for d in match.report.diagnostics if d.output_index == 2]
    # stream_param's root tuple has the same name, but no host value goes into it there.
    assert name == root_name(hlo_text(request.getfixturevalue("full_dump"), "stream_param"))
    assert not any("stream_param" in note for note in explanation.notes)
    assert (match.located_by, match.output_indices) == ("instruction", (1,))
    assert match.outputs[0].span.line == returns_line("unpinned_pair") - 1
    assert match.diagnostics[0].code == "OFL1200"
    assert {d.code for d in match.report.diagnostics} >= {"OFL1200", "OFL1204"}


@typed_only
@pytest.mark.parametrize("dump_kind", ["text_dump", "proto_dump"])
def test_custom_call_root_message_matches_the_module_the_analysis_confirms(dump_kind, request):
    """XLA's main branch words a root move's error ``(custom call "NAME")``. The released
    compilers repair such a root (a copy to host takes its place), so the analysis confirms no
    error in the single-output module; of the modules that define the name, explain matches
    the one whose error it confirms."""
    dump = request.getfixturevalue(dump_kind)
    move = root_name(hlo_text(request.getfixturevalue("full_dump"), "unpinned_single"))
    explanation = explain(render("new_format.log", reference=f'custom call "{move}"'), dump)

    [match] = explanation.matches
    assert match.module.name == "jit_unpinned_pair"
    assert [d.code for d in match.diagnostics] == ["OFL1200"]


@typed_only
def test_streamed_parameter_reaches_both_outputs(full_dump):
    name = parameter_name(hlo_text(full_dump, "stream_param"))
    explanation = explain(render("new_format.log", reference=f"starting from {name}"), full_dump)

    [match] = explanation.matches
    assert match.module.name == "jit_stream_param"
    assert match.output_indices == (0, 1)
    assert [slot.path for slot in match.outputs] == ["[0]", "[1]"]
    assert len(match.diagnostics) == 1 and len(match.other_diagnostics) == 1
    assert {
        match.diagnostics[0].output_index,
        match.other_diagnostics[0].output_index,
    } == {0, 1}
    assert match.diagnostics[0].origin.kind == "host_argument"
    assert "XLA stops at the first; the same problem also reaches" in explanation.text


def test_the_module_that_did_not_finish_compiling_is_preferred(full_dump, tmp_path):
    """A TPU run that failed leaves only ``before_optimizations`` files for that module. The
    function's retrace compiled later, with the same names, would fit the message as well."""
    function = "unpinned_pair" if TYPED else "move_then_scale"
    compiles = [m for m in find_dumped_modules(full_dump) if m.name == f"jit_{function}"]
    assert len(compiles) == 2
    failed = min(m.number for m in compiles)
    prefix = f"module_{failed:04d}."
    dump = copy_dump(
        full_dump,
        tmp_path / "failed",
        lambda p: not (p.name.startswith(prefix) and "after_optimizations" in p.name),
    )
    hlo = hlo_text(full_dump, function)
    name = root_name(hlo) if TYPED else first_user_of_move_to_host(hlo)

    explanation = explain(render("old_format.log", instruction=name), dump)

    [match] = explanation.matches
    assert (match.module.name, match.module.number) == (f"jit_{function}", failed)
    assert not match.module.compiled
    assert explanation.notes == ()
    # Without that signal the later compilation is taken, and the other one is named.
    explanation = explain(render("old_format.log", instruction=name), full_dump)
    [match] = explanation.matches
    assert match.module.number > failed
    assert any(f"also defined in {prefix}" in note for note in explanation.notes)


def test_trace_output_index_wins_over_the_name(full_dump):
    function = "unpinned_pair" if TYPED else "move_then_scale"
    log = (
        "I0000 host_offloader.cc:331] Instruction trace leading to error:\n"
        "I0000 host_offloader.cc:333] {Instr: renamed.99, ShapeIndex: {}}\n"
        "I0000 host_offloader.cc:333] {Instr: tuple.77, ShapeIndex: {1}}\n"
        + render("new_format.log", reference="starting from renamed.99")
    )
    explanation = explain(log, full_dump)

    [match] = explanation.matches
    assert match.module.name == f"jit_{function}"
    assert (match.located_by, match.output_indices) == ("trace", (1,))
    assert match.diagnostics[0].output_index == 1


@pytest.mark.parametrize("kept", ["jax", "module.mlir"])
def test_stablehlo_dump_alone_is_enough(kept, full_dump, tmp_path):
    """JAX's ``JAX_DUMP_IR_TO`` files, or the ``module.mlir`` copies newer XLA writes."""
    if kept == "module.mlir" and not list(full_dump.glob("module_*/module.mlir")):
        pytest.skip("this XLA does not write module_NNNN.NAME/module.mlir")
    in_kept = (
        (lambda p: "jax" in p.parts[-2:])
        if kept == "jax"
        else (lambda p: (p.is_dir() and p.name.startswith("module_")) or p.name == "module.mlir")
    )
    dump = copy_dump(full_dump, tmp_path / "stablehlo_only", in_kept)
    function = "unpinned_pair" if TYPED else "move_then_scale"
    modules = [m for m in find_dumped_modules(dump) if m.name == f"jit_{function}"]
    assert modules and all(m.hlo_text is None and m.hlo_proto is None for m in modules)
    hlo = hlo_text(full_dump, function)
    # Converting the StableHLO with jaxlib gives the names XLA's own conversion gave.
    name = root_name(hlo) if TYPED else first_user_of_move_to_host(hlo)

    explanation = explain(render("old_format.log", instruction=name), dump)

    [match] = explanation.matches
    assert match.module.name == f"jit_{function}"
    expected_kind = "jax-ir" if kept == "jax" else "xla-mlir"
    assert (match.source_kind, match.located_by, match.output_indices) == (
        expected_kind,
        "instruction",
        (1,),
    )
    assert match.outputs[0].path == "[1]"


def test_an_empty_dump_directory_is_reported(tmp_path):
    explanation = explain(render("old_format.log", instruction="tuple.64"), tmp_path)

    assert explanation.matches == ()
    assert any("holds no XLA or JAX module dump" in note for note in explanation.notes)
    assert "The dump did not contain the module this error came from." in explanation.text
