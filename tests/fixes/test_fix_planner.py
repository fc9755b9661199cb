"""The planner: strategy rule, grouping by origin, placements, fallbacks, safety labels.

Diagnostics are built directly (they are plain data), against small source files.
"""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import pytest

from offload_fixer import jax_compat
from offload_fixer.codemods.host_output import HostOutputCommand
from offload_fixer.codemods.pin_host_memory import PinHostMemoryCommand
from offload_fixer.fixes import apply_plans, choose_strategy, plan_fixes
from offload_fixer.model import Diagnostic, FunctionRef, Origin, Report, Span, Step

NEW_JAX, OLD_JAX, LEGACY_JAX = "0.10.2", "0.6.2", "0.4.26"

OFFLOAD = """\
import jax
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((1,), ("x",))
host = NamedSharding(mesh, P(), memory_kind="pinned_host")


@jax.jit
def step(x):
    h = jax.device_put(x, host)
    if x.ndim > 1:
        return x, h
    return x * 2, h
"""

STREAMED = """\
import jax
from jax.sharding import NamedSharding, PartitionSpec as P

mesh = jax.make_mesh((1,), ("x",))
host = NamedSharding(mesh, P(), memory_kind="pinned_host")
device = NamedSharding(mesh, P())


def train_step(params, batch):
    loss = (params * batch).sum()
    return params - loss, loss


train = jax.jit(train_step, in_shardings=(host, device))
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def ofl1200(
    path: str,
    output: str,
    origin: Origin,
    function: str = "step",
    line: int = 8,
    trace: tuple[Step, ...] = (),
    return_line: int | None = None,
) -> Diagnostic:
    return Diagnostic(
        code="OFL1200",
        severity="error",
        target="tpu",
        message="host value reaches a device output",
        explanation="",
        output_path=output,
        origin=origin,
        trace=trace,
        return_span=Span(path, return_line) if return_line else None,
        function=FunctionRef(function, path, line),
    )


def moved(path: str, line: int = 10, col: int = 9) -> Origin:
    return Origin(
        "move_to_host",
        "pinned_host",
        Span(path, line, col),
        "device_put to pinned_host",
        key=f"move:{line}",
    )


def streamed(argument: str | None = "params", index: int = 0) -> Origin:
    """A host-argument origin as the analysis writes it: JAX's argument label and flat index."""
    label = argument if argument is not None else f"argument {index}"
    return Origin(
        "host_argument",
        "pinned_host",
        None,
        f"argument {label} declared pinned_host (in_shardings)",
        key=f"arg:{index}",
        argument=argument,
        argument_index=index,
    )


@pytest.mark.parametrize(
    ("kind", "version", "requested", "computed_on", "expected"),
    [
        ("move_to_host", OLD_JAX, "auto", False, "host"),
        ("move_to_host", NEW_JAX, "auto", False, "host"),
        # an offloaded value computed on: the computation belongs on device
        ("move_to_host", OLD_JAX, "auto", True, "device"),
        ("move_to_host", OLD_JAX, "host", True, "host"),
        # a streamed argument computed on moves to device where it is read, in every version
        # (JAX 0.10.2 and 0.12 emit that move; the released compiler rejects the host outputs)
        ("host_argument", OLD_JAX, "auto", True, "device"),
        ("host_argument", NEW_JAX, "auto", True, "device"),
        ("host_argument", NEW_JAX, "host", True, "device"),
        ("host_argument", NEW_JAX, "device", True, "device"),
        # ... and one passed straight through to an output stays host memory
        ("host_argument", NEW_JAX, "auto", False, "host"),
        ("host_argument", OLD_JAX, "device", False, "device"),
        ("offload_policy", OLD_JAX, "auto", False, "device"),
        ("host_compute", OLD_JAX, "auto", False, "device"),
        ("move_to_host", OLD_JAX, "device", False, "device"),
        ("offload_policy", NEW_JAX, "host", False, "host"),
    ],
)
def test_strategy_rule(kind: str, version: str, requested: str, computed_on: bool, expected: str) -> None:
    origin = Origin(kind, "pinned_host")  # type: ignore[arg-type]
    strategy, why = choose_strategy(origin, requested, jax_compat.spelling(version), computed_on)
    assert strategy == expected
    assert why


