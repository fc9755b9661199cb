"""A change supersedes the planning of quick fixes: the worker stops it and analyses the change."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from offload_fixer.config import Settings
from offload_fixer.fixes import plan_alternatives
from offload_fixer.lsp import engine, superseding
from offload_fixer.lsp.fix_choices import fix_choices
from offload_fixer.lsp.superseding import Changes, Superseded
from offload_fixer.lsp.worker import AnalysisWorker

ROOT = Path(__file__).resolve().parents[2]
POSIX_SIGNAL = pytest.mark.skipif(superseding.SIGNAL is None, reason="no SIGUSR1 on this system")

HEAD = """\
import jax
from jax.sharding import SingleDeviceSharding

host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
"""
STEP = """

def step_{i}(params, x):
    y = params @ x
    return y * 2, y


step_{i}_jit = jax.jit(step_{i}, in_shardings=(host, None))
"""


def many_findings(steps: int) -> str:
    """A module whose every jitted step returns a host argument computed on: a finding, and its
    fixes to plan, per step."""
    return HEAD + "".join(STEP.format(i=i) for i in range(steps))


@pytest.fixture
def shared_changes():
    """The count of changes as the worker process reads it, here in this process; let go after."""
    changes = Changes()
    superseding.share(changes, in_worker_process=False)
    yield changes
    superseding.share(None, in_worker_process=False)


def test_planning_stops_at_the_first_root_cause_after_a_change(tmp_path: Path, shared_changes: Changes) -> None:
    """A planning whose ticket a change superseded returns the analysis unplanned; one not
    superseded plans every finding; a code action's planning (no ticket) is never stopped."""
    path = tmp_path / "steps.py"
    text = many_findings(3)
    path.write_text(text)
    settings = Settings()
    ticket = shared_changes.ticket()
    shared_changes.advance()
    stopped = engine.document_analysis(text, str(path), settings, plan=True, ticket=ticket)
    assert stopped.diagnostics and not stopped.planned and all(f == () for f in stopped.fixes)
    planned = engine.document_analysis(text, str(path), settings, plan=True, ticket=shared_changes.ticket())
    assert planned.planned and planned.diagnostics == stopped.diagnostics and all(planned.fixes)
    engine.forget(str(path))
    assert engine.document_analysis(text, str(path) + "x", settings, plan=True).planned


@POSIX_SIGNAL
def test_the_servers_signal_raises_in_a_superseded_planning_only(shared_changes: Changes) -> None:
    """The signal cuts short the planning of a superseded ticket, once, even where it comes
    in the planning's own ``finally``; outside a planning, or for a ticket no change
    superseded, it does nothing."""
    import signal

    previous = signal.signal(superseding.SIGNAL, superseding.on_signal)
    try:
        os.kill(os.getpid(), superseding.SIGNAL)  # no planning runs: nothing happens
        ticket = shared_changes.ticket()
        with superseding.cut_short(ticket):
            os.kill(os.getpid(), superseding.SIGNAL)  # not superseded: the planning goes on
            assert shared_changes.planning.value == 1
        assert shared_changes.planning.value == 0
        with pytest.raises(Superseded), superseding.cut_short(ticket):
            shared_changes.advance()  # in this process: the count moves, no signal is sent
            os.kill(os.getpid(), superseding.SIGNAL)
            time.sleep(1)  # a handler runs between bytecodes: long before this ends
            raise AssertionError("not cut short")
        assert shared_changes.planning.value == 0 and superseding._running is None
        os.kill(os.getpid(), superseding.SIGNAL)  # the planning is over: nothing happens
    finally:
        signal.signal(superseding.SIGNAL, previous)


@POSIX_SIGNAL
def test_the_worker_process_stops_a_planning_as_soon_as_a_change_comes(tmp_path: Path) -> None:
    """In the server's analysis worker: a planning of many findings, superseded while it runs,
    comes back unplanned, and the worker analyses the next text."""
    path = tmp_path / "steps.py"
    text = many_findings(40)
    path.write_text(text)
    worker = AnalysisWorker()
    try:
        settings = Settings()
        assert worker.submit(engine.document_analysis, text, str(path), settings, False).result().diagnostics
        planning = worker.submit(engine.document_analysis, text, str(path), settings, True, worker.changes.ticket())
        deadline = time.monotonic() + 120
        while not worker.changes.planning.value and not planning.done() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert worker.changes.planning.value, "the worker never began planning"
        worker.changes.advance()
        assert not planning.result(timeout=120).planned
        assert not worker.changes.planning.value
        edited = text.replace("y * 2", "y * 3", 1)
        assert worker.submit(engine.document_analysis, edited, str(path), settings, False).result().diagnostics
    finally:
        worker.shutdown()


@pytest.mark.parametrize(
    "program", ["several_problems.py", "optimizer_offload_broken.py"], ids=lambda name: name.removesuffix(".py")
)
def test_root_causes_planned_one_at_a_time_give_the_choices_of_one_planning(program: str, tmp_path: Path) -> None:
    """The choices the editor offers, planned root cause by root cause, are those of one
    planning of every finding (``plan_alternatives``), as ``check --fix`` plans them."""
    source = ROOT / "tests" / "lsp_fixtures" / program
    if not source.exists():
        source = ROOT / "examples" / program
    text = source.read_text(encoding="utf-8")
    path = tmp_path / program
    path.write_text(text)
    settings = Settings(jax_version="0.4.26")
    diagnostics = engine.analyse(text, str(path), settings, plan=False).diagnostics
    assert len(diagnostics) >= 2
    choices = fix_choices(diagnostics, text, str(path), settings)
    alternatives = plan_alternatives(
        diagnostics, settings.strategy, settings.jax_version, texts={str(path): text.encode()}
    )
    for d, offered in zip(diagnostics, choices):
        expected = []
        for _, plans in alternatives:
            for plan in plans:
                if d in plan.covered and plan.edits and plan.edits not in [e for _, e in expected]:
                    expected.append((plan.title, plan.edits))
        assert [c.title.removeprefix("offload-fixer: ") for c in offered] == [title for title, _ in expected]
