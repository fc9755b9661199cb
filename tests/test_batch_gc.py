"""A check tunes the collector for a batch and gives a process that runs it in-process (a
notebook, a test) its collector back as it was."""

from __future__ import annotations

import gc

import pytest
from click.testing import CliRunner

from offload_fixer.batch_gc import BATCH_THRESHOLDS, tuned_for_batch
from offload_fixer.cli import main


def collector() -> tuple[tuple[int, int, int], int]:
    """The thresholds, and the frozen objects when nothing else had frozen any (then the check
    leaves its own frozen: only thawing everything could undo them)."""
    return gc.get_threshold(), gc.get_freeze_count() if frozen_by_others == 0 else -1


frozen_by_others = 0


@pytest.fixture(autouse=True)
def _frozen_by_others():
    global frozen_by_others
    frozen_by_others = gc.get_freeze_count()


def test_the_batch_settings_hold_inside_and_are_undone_after():
    before = collector()
    with tuned_for_batch():
        thresholds, frozen = collector()
    assert thresholds == BATCH_THRESHOLDS and frozen != 0
    assert collector() == before


def test_a_check_run_in_process_leaves_the_collector_as_it_was(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text("import jax\n\nf = jax.jit(lambda x: x * 2)\n")
    before = collector()
    result = CliRunner().invoke(main, ["check", "--no-cache", str(program)])
    assert result.exit_code == 0, result.output
    assert collector() == before