def test_one_plan_per_origin_covering_all_its_outputs(tmp_path: Path) -> None:
    path = write(tmp_path, "offload.py", OFFLOAD)
    origin = moved(path)
    diagnostics = [
        ofl1200(path, "[1]", origin),
        ofl1200(path, "[0]", origin),
        Diagnostic("OFL1201", "warning", "tpu", "m", "e", origin=origin, function=FunctionRef("step", path, 8)),
    ]
    plans = plan_fixes(diagnostics, strategy="device", jax_version=NEW_JAX)
    assert len(plans) == 1
    (plan,) = plans
    assert plan.output_paths == ("[1]", "[0]")
    assert plan.diagnostics == tuple(diagnostics)  # the host compute has the same root cause
    assert plan.covered == tuple(diagnostics[:2])  # a move at the returns leaves the compute on host
    # Both returns (no return_span: a dynamic diagnostic), both outputs of each.
    assert len(plan.edits) == 4 and plan.safety == "safe"


def test_reports_and_diagnostics_mixed_in_one_list_are_refused(tmp_path: Path) -> None:
    """Either reports (their outputs shape the fixes) or plain diagnostics, not both at once."""
    path = write(tmp_path, "offload.py", OFFLOAD)
    diagnostic = ofl1200(path, "[1]", moved(path))
    report = Report((diagnostic,), "tpu", NEW_JAX)
    with pytest.raises(TypeError, match="not a mix of both"):
        plan_fixes([report, diagnostic], jax_version=NEW_JAX)
    assert plan_fixes([report], jax_version=NEW_JAX) == plan_fixes([diagnostic], jax_version=NEW_JAX)


def test_separate_origins_make_separate_plans(tmp_path: Path) -> None:
    path = write(tmp_path, "offload.py", OFFLOAD)
    plans = plan_fixes(
        [ofl1200(path, "[1]", moved(path)), ofl1200(path, "[0]", moved(path, 12, 20))],
        jax_version=NEW_JAX,
    )
    assert [p.origin_key for p in plans] == ["move:10", "move:12"]


def test_move_to_host_declares_host_output_with_the_moves_sharding(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "offload.py", OFFLOAD)
    (plan,) = plan_fixes([ofl1200(path, "[1]", moved(path))], jax_version=OLD_JAX)
    assert (plan.strategy, plan.codemod, plan.safety) == ("host", HostOutputCommand, "safe")
    (result,) = apply_plans([plan], write=False)
    assert "+@partial(jax.jit, out_shardings=(None, host))\n" in result.diff
    assert "+from functools import partial\n" in result.diff


def test_return_span_limits_the_edit_to_that_return(tmp_path: Path) -> None:
    path = write(tmp_path, "offload.py", OFFLOAD)
    (plan,) = plan_fixes(
        [ofl1200(path, "[1]", moved(path), return_line=13)],
        strategy="device",
        jax_version=NEW_JAX,
    )
    assert plan.target.return_lines == (13,)
    (result,) = apply_plans([plan], write=False)
    assert sum(1 for line in result.diff.splitlines() if line.startswith("+") and not line.startswith("+++")) == 1
    assert "+    return x * 2, jax.device_put(h, jax.memory.Space.Device)\n" in result.diff


COMPUTED = OFFLOAD.replace("return x, h\n", "return x, h * 2\n")


def test_host_compute_moves_the_operand_back_where_it_is_computed_on(tmp_path: Path) -> None:
    path = write(tmp_path, "offload.py", COMPUTED)
    trace = (Step("device_put", "move to host"), Step("stablehlo.multiply", "host compute", Span(path, 12, 19)))
    diagnostics = [
        ofl1200(path, "[1]", moved(path), trace=trace),
        Diagnostic(
            "OFL1201",
            "warning",
            "tpu",
            "m",
            "e",
            origin=moved(path),
            trace=trace[1:],
            function=FunctionRef("step", path, 8),
        ),
    ]
    (plan,) = plan_fixes(diagnostics, jax_version=NEW_JAX)  # auto: computed on, so device
    assert (plan.strategy, plan.target.placement, plan.safety) == ("device", "operand", "safe")
    assert plan.covered == tuple(diagnostics)
    assert plan.title == "Move h back to device where it is computed on (line 12)"
    (result,) = apply_plans([plan], write=False)
    assert "+        return x, jax.device_put(h, jax.memory.Space.Device) * 2\n" in result.diff


