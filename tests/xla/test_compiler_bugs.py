"""The known compiler bugs (``jax_compat.compiler_bugs``) against their probes on the installed
compilers: a release the table says has the bug fails the probe and the finding says which
release fixes it; a release at or after the fix compiles the probe and the finding (if the
model still predicts one for its generation) is not called a bug."""

from __future__ import annotations

import probes
import pytest

from offload_fixer import analyze
from offload_fixer.fixes.planner import plan_fixes
from offload_fixer.jax_compat import compiler_bugs
from offload_fixer.jax_compat.compiler_bugs import COMPILER_BUGS, CompilerBug

PROBES = {probe.name: probe for probe in probes.PROBES}


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


@pytest.mark.parametrize("bug", COMPILER_BUGS, ids=[bug.failure for bug in COMPILER_BUGS])
def test_each_bug_is_measured_on_its_probe(bug: CompilerBug):
    assert bug.probe in PROBES
    failing = [_release(r) for r in bug.measured_failing]
    assert failing == sorted(failing) and failing[-1] < _release(bug.fixed_in)
    assert bug.fixing_jax is not None and compiler_bugs.LIBTPU_OF_JAXLIB[bug.fixing_jax] == bug.fixed_in


@pytest.mark.parametrize("bug", COMPILER_BUGS, ids=[bug.failure for bug in COMPILER_BUGS])
def test_the_installed_compiler_gives_what_the_table_says(bug: CompilerBug, tpu_compiler):
    probe = PROBES[bug.probe]
    reason = probes.skip_reason(probe, bug.target)
    if reason:
        pytest.skip(reason)
    lowered = probes.lower(probe, "tpu")
    release = compiler_bugs.compiler_release(bug.target)
    assert release is not None and tpu_compiler.compiler == f"{bug.package} {release}"
    verdict = tpu_compiler.judge(lowered)
    notes = [d for d in analyze(lowered, bug.target).diagnostics if d.compiler_bug is not None]
    if bug.affects(release):
        assert verdict.outcome != "compiled", verdict
        [finding] = notes
        assert finding.message.endswith(bug.summary(release))
        assert f"a bug of libtpu {release}, fixed in {bug.fixed_in}: upgrade JAX to {bug.fixing_jax}" in finding.message
    else:
        assert not notes
        if _release(release) >= _release(bug.fixed_in):
            assert verdict.outcome == "compiled", verdict.message


def test_a_known_bug_is_edited_around_only_with_the_workaround_strategy(tpu_compiler):
    """The unpinned-output bug's workaround is OFL1204's own fix ("pinned_host"): planned for the
    finding under ``workaround``, never under the other strategies."""
    bug = next(b for b in COMPILER_BUGS if b.failure == "tpu-unpinned-output")
    release = compiler_bugs.compiler_release("tpu")
    if release is None or not bug.affects(release):
        pytest.skip(f"libtpu {release} does not have the bug")
    report = analyze(probes.lower(PROBES[bug.probe], "tpu"), "tpu")
    [finding] = [d for d in report.diagnostics if d.compiler_bug is not None]
    for strategy in ("auto", "device", "host"):
        assert plan_fixes([finding], strategy) == []
    [plan] = plan_fixes([finding], "workaround")
    assert finding in plan.diagnostics and plan.codemod.__name__ == "PinHostMemoryCommand"
