"""Host and device shardings in the program's own terms, on any mesh (issue 22, item 4), and
``out_shardings`` trees checked against the returns before they are written (item 1).

A multi-device module never gets ``SingleDeviceSharding(jax.devices()[0], ...)``: the sharding
comes from a name the module binds (its own ``NamedSharding`` helper included) or from its mesh,
and where neither is in scope the codemod makes no edit and says why, truly. The fixed programs
are lowered by JAX on 8 CPU devices (a subprocess: the device count must be set before JAX
starts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext
from libcst.metadata import MetadataWrapper, PositionProvider

from offload_fixer import jax_compat
from offload_fixer.codemods.fix_command import SINGLE_DEVICE_REASON, FixCommand
from offload_fixer.codemods.host_output import HostOutputCommand
from offload_fixer.codemods.move_to_device import MoveToDeviceCommand
from offload_fixer.codemods.pytree_source import structure_mismatch
from offload_fixer.codemods.source_facts import SourceFacts

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
OLD_JAX = jax_compat.spelling("0.7.0")


def run(codemod: type[FixCommand], source: str, **target: object) -> FixCommand:
    command = codemod(CodemodContext(), codemod.TARGET(**target))
    command.transform_module(cst.parse_module(textwrap.dedent(source)))
    return command


MESH_IN_MAIN = """\
    import jax
    import numpy as np
    from jax.sharding import Mesh


    @jax.jit
    def f(x):
        h = jax.device_put(x, jax.memory.Space.Host)
        return x, h


    def main():
        mesh = Mesh(np.array(jax.devices()), ("data",))
        return mesh
