"""A seeded sample of the path and hostile-file cases (``scripts/fuzz.py --path-cases N`` runs more)."""

from __future__ import annotations

from pathlib import Path

from .paths import MAKERS, run_path_cases

SAMPLE = 24
SEED = 23


def test_writes_stay_in_the_project_once_per_file_and_no_input_costs_another_files_report(tmp_path: Path) -> None:
    counts, problems = run_path_cases(SAMPLE, SEED, tmp_path)
    assert problems == []
    assert len([key for key in counts if key.endswith(" cases")]) == len({m.__name__ for m in MAKERS}) + 1, counts
