"""XLA's own host-offloader tests, replayed as StableHLO through ``offload_fixer.analyze``.

Each ``xla_cases/<Name>.mlir`` is the StableHLO JAX would hand XLA for the HLO module of the
test ``<Name>`` in ``xla/hlo/transforms/host_offloader_test.cc``; its header comment says what
XLA asserts. The table below turns that assertion into the analysis' expected report, the same
on both targets. Where a released compiler decides otherwise than the XLA test (a move that is
the whole single output is repaired, not rejected), the table follows the released compiler
and the fixture's header says so; ``tests/xla/test_fidelity.py`` compiles every fixture with
libtpu and the CUDA plugin to hold the table to that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from offload_fixer import analyze, jax_compat
from offload_fixer.model import TARGETS, Report

CASES_DIR = Path(__file__).parent / "xla_cases"


@dataclass(frozen=True)
class Expect:
    """What XLA decides for one module, written for the ``tpu`` target."""

    verdicts: tuple[str, ...]
    """Per flat output: device | streamed | host | repaired | error."""
    paths: tuple[str, ...] = ()
    """Per flat output, the pytree path the module's ``jax.result_info`` names (checked when given)."""
    failures: frozenset[str] = frozenset()
    """Error codes other than OFL1200 that XLA's pass fails with (on every target)."""
    absent: frozenset[str] = field(default_factory=frozenset)
    """Codes that must not be reported at all."""


STREAM = "streamed"
DEV = "device"
ERR = "error"

EXPECTED: dict[str, Expect] = {
    "InvalidOutputStreaming": Expect((ERR, DEV), paths=("[0]", "[1]")),
    "OutputStreaming": Expect((STREAM, DEV), paths=("[0]", "[1]")),
    "OutputStreamingWithoutTuple": Expect((STREAM,), paths=("",)),
    "OutputStreamingCustomCallRoot": Expect((STREAM,), paths=("",)),
    "OutputStreamingNoOpToDevice": Expect((STREAM,)),
    "OutputStreamingInScanLoop": Expect((DEV, STREAM)),
    "OutputStreamingInUnrolledScanLoop": Expect((STREAM,)),
    "AvoidRedundantCopiesToHost": Expect((STREAM,), absent=frozenset({"OFL1205"})),
    "MoveToHostInsideWhileLoopBodyShareSameBroadcast": Expect(
        (STREAM, STREAM, DEV, DEV, DEV, DEV),
        paths=("[0]", "[1]", "[2]", "[3]", "[4]", "[5]"),
    ),
    "ParameterAndOutputStreamingPassThrough": Expect((STREAM,)),
    "ParameterAndOutputStreamingPassThroughTuple": Expect((STREAM,)),
    "ParameterStreaming": Expect((DEV, DEV), absent=frozenset({"OFL1201"})),
    "TupleParameterStreaming": Expect((DEV,), absent=frozenset({"OFL1201"})),
    "ParameterStreamingFeedingIntoWhile": Expect((DEV,), absent=frozenset({"OFL1201"})),
    "OffloadPassedToEntryComputationRoot": Expect((DEV,), paths=("[0]",)),
    "NoCopyWithOptBarrierMoreElaborate": Expect((DEV,), absent=frozenset({"OFL1201", "OFL1206"})),
    "Conditional": Expect((STREAM, STREAM, DEV)),
    "DusFirstOperandIsNotFromABroadcast": Expect((DEV,), failures=frozenset({"OFL1202"})),
    "BasicDusDsDusAnnotationOnWrongSide": Expect((DEV,), failures=frozenset({"OFL1207"})),
    "DusAnnotationAfterUpdateWellFormed": Expect((DEV,), absent=frozenset({"OFL1202"})),
    "AutomaticHostComputeOffloadDisabled": Expect((DEV,)),
    "BasicAsyncHostOffloadedCall_RemoveRedundantCopies": Expect((STREAM, STREAM)),
    "BasicAsyncHostOffloadedCall_NoChangesWhenEntryLayoutExpectsHBM": Expect((DEV, DEV)),
    "BasicAsyncHostOffloadedCall_RemoveOnlyRedundantCopies": Expect((STREAM, STREAM)),
    "SingleOutputToHost": Expect(("repaired",), paths=("",)),
    "TupleOutputMixedMemorySpaces": Expect((DEV, ERR, DEV), paths=("[0]", "[1]", "[2]")),
}