def test_host_compute_elsewhere_moves_back_right_after_the_offload(tmp_path: Path) -> None:
    path = write(tmp_path, "offload.py", OFFLOAD)
    trace = (
        Step("device_put", "move to host"),
        Step("stablehlo.multiply", "host compute", Span(path, 40, 1)),  # in another function
    )
    (plan,) = plan_fixes(
        [ofl1200(path, "[1]", moved(path), trace=trace)],
        strategy="device",
        jax_version=NEW_JAX,
    )
    assert plan.target.placement == "return"
    plan = plan_fixes(
        [
            Diagnostic(
                "OFL1201",
                "warning",
                "tpu",
                "m",
                "e",
                origin=moved(path),
                trace=trace[1:],
                function=FunctionRef("step", path, 8),
            )
        ],
        jax_version=NEW_JAX,
    )[0]
    assert plan.target.placement == "after_origin"
    assert plan.safety == "unsafe" and "undoing the offload" in plan.unsafe_reasons[0]
    assert apply_plans([plan], write=False)[0].diff == ""  # unsafe: not applied by default
    (result,) = apply_plans([plan], write=False, unsafe=True)
    assert "+    h = jax.device_put(h, jax.memory.Space.Device)\n" in result.diff


HOST_COMPUTE = (Step("stablehlo.multiply", "host compute"),)


def test_streamed_parameter_computed_on_moves_to_device_at_entry(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "streamed.py", STREAMED)
    (plan,) = plan_fixes([ofl1200(path, "[0]", streamed(), "train_step", 9, trace=HOST_COMPUTE)], jax_version=OLD_JAX)
    assert (plan.strategy, plan.target.placement, plan.target.parameter) == (
        "device",
        "entry",
        "params",
    )
    assert plan.safety == "safe"  # reusing the file's own sharding, at the intended place
    (result,) = apply_plans([plan], write=False)
    assert '+    params = jax.device_put(params, host.with_memory_kind("device"))\n' in result.diff


def test_parameter_from_argument_index(tmp_path: Path) -> None:
    path = write(tmp_path, "streamed.py", STREAMED)
    origin = streamed(None, 1)
    (plan,) = plan_fixes([ofl1200(path, "[1]", origin, "train_step", 9, trace=HOST_COMPUTE)], jax_version=OLD_JAX)
    assert plan.target.parameter == "batch"


def test_streamed_parameter_passed_through_stays_host_memory(tmp_path: Path) -> None:
    path = write(tmp_path, "streamed.py", STREAMED)
    (plan,) = plan_fixes(
        [ofl1200(path, "[0]", streamed(), "train_step", 9)],
        jax_version=NEW_JAX,
    )
    assert (plan.strategy, plan.safety) == ("host", "safe")
    (result,) = apply_plans([plan], write=False)
    assert "+train = jax.jit(train_step, in_shardings=(host, device), out_shardings=(host, None))\n" in result.diff


def test_auto_falls_back_to_device_without_a_jit_site(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "helper.py",
        """\
        import jax

        def step(x, host):
            h = jax.device_put(x, host)
            return x, h
        """,
    )
    (plan,) = plan_fixes([ofl1200(path, "[1]", moved(path, 4, 9), line=3)], jax_version=NEW_JAX)
    assert plan.strategy == "device"
    assert "no jax.jit site" in plan.rationale


def test_explicit_host_without_a_jit_site_is_display_only(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "helper.py",
        """\
        import jax

        def step(x, host):
            return x, jax.device_put(x, host)
        """,
    )
    (plan,) = plan_fixes(
        [ofl1200(path, "[1]", moved(path, 4, 15), line=3)],
        strategy="host",
        jax_version=NEW_JAX,
    )
    assert plan.safety == "display-only"
    assert any("no jax.jit site" in p for p in plan.problems)
    (result,) = apply_plans([plan], write=True, unsafe=True)
    assert not result.changed and result.skipped[0][1].startswith("display-only")


