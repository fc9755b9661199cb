"""A seeded sample of the names campaign (``scripts/fuzz.py --type-only N --unicode-names N`` runs more)."""

from __future__ import annotations

from pathlib import Path

import pytest

from offload_fixer import jax_compat

from .names import run_type_only_cases, run_unicode_cases

SEED = 47


@pytest.mark.skipif(
    not jax_compat.host_memory_on_this_backend(), reason="the programs need pinned_host memory (JAX >= 0.5 on CPU)"
)
def test_a_fix_of_a_module_importing_jax_for_the_type_checker_only_runs(tmp_path: Path) -> None:
    counts, problems = run_type_only_cases(12, SEED, tmp_path)
    assert problems == []
    assert counts["programs fixed"] == 12, counts


def test_identifiers_spelled_with_look_alikes_are_found_and_fixed_as_in_ascii(tmp_path: Path) -> None:
    counts, problems = run_unicode_cases(16, SEED, tmp_path)
    assert problems == []
    assert counts["programs"] == 16
