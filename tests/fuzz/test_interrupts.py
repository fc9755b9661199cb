"""A few interrupted many-file ``check --fix`` runs (``scripts/fuzz.py --interrupts N`` runs more)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from .bad_input import ENTRY
from .interrupts import SIGNALS, interrupt_once, reference

pytestmark = pytest.mark.skipif(ENTRY is None, reason="the offload-fixer entry point is not installed here")


def test_every_file_is_original_or_fully_fixed(tmp_path: Path) -> None:
    originals, fixed, took = reference(tmp_path, files=30)
    rng = random.Random(17)
    seen = set()
    for _ in range(len(SIGNALS)):
        outcome = interrupt_once(tmp_path, originals, fixed, took, rng)
        seen.add(outcome.signal)
        assert outcome.problems == [], (outcome.signal, outcome.delay_s, outcome.problems)
        assert outcome.original + outcome.fixed == len(originals)