def test_legacy_jax_notes_none_leaves(tmp_path: Path) -> None:
    path = write(tmp_path, "offload.py", OFFLOAD)
    (plan,) = plan_fixes([ofl1200(path, "[1]", moved(path))], jax_version=LEGACY_JAX)
    assert plan.strategy == "host"
    assert any("never inherits host memory" in note for note in plan.notes)


def test_plans_from_a_json_report(tmp_path: Path) -> None:
    path = write(tmp_path, "offload.py", OFFLOAD)
    report = Report((ofl1200(path, "[1]", moved(path)),), target="tpu", jax_version=OLD_JAX)
    (plan,) = plan_fixes(report.to_dict())
    assert plan.target.spelling.memory_space is None  # the report's JAX version, not the installed one
    assert plan.source_sha256 is not None


def test_missing_source_is_display_only(tmp_path: Path) -> None:
    path = str(tmp_path / "gone.py")
    (plan,) = plan_fixes([ofl1200(path, "[1]", moved(path))], jax_version=NEW_JAX)
    assert plan.safety == "display-only"
    assert "cannot read" in plan.problems[0]


def test_unknown_strategy_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown strategy"):
        plan_fixes([], strategy="sideways")


def test_function_found_from_the_origin_line_alone(tmp_path: Path) -> None:
    path = write(tmp_path, "offload.py", OFFLOAD)
    diagnostic = ofl1200(path, "[1]", moved(path), trace=())
    anonymous = Diagnostic(**{**diagnostic.__dict__, "function": None})
    (plan,) = plan_fixes([anonymous], jax_version=NEW_JAX)
    assert plan.target.function_line is None and plan.target.inner_line == 10
    assert plan.strategy == "host" and plan.safety == "safe"


def test_streamed_leaves_of_one_argument_are_one_plan(tmp_path: Path) -> None:
    path = write(tmp_path, "streamed.py", STREAMED)
    leaves = [streamed(f"params['{k}']", i) for i, k in enumerate("ab")]
    plans = plan_fixes([ofl1200(path, "[0]", o, "train_step", 9) for o in leaves], jax_version=OLD_JAX)
    (plan,) = plans
    assert (plan.target.parameter, plan.target.parameter_path) == ("params", "['a']")
    assert len(plan.diagnostics) == 2


def test_plans_against_an_unsaved_text(tmp_path: Path) -> None:
    path = write(tmp_path, "offload.py", OFFLOAD)
    unsaved = OFFLOAD.replace("    return x * 2, h\n", "    return x * 3, h\n")
    (plan,) = plan_fixes(
        [ofl1200(path, "[1]", moved(path))], strategy="device", jax_version=NEW_JAX, texts={path: unsaved.encode()}
    )
    assert plan.source_sha256 == hashlib.sha256(unsaved.encode()).hexdigest()
    assert [e.description for e in plan.edits][-1].endswith("jax.device_put(h, jax.memory.Space.Device)")


UNPINNED = """\
import jax
from jax.sharding import SingleDeviceSharding

STASH = SingleDeviceSharding(jax.devices()[0], memory_kind="unpinned_host")


@jax.jit
def step(x):
    saved = jax.device_put(x, STASH)
    return saved, x + 1
"""


@pytest.mark.parametrize(
    ("version", "command"),
    [(NEW_JAX, PinHostMemoryCommand), (OLD_JAX, PinHostMemoryCommand), (LEGACY_JAX, HostOutputCommand)],
)
def test_unpinned_move_is_kept_on_host_by_spelling_pinned_host(tmp_path: Path, version: str, command: type) -> None:
    path = write(tmp_path, "unpinned.py", UNPINNED)
    origin = Origin("move_to_host", "unpinned_host", Span(path, 9, 13), key="move:9")
    (plan,) = plan_fixes([ofl1200(path, "[0]", origin, "step", 8)], jax_version=version)
    # before 0.4.29 an output's memory kind never follows the value: out_shardings must say it
    assert (plan.strategy, plan.codemod, plan.safety) == ("host", command, "safe")
    if command is PinHostMemoryCommand:
        (result,) = apply_plans([plan], write=False)
        assert '+STASH = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")\n' in result.diff