ASYNC_HOST_CALL_CASES = sorted(name for name in EXPECTED if name.startswith("BasicAsyncHostOffloadedCall_"))


def _load(name: str) -> str:
    return (CASES_DIR / f"{name}.mlir").read_text()


def _codes(report: Report, severity: str | None = None) -> list[tuple[str, int | None]]:
    return sorted(
        ((d.code, d.output_index) for d in report.diagnostics if severity is None or d.severity == severity),
        key=repr,
    )


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_parses_with_jaxlib(name: str):
    """Each fixture is valid StableHLO for the installed jaxlib, independent of the analysis."""
    module = jax_compat.parse_stablehlo(_load(name))
    assert module.operation.verify()
    assert _load(name).startswith("// ")


def test_every_fixture_has_an_expectation():
    on_disk = {p.stem for p in CASES_DIR.glob("*.mlir")}
    assert on_disk == set(EXPECTED)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_xla_case(name: str, target: str):
    expect = EXPECTED[name]
    report = analyze(_load(name), target=target)

    assert [o.index for o in report.outputs] == list(range(len(expect.verdicts)))
    assert [o.verdict for o in report.outputs] == list(expect.verdicts)
    if expect.paths:
        assert [o.path for o in report.outputs] == list(expect.paths)

    host_to_device_outputs = [i for i, v in enumerate(expect.verdicts) if v == ERR]
    ofl1200 = report.by_code("OFL1200")
    assert sorted(d.output_index for d in ofl1200) == host_to_device_outputs
    for diagnostic in ofl1200:
        assert diagnostic.severity == "error"
        assert diagnostic.output_path == report.outputs[diagnostic.output_index].path
        assert diagnostic.origin is not None and diagnostic.origin.kind == "move_to_host"

    errors = [code for code, _ in _codes(report, "error")]
    expected_errors = sorted(expect.failures) + ["OFL1200"] * len(host_to_device_outputs)
    assert sorted(errors) == sorted(expected_errors)
    for code in expect.absent:
        assert not report.by_code(code), f"{code} reported: {report.by_code(code)}"


@pytest.mark.parametrize("target", TARGETS)
def test_tanh_on_host_memory_becomes_host_compute(target: str):
    """TanhOnHostMemory: by default XLA converts the tanh to host compute and only warns."""
    report = analyze(_load("AutomaticHostComputeOffloadDisabled"), target=target)
    host_compute = report.by_code("OFL1201")
    assert len(host_compute) == 1
    assert host_compute[0].severity in ("warning", "info")
    assert host_compute[0].origin.kind == "move_to_host"
    assert not report.errors


@pytest.mark.parametrize("target", TARGETS)
def test_automatic_host_compute_offload_disabled_is_an_error(target: str):
    """With xla_disable_automatic_host_compute_offload the same module fails (InvalidArgument)."""
    report = analyze(
        _load("AutomaticHostComputeOffloadDisabled"),
        target=target,
        host_compute_offload=False,
    )
    assert [d.code for d in report.errors] == ["OFL1201"]
    assert report.errors[0].message == "Automatic host compute offloading is disabled."


@pytest.mark.parametrize("name", ASYNC_HOST_CALL_CASES)
def test_compute_on_call_is_not_accidental_host_compute(name: str):
    """A compute_on("device_host") call runs as an async host call whose computation XLA's walk
    does not enter (it stops at the non-aliasing HostExecute custom call), and whose results are
    device buffers: neither the body's ops nor device ops on the results (the unused add of
    RemoveOnlyRedundantCopies) are "device compute in host memory space"."""
    report = analyze(_load(name), target="gpu")
    assert not report.by_code("OFL1201")


def test_invalid_output_streaming_message_names_the_starting_tuple():
    """XLA names the first non-bitcast user of the MoveToHost: the entry root tuple."""
    (diagnostic,) = analyze(_load("InvalidOutputStreaming"), target="tpu").by_code("OFL1200")
    assert diagnostic.message.startswith("Tensor which is moved to host (starting from tuple")


@pytest.mark.parametrize("target", TARGETS)
def test_single_output_to_host_is_repaired(target: str):
    """A MoveToHost that is itself the root of a single-output computation: XLA's sources
    (and its test) reject it, the released compilers insert a copy to host in its place."""
    report = analyze(_load("SingleOutputToHost"), target=target)
    assert not report.errors and report.predicted.outcome == "compiled"
