"""Every mode of the symlink race once per command (``scripts/fuzz.py --races N`` runs more)."""

from __future__ import annotations

from pathlib import Path

from .races import COMMANDS, MODES, run_races

SEED = 47


def test_a_symlink_swapped_in_during_a_fix_never_takes_a_write_out_of_the_project(tmp_path: Path) -> None:
    counts, problems = run_races(len(MODES) * len(COMMANDS), SEED, tmp_path)
    assert problems == []
    assert counts["runs refused (exit 5)"] >= 4 * len(COMMANDS), counts  # every swap before or inside a write
