"""A check tunes the collector for a batch and gives a process that runs it in-process (a
notebook, a test) its collector back as it was."""

from __future__ import annotations

import gc

from click.testing import CliRunner

from offload_fixer.batch_gc import BATCH_THRESHOLDS, tuned_for_batch
from offload_fixer.cli import main


def collector() -> tuple[tuple[int, int, int], int]:
    return gc.get_threshold(), gc.get_freeze_count()


def test_the_batch_settings_hold_inside_and_are_undone_after():
    before = collector()
    with tuned_for_batch():
        thresholds, frozen = collector()
    assert thresholds == BATCH_THRESHOLDS and frozen > 0
    assert collector() == before


def test_a_check_run_in_process_leaves_the_collector_as_it_was(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text("import jax\n\nf = jax.jit(lambda x: x * 2)\n")
    before = collector()
    result = CliRunner().invoke(main, ["check", "--no-cache", str(program)])
    assert result.exit_code == 0, result.output
    assert collector() == before
