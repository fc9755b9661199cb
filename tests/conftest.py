"""Test-wide environment: JAX runs on the CPU, whatever accelerator plugins are installed.

The oracle layer installs libtpu and the CUDA plugin into the test environments; without
``JAX_PLATFORMS=cpu`` every JAX process (the tests' and the programs they run) would try to
start those backends on a machine that has no accelerator. Set before JAX is imported, and
inherited by every subprocess a test starts.

The released compilers are fixtures (``tpu_compiler``, ``gpu_compiler``, ``judge`` for both):
one oracle per target for the whole test process. Where a compiler is not installed the tests
that need it skip with the reason; an environment that must have it (CI names them in
``OFFLOAD_FIXER_REQUIRE_COMPILERS``, e.g. ``tpu,gpu``) fails instead, so a broken install
cannot pass as a skip.
"""

import os

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")

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
