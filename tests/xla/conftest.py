"""The released compilers as fixtures: one oracle per target for the whole test process.

Where a compiler is not installed the tests that need it skip with the reason; an
environment that must have it (CI names them in ``OFFLOAD_FIXER_REQUIRE_COMPILERS``, e.g.
``tpu,gpu``) fails instead, so a broken install cannot pass as a skip.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

for folder in (Path(__file__).parent, Path(__file__).parents[1] / "examples", Path(__file__).parents[1] / "analysis"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

REQUIRED = {t for t in os.environ.get("OFFLOAD_FIXER_REQUIRE_COMPILERS", "").split(",") if t}


def compiler(target: str):
    from offload_fixer import xla

    oracle = xla.oracle(target)
    try:
        oracle.start()
    except xla.CompilerUnavailable as exc:
        if target in REQUIRED:
            pytest.fail(f"this environment must have the {target} compiler: {exc}")
        pytest.skip(str(exc))
    return oracle


@pytest.fixture(scope="session")
def tpu_compiler():
    return compiler("tpu")


@pytest.fixture(scope="session")
def gpu_compiler():
    return compiler("gpu")


@pytest.fixture(params=["tpu", "gpu"])
def judge(request):
    return request.getfixturevalue(f"{request.param}_compiler")
