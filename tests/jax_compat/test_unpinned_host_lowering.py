"""The module ``run`` analyses, lowered for the TPU on this CPU, is the module the program gives
on a TPU: each spelling of a move of a computed value to ``unpinned_host`` keeps its move, and
libtpu judges both modules alike (error 1200 or a compile).

JAX 0.4.35 and 0.6.2 lose the move on the CPU: they judge whether a program names any memory
kind against the lowering devices' default memory (``pxla.are_all_shardings_default_mem_kind``),
and the CPU's is ``unpinned_host`` there. Judging against the TPU's ``device`` instead keeps the
move but declares every committed CPU argument ``unpinned_host`` (its sharding names the CPU's
default kind), so it is not done; those versions fail here, strictly."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, SingleDeviceSharding
from jax.sharding import PartitionSpec as P

from offload_fixer.ir.module import load, placement
from offload_fixer.jax_compat import lower_for_platform
from offload_fixer.model import HOST_KINDS
from tests.cli_support import offload_fixer

LOSES_THE_MOVE_ON_THE_CPU = pytest.mark.xfail(
    jax.devices()[0].default_memory().kind != "device",
    reason="this JAX judges memory kinds against the CPU's default, unpinned_host: the move is not lowered",
    strict=True,
)
SPELLINGS = ("SingleDeviceSharding", "NamedSharding on a Mesh", "NamedSharding on make_mesh", "with_memory_kind")


def unpinned(spelling: str, devices: list) -> Any:
    """``spelling`` of an ``unpinned_host`` sharding over ``devices`` (the CPU's or libtpu's)."""
    if spelling == "SingleDeviceSharding":
        return SingleDeviceSharding(devices[0], memory_kind="unpinned_host")
    if spelling == "NamedSharding on make_mesh":
        return NamedSharding(jax.make_mesh((1,), ("x",), devices=devices[:1]), P(), memory_kind="unpinned_host")
    mesh = Mesh(np.array(devices[:1]), ("x",))
    if spelling == "with_memory_kind":
        return NamedSharding(mesh, P()).with_memory_kind("unpinned_host")
    return NamedSharding(mesh, P(), memory_kind="unpinned_host")


def snapshot_step(snapshot: Any) -> Any:
    @jax.jit
    def step(x):
        y = x * 2
        return y + 1, jax.device_put(y, snapshot)

    return step


def moves_to_host(lowered) -> list[str | None]:
    return [kind for kind in map(placement, load(lowered).placements) if kind in HOST_KINDS]


@LOSES_THE_MOVE_ON_THE_CPU
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_a_computed_value_moved_to_unpinned_host_lowers_as_on_the_tpu(spelling, tpu_pod, tpu_compiler):
    on_cpu = lower_for_platform(snapshot_step(unpinned(spelling, jax.devices())), (jnp.ones((8, 4)),), {}, "tpu")
    on_tpu_sharding = unpinned(spelling, tpu_pod.devices)
    argument = jax.ShapeDtypeStruct((8, 4), jnp.float32, sharding=on_tpu_sharding.with_memory_kind("device"))
    on_tpu = snapshot_step(on_tpu_sharding).trace(argument).lower()

    assert moves_to_host(on_cpu) == moves_to_host(on_tpu) == ["unpinned_host"]
    ran, given = tpu_compiler.judge(on_cpu), tpu_compiler.judge(on_tpu)
    assert (ran.outcome, ran.error) == (given.outcome, given.error), (ran.message, given.message)


PROGRAM = """\
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    SNAPSHOT = NamedSharding(jax.make_mesh((1,), ("x",)), P(), memory_kind="unpinned_host")


    @jax.jit
    def step(x):
        y = x * 2
        return y + 1, jax.device_put(y, SNAPSHOT)


    if __name__ == "__main__":
        print(step(jnp.ones(4))[1])
"""


@LOSES_THE_MOVE_ON_THE_CPU
def test_run_reports_the_move_of_a_computed_value_to_unpinned_host_as_libtpu_judges_it(tmp_path: Path, tpu_compiler):
    (tmp_path / "prog.py").write_text(textwrap.dedent(PROGRAM))
    proc = offload_fixer("run", "--confirm", "prog.py", cwd=tmp_path)
    said = proc.stdout + proc.stderr
    assert "prog.py:11:19: OFL1204" in said, said
    assert f"--confirm: {tpu_compiler.compiler} compiled 1 compilation, as predicted" in said, said