"""


def test_no_single_device_sharding_in_a_multi_device_module() -> None:
    """The mesh is built inside ``main``, out of the jit's reach: no edit, and the reason says
    what is true (several devices, where that shows, and nothing in scope to build from)."""
    command = run(HostOutputCommand, MESH_IN_MAIN, function_line=6, output_paths=("[1]",), origin_line=8)
    assert command.edits == []
    [problem] = command.problems
    assert "several devices" in problem and "`Mesh` at line 3" in problem
    assert "SingleDeviceSharding" not in problem


def test_no_single_device_move_in_a_multi_device_module() -> None:
    command = run(MoveToDeviceCommand, MESH_IN_MAIN, function_line=6, output_paths=("[1]",), spelling=OLD_JAX)
    assert command.edits == []
    assert any("several devices" in p for p in command.problems)


def test_every_device_of_jax_devices_is_evidence() -> None:
    source = """\
        import jax


        @jax.jit
        def f(x):
            h = jax.device_put(x, jax.memory.Space.Host)
            return h

        DEVICES = jax.devices()
    """
    command = run(HostOutputCommand, source, function_line=4, origin_line=6)
    assert command.edits == [] and "`jax.devices()` at line 9" in command.problems[0]


def test_single_device_module_says_why_it_is_unsafe() -> None:
    source = """\
        import jax


        @jax.jit
        def f(x):
            h = jax.device_put(x, jax.memory.Space.Host)
            return h

        FIRST = jax.devices()[0]
    """
    command = run(HostOutputCommand, source, function_line=4, origin_line=6)
    [edit] = command.edits
    assert edit.safety == "unsafe" and edit.reason == SINGLE_DEVICE_REASON
    assert "SingleDeviceSharding(jax.devices()[0]" in edit.description


def test_partitioned_sharding_in_scope_is_unsafe_and_named() -> None:
    source = """\
        import jax
        from jax.sharding import NamedSharding, PartitionSpec as P

        MESH = jax.make_mesh((4,), ("data",))
        ROWS = NamedSharding(MESH, P("data"))


        @jax.jit
        def f(x):
            h = jax.device_put(x, jax.memory.Space.Host)
            return h
    """
    command = run(HostOutputCommand, source, function_line=8, origin_line=10)
    [edit] = command.edits
    assert 'ROWS.with_memory_kind("pinned_host")' in edit.description
    assert edit.safety == "unsafe" and "`ROWS`" in edit.reason and "partition spec" in edit.reason


def test_out_shardings_that_does_not_fit_the_returns_is_not_written() -> None:
    """The output tree says ``[1]`` is a dict, the source returns one array there: the tree
    the fix would spell does not fit, so no edit is made and the problem says where."""
    source = """\
        import jax


        @jax.jit
        def f(x, host):
            y = host * 2
            return x, y
    """
    command = run(
        HostOutputCommand,
        source,
        function_line=4,
        output_paths=("[1]['a']",),
        output_kinds=(("[0]", "device"), ("[1]['a']", "device"), ("[1]['b']", "device")),
    )
    assert command.edits == []
    assert any("returns one array there" in p for p in command.problems), command.problems


def facts_of(source: str) -> SourceFacts:
    wrapper = MetadataWrapper(cst.parse_module(textwrap.dedent(source)))
    return SourceFacts.collect(wrapper.module, wrapper.resolve(PositionProvider))


@pytest.mark.parametrize(
    ("shardings", "returned", "why"),
    [
        ("(None, S)", "(a, b)", None),
        ("(None, S)", "(a, b, c)", "is a tuple of 2, but the function returns a tuple of 3"),
        ("[None, S]", "(a, b)", "is a list of 2, but the function returns a tuple of 2"),
        ('{"mu": S, "nu": S}', '{"nu": b, "mu": a}', None),
        ('{"mu": S}', '{"mu": a, "nu": b}', "has ['mu'], but the function returns ['mu'], ['nu']"),
        ("State(params=None, moment=S)", "State(params=a, moment=b)", None),
        ("State(params=None, moment=TREE)", "State(params=a, moment=a * 2)", "at .moment is a dict"),
        ("Other(params=None)", "State(params=a)", "is a Other, but the function returns a State"),
        ("(None, S)", "make()", None),
        ("S", "(a, b)", None),
    ],
)
def test_structure_mismatch(shardings: str, returned: str, why: str | None) -> None:
    facts = facts_of(f'TREE = {{"w": S}}\n\n\ndef f(a, b, c):\n    return {returned}\n')
    function = facts.functions[0]
    value = function.returns[0].node.value
    assert value is not None
    found = structure_mismatch(facts, cst.parse_expression(shardings), facts.module_scope, value, function.scope)
    assert (found is None) if why is None else (found is not None and why in found), found


LOWER = """
import importlib.util, json, sys
import jax, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

out = {}
for path in sys.argv[1:]:
    spec = importlib.util.spec_from_file_location("fixed", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, "f", None) or module.g
    mesh = getattr(module, "MESH")
    x = jax.ShapeDtypeStruct((8, 8), np.float32, sharding=NamedSharding(mesh, P()))
    args = (x,) if fn is getattr(module, "f", None) else (x, 2)
    text = fn.lower(*args).as_text()
    out[path] = "pinned_host" in text or "device" in text
print(json.dumps(out))
"""


@pytest.mark.jax_dependent  # the fixed programs lower under the installed JAX
@pytest.mark.skipif(
    jax_compat.regime() is not jax_compat.Regime.TYPED or not jax_compat.host_memory_on_this_backend(),
    reason="the fixtures move with jax.memory.Space, JAX >= 0.7.1, to pinned_host on the CPU",
)
def test_fixed_multi_device_fixtures_lower_on_eight_devices(tmp_path: Path) -> None:
    paths = []
    for name in ("ho_scope_sharding", "ho_mesh_only", "md_mesh_only"):
        path = tmp_path / f"{name}.py"
        path.write_text((FIXTURES / f"{name}.after.py").read_text())
        paths.append(str(path))
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8", "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [sys.executable, "-c", LOWER, *paths], capture_output=True, text=True, env=env, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == dict.fromkeys(paths, True)
