"""Every row of the CLI bad-input table, through the installed entry point."""

from __future__ import annotations

from pathlib import Path

import pytest

from .bad_input import CASES, ENTRY, can_make_append_only, can_make_unreadable, has_pinned_host, run_case

pytestmark = pytest.mark.skipif(ENTRY is None, reason="the offload-fixer entry point is not installed here")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input(tmp_path: Path, case) -> None:
    if case.needs_unreadable and not can_make_unreadable():
        pytest.skip("running as root without setpriv: nothing is unreadable")
    if case.name == "fix-append-only-file" and not can_make_append_only(tmp_path):
        pytest.skip("this filesystem (or user) cannot make a file append-only")
    if case.needs_pinned_host and not has_pinned_host():
        pytest.skip("this JAX's CPU build has no pinned_host memory for the program to run with")
    problem, _ = run_case(case, tmp_path)
    assert problem is None, problem
