"""One program of each kind ``run`` must live with (``scripts/fuzz.py --programs N`` runs more)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .programs import MAKERS, can_run_programs, run_programs

SEED = 47


@pytest.mark.skipif(not can_run_programs(), reason="the programs need pinned_host memory (JAX >= 0.5 on CPU)")
def test_run_reports_once_checks_every_jit_and_survives_the_programs_state(tmp_path: Path) -> None:
    counts, problems = run_programs(len(MAKERS), SEED, tmp_path)
    assert problems == []
    assert sum(value for key, value in counts.items() if key.endswith(" programs")) >= len(MAKERS) - 1, counts
