"""Each kind of symlinked state folder, and a full disk where this machine can make one
(``scripts/fuzz.py --state-cases N --full-disk N`` runs more)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .state_folders import LINKS, can_fill_a_disk, run_full_disk, run_state_cases

SEED = 47


def test_state_folders_never_lead_out_of_the_project(tmp_path: Path) -> None:
    counts, problems = run_state_cases(len(LINKS), SEED, tmp_path)
    assert problems == []
    assert sum(value for key, value in counts.items() if key.endswith(" cases")) >= 3, counts


@pytest.mark.skipif(not can_fill_a_disk(), reason="no user namespace with a tmpfs here to fill")
def test_state_files_on_a_full_disk_are_whole_or_absent_and_repaired_next_run(tmp_path: Path) -> None:
    counts, problems = run_full_disk(4, tmp_path)
    assert problems == []
    assert sum(value for key, value in counts.items() if key.endswith(" rounds")) >= 2, counts
