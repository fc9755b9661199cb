"""Imports inside the project: shardings built in one module reach the jit in another."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from offload_fixer.static import check_paths, check_source
from offload_fixer.static.project import Project, scan_imports

from .helpers import HEADER as HEADER_TEXT
from .helpers import LEGACY, PROPAGATION, TYPED, flow

SHARDINGS = """\
import jax
from jax.sharding import NamedSharding, PartitionSpec as P

MESH = jax.make_mesh((1,), ("data",))
DEVICE = NamedSharding(MESH, P(), memory_kind="device")
HOST = DEVICE.with_memory_kind("pinned_host")
MOMENTS = {"mu": HOST, "nu": HOST}


def state_shardings(offload):
    moments = HOST if offload else DEVICE
    return {"params": DEVICE, "mu": moments}


def all_on_host(tree):
    return jax.tree.map(lambda s: s.with_memory_kind("pinned_host"), tree)
"""

STEP = """\
import jax


def adam_like(params, mu, grads):
    mu = jax.tree.map(lambda m, g: 0.9 * m + g, mu, grads)
    return jax.tree.map(lambda p, m: p - 0.1 * m, params, mu), mu


def train_step(state, grads):
    params, mu = adam_like(state["params"], state["mu"], grads)
    return {"params": params, "mu": mu}
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


def codes(result) -> list[tuple[str, str]]:
    return sorted((d.code, d.output_path) for d in flow(result))


def check(path: Path, version: str = PROPAGATION):
    return check_source(path.read_bytes(), str(path), jax_version=version)


def test_module_level_shardings_of_a_sibling_package_module(tmp_path):
    write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/shardings.py": SHARDINGS,
            "trainer/step.py": STEP
            + """
from functools import partial
from .shardings import DEVICE, MOMENTS


@partial(jax.jit, in_shardings=({"params": DEVICE, "mu": MOMENTS["mu"]}, DEVICE), out_shardings=None)
def jitted_step(state, grads):
    return train_step(state, grads)
""",
        },
    )
    result = check(tmp_path / "trainer" / "step.py")
    assert codes(result) == [("OFL1200", "['mu']"), ("OFL1200", "['params']")]
    assert str(tmp_path / "trainer" / "shardings.py") in result.dependencies
    d = flow(result)[0]
    assert d.origin.kind == "host_argument" and d.origin.argument == "state['mu']"
    assert "when" not in d.message


def test_a_module_written_in_python_3_12_syntax_is_read_under_any_python(tmp_path):
    """Type parameters and ``type`` aliases (JAX's own ``core.py``) do not hide a module's
    shardings from its importers under Python 3.11 (:mod:`offload_fixer.source.type_parameters`)."""
    generic = "\n\nclass Box[T]:\n    value: T\n\n\ntype Tree[T] = dict[str, T]\n"
    write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/shardings.py": SHARDINGS + generic,
            "trainer/step.py": STEP
            + generic
            + """
from functools import partial
from .shardings import DEVICE, MOMENTS


@partial(jax.jit, in_shardings=({"params": DEVICE, "mu": MOMENTS["mu"]}, DEVICE), out_shardings=None)
def jitted_step(state, grads):
    return train_step(state, grads)
""",
        },
    )
    result = check(tmp_path / "trainer" / "step.py")
    assert result.parse_error is None
    assert codes(result) == [("OFL1200", "['mu']"), ("OFL1200", "['params']")]
    lines = (tmp_path / "trainer" / "step.py").read_text().splitlines()
    assert lines[flow(result)[0].span.line - 1].startswith("@partial(jax.jit, in_shardings=")


def test_jit_of_a_function_from_another_module_with_shardings_from_a_third(tmp_path):
    write(
        tmp_path,
        {
            "trainer/__init__.py": "",
            "trainer/shardings.py": SHARDINGS,
            "trainer/step.py": STEP,
            "trainer/main.py": """\
            import jax
            from trainer import shardings
            from trainer.step import train_step


            def main(offload):
                s = shardings.state_shardings(offload)
                return jax.jit(train_step, in_shardings=(s, shardings.DEVICE), out_shardings=None)
            """,
        },
    )
    main = tmp_path / "trainer" / "main.py"
    result = check(main)
    assert codes(result) == [("OFL1200", "['mu']"), ("OFL1200", "['params']")]
    d = next(d for d in flow(result) if d.output_path == "['mu']")
    # The branch in shardings.py decides: the finding says when it holds, and where.
    assert d.message.endswith(f"when `offload` is true ({tmp_path / 'trainer' / 'shardings.py'}:11)")
    assert "configured" in d.explanation
    # Each node is reported in its own file; the fix edits the jitted function's file.
    assert d.origin.span.path == str(main) and d.origin.span.line == 8
    assert d.return_span.path == str(tmp_path / "trainer" / "step.py") and d.return_span.line == 11
    assert d.function.name == "train_step" and d.function.path == str(tmp_path / "trainer" / "step.py")
    import hashlib

    assert d.source_sha256 == hashlib.sha256((tmp_path / "trainer" / "step.py").read_bytes()).hexdigest()


def test_a_constant_flag_decides_the_branch(tmp_path):
    write(
        tmp_path,
        {
            "shardings.py": SHARDINGS,
            "step.py": STEP,
            "train.py": """\
            import jax
            import shardings
            from step import train_step

            OFFLOAD = {flag}
            step = jax.jit(train_step, in_shardings=(shardings.state_shardings(OFFLOAD), shardings.DEVICE))
            """,
        },
    )
    train = tmp_path / "train.py"
    for flag, expected in (("True", 2), ("False", 0)):
        train.write_text(train.read_text().replace("{flag}", flag).replace("True", flag).replace("False", flag))
        result = check(train)
        assert len(flow(result)) == expected, flag
        assert all("when" not in d.message for d in flow(result))


def test_script_style_imports_and_tree_map_over_a_sharding_tree(tmp_path):
    write(
        tmp_path,
        {
            "shardings.py": SHARDINGS,
            "run.py": """\
            import jax
            from shardings import all_on_host, DEVICE

            STATE = all_on_host({"params": DEVICE, "opt": DEVICE})


            @jax.jit
            def helper(x):
                return x


            def step(state):
                return jax.tree.map(lambda x: x * 2, state)


            compiled = jax.jit(step, in_shardings=(STATE,)).lower
            """,
        },
    )
    assert codes(check(tmp_path / "run.py", LEGACY)) == [("OFL1200", "['opt']"), ("OFL1200", "['params']")]


def test_relative_parent_imports_and_package_attributes(tmp_path):
    write(
        tmp_path,
        {
            "pkg/__init__.py": "from .config import KIND\n",
            "pkg/config.py": 'KIND = "pinned_host"\n',
            "pkg/sub/__init__.py": "",
            "pkg/sub/train.py": """\
            import jax
            from jax.sharding import SingleDeviceSharding
            from .. import KIND
            from .. import config


            @jax.jit
            def f(x):
                return jax.device_put(x, SingleDeviceSharding(jax.devices()[0], memory_kind=KIND)) * 2


            @jax.jit
            def g(x):
                return jax.device_put(x, SingleDeviceSharding(jax.devices()[0], memory_kind=config.KIND)) + 1
            """,
        },
    )
    result = check(tmp_path / "pkg" / "sub" / "train.py")
    assert sorted(d.function.name for d in flow(result)) == ["f", "g"]


def test_names_the_project_does_not_define_stay_unknown(tmp_path):
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "import jax\nfrom .b import *\nfrom .missing import THING\n",
            "pkg/b.py": "from .a import *\n",  # an import cycle
            "pkg/train.py": """\
            import jax
            from .a import THING, OTHER
            from . import nothing_here


            @jax.jit
            def f(x):
                return jax.device_put(x, THING) * jax.device_put(x, OTHER) + nothing_here.host
            """,
        },
    )
    assert check(tmp_path / "pkg" / "train.py").diagnostics == ()


def test_modeled_libraries_are_never_project_modules(tmp_path):
    # A checked tree that holds a package named like JAX: its names stay JAX's.
    write(
        tmp_path,
        {
            "jax/__init__.py": "def device_put(x, s):\n    return x\n",
            "train.py": """\
            import jax
            from jax.sharding import NamedSharding


            @jax.jit
            def f(x):
                return jax.device_put(x, NamedSharding(None, None, memory_kind="pinned_host")) * 2
            """,
        },
    )
    assert codes(check(tmp_path / "train.py")) == [("OFL1200", "")]


def test_check_paths_selects_files_by_what_they_import(tmp_path):
    write(
        tmp_path,
        {
            "shardings.py": SHARDINGS,
            "step.py": STEP,
            "train.py": """\
            import jax
            import shardings
            from step import train_step

            step = jax.jit(train_step, in_shardings=(shardings.state_shardings(True), shardings.DEVICE))
            """,
            "unrelated.py": "import jax\n\n@jax.jit\ndef f(x):\n    return x * 2\n",
            "hosts.py": "import jax\nfrom tensors import HostTensors\n\n@jax.jit\ndef f(x):\n    return x.HostTensors\n",
        },
    )
    results = {Path(r.path).name: r for r in check_paths([str(tmp_path)], jax_version=TYPED)}
    assert results["train.py"].analysed and len(flow(results["train.py"])) == 2
    # No host spelling in it or in anything it imports: not even parsed.
    assert not results["unrelated.py"].analysed and not results["hosts.py"].analysed
    assert not results["step.py"].analysed  # `jit` appears nowhere in it


def test_parallel_check_resolves_imports_in_its_workers(tmp_path):
    write(
        tmp_path,
        {
            "shardings.py": SHARDINGS,
            "step.py": STEP,
            "a.py": "import jax, shardings, step\nf = jax.jit(step.train_step, in_shardings=(shardings.state_shardings(1), None))\n",
            "b.py": "import jax, shardings, step\ng = jax.jit(step.train_step, in_shardings=(shardings.state_shardings(0), None))\n",
        },
    )
    serial = [(r.path, codes(r)) for r in check_paths([str(tmp_path)], jax_version=LEGACY)]
    parallel = [(r.path, codes(r)) for r in check_paths([str(tmp_path)], jax_version=LEGACY, jobs=2)]
    assert serial == parallel
    assert dict(serial)[str(tmp_path / "a.py")] and not dict(serial)[str(tmp_path / "b.py")]


def test_a_project_sees_a_module_edited_on_disk(tmp_path):
    write(
        tmp_path,
        {
            "shardings.py": SHARDINGS,
            "step.py": STEP,
            "train.py": """\
        import jax, shardings, step
        f = jax.jit(step.train_step, in_shardings=(shardings.state_shardings(True), None))
        """,
        },
    )
    project = Project()
    train = tmp_path / "train.py"
    assert len(flow(check_source(train.read_text(), str(train), jax_version=LEGACY, project=project))) == 2
    shardings = tmp_path / "shardings.py"
    shardings.write_text(SHARDINGS.replace('"pinned_host"', '"device"'))
    os.utime(shardings, ns=(1, 1))  # a new stamp even within the clock's resolution
    assert flow(check_source(train.read_text(), str(train), jax_version=LEGACY, project=project)) == ()


TRAIN = """\
import jax, shardings, step
f = jax.jit(step.train_step, in_shardings=(shardings.state_shardings(True), None))
"""


@pytest.mark.parametrize("spelling", ["shardings.py", "./shardings.py", "absolute"])
def test_a_module_fixed_in_memory_is_read_as_fixed_by_its_importers(tmp_path, monkeypatch, spelling):
    """``check --fix``'s later rounds: the same caches, and ``texts`` holding a module as fixed
    in memory (its file unchanged, so its stat too), keyed as a finding names the file; the
    walk of ``.`` spells it ``./shardings.py``. The module that imports it is checked against
    the fixed text, and its findings carry that text's hash, as a check of the written file does."""
    write(tmp_path, {"shardings.py": SHARDINGS, "step.py": STEP, "train.py": TRAIN})
    monkeypatch.chdir(tmp_path)
    caches: dict = {}

    def found(texts=None) -> list:
        return [d for r in check_paths(["."], jax_version=LEGACY, caches=caches, texts=texts) for d in flow(r)]

    assert len(found()) == 2
    fixed = SHARDINGS.replace("moments = HOST if offload else DEVICE", "moments = DEVICE").encode()
    key = str(tmp_path / "shardings.py") if spelling == "absolute" else spelling
    assert found({key: fixed}) == []
    assert len(found()) == 2  # the file on disk, as it still is


def test_a_remembered_text_is_stamped_by_its_bytes(tmp_path):
    """An analysis kept from an earlier check is reused only where each module it read stamps
    the same: a text remembered for a file (fixed in memory) stamps by its bytes, not its stat."""
    path = str(tmp_path / "shardings.py")
    Path(path).write_text(SHARDINGS)
    first, second, same = Project(snapshot=True), Project(snapshot=True), Project(snapshot=True)
    first.remember(path, SHARDINGS.encode())
    second.remember(path, SHARDINGS.replace("pinned_host", "device").encode())
    same.remember(path, SHARDINGS.encode())
    assert first.stamp(path) != second.stamp(path)
    assert first.stamp(path) == same.stamp(path)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("import a.b as c, d\n", [(0, "a.b", ()), (0, "d", ())]),
        ("from ..x.y import (\n    p,\n    q as r,\n)\n", [(2, "x.y", ("p", "q"))]),
        ("    from . import z  # comment\n", [(1, "", ("z",))]),
        ("from m import *\n", [(0, "m", ())]),
        ("x = 1\n", []),
    ],
)
def test_imports_are_read_from_text(text, expected):
    assert [(i.level, i.module, i.names) for i in scan_imports(text.encode())] == expected


def test_a_helper_that_returns_from_try_else_in_a_loop_then_raises(tmp_path):
    """maxtext's factory lookup: the only returns are in a loop's ``try/except/else``, the
    function ends in ``raise``. The check once failed there (``reduce()`` of no returns)."""
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/factories.py": """\
            def build(name, factories):
                for factory in factories:
                    try:
                        model = factory(name)
                    except KeyError:
                        continue
                    else:
                        return model
                raise ValueError(name)


            def always_raises(name):
                raise ValueError(name)
            """,
            "pkg/step.py": """\
            import jax
            from jax.sharding import NamedSharding, PartitionSpec as P

            from pkg.factories import always_raises, build

            HOST = NamedSharding(jax.make_mesh((1,), ("data",)), P(), memory_kind="pinned_host")


            @jax.jit
            def step(x, factories):
                model = build("a", factories)
                always_raises("b")
                return jax.device_put(x, HOST) * 2, model
            """,
        },
    )
    results = {os.path.basename(r.path): r for r in check_paths([str(tmp_path)], jax_version=PROPAGATION)}
    step = results["step.py"]
    assert step.internal_error is None and step.parse_error is None
    assert codes(step) == [("OFL1200", "[0]")]


def test_a_module_in_an_import_cycle_reaches_what_the_cycle_reaches(tmp_path):
    """``a`` imports ``b`` (which imports ``a`` back) before ``c``, the module with the host
    spelling: while ``a`` is searched, ``b`` sees ``a`` as not reaching one yet. That answer
    is provisional; once the cycle is searched whole, both reach ``c``."""
    write(
        tmp_path,
        {
            "a.py": "import b\nimport c\n",
            "b.py": "import a\n",
            "c.py": 'KIND = "pinned_host"\n',
            "main.py": "import jax\nimport b\n\nf = jax.jit(lambda x: x)\n",
        },
    )
    project = Project()
    assert project.host_reachable(str(tmp_path / "a.py"))
    assert project.host_reachable(str(tmp_path / "b.py"))
    main = tmp_path / "main.py"
    assert project.selects(str(main), main.read_bytes())
    (tmp_path / "c.py").write_text('KIND = "device"\n')
    os.utime(tmp_path / "c.py", ns=(1, 1))
    for name in ("a.py", "b.py", "c.py"):
        assert not Project().host_reachable(str(tmp_path / name))


def test_a_run_shares_what_it_resolves_in_modules_and_finds_what_each_file_alone_finds(tmp_path):
    """``check`` resolves a module imported by many files once for the run (modules that import
    each other, and a checked file that is itself imported, included): the findings are
    those of each file checked alone."""
    write(
        tmp_path,
        {
            "deeper.py": "import functools\nimport jax\n\nfast = functools.partial(jax.jit)\n",
            "helpers.py": "from deeper import fast\nfrom cycle import again\n",
            "cycle.py": "import helpers\n\nagain = helpers.fast\n",
            **{
                f"main{i}.py": HEADER_TEXT
                + f"from helpers import {name}\n\n\n@{name}\ndef step(params, x):\n"
                + "    moved = jax.device_put(params, host)\n    return x, {'mu': moved * 2}\n"
                + "\n\nidentity = jax.jit(lambda x: x)\n"
                for i, name in enumerate(("fast", "again", "fast"))
            },
        },
    )
    (tmp_path / "helpers.py").write_text("from deeper import fast\nfrom cycle import again\nimport main2\n")
    run = {os.path.basename(r.path): codes(r) for r in check_paths([str(tmp_path)], jax_version=PROPAGATION)}
    alone = {
        path.name: codes(check_source(path.read_text(), str(path), jax_version=PROPAGATION, project=Project()))
        for path in sorted(tmp_path.glob("main*.py"))
    }
    assert {name: run[name] for name in alone} == alone
    assert all(found == [("OFL1200", "[1]['mu']")] for found in alone.values())


def test_another_modules_class_body_is_parsed_only_when_the_check_can_know_the_class(tmp_path, monkeypatch):
    """A class of another module whose decorators and bases the check cannot model (a flax
    module, a test case) is read by its header alone; a dataclass's body is parsed, and a
    finding built in its method still names that method's line."""
    from offload_fixer.static import source

    parsed: list[str] = []
    parse = source.Chunk.parse

    def recording(text: str, *args: object) -> object:
        parsed.append(text)
        return parse(text, *args)

    monkeypatch.setattr(source.Chunk, "parse", staticmethod(recording))
    write(
        tmp_path,
        {
            "layers.py": """\
            import dataclasses

            import jax
            from flax import nnx
            from jax.sharding import NamedSharding, PartitionSpec as P


            class Dense(nnx.Module):
                \"\"\"A layer.\"\"\"

                def __init__(self, rngs):
                    self.marker_of_a_body_never_parsed = rngs


            @dataclasses.dataclass
            class Offload:
                kind: str = "pinned_host"

                def sharding(self, mesh):
                    return NamedSharding(mesh, P(), memory_kind=self.kind)
            """,
            "train.py": """\
            from functools import partial

            import jax
            from layers import Dense, Offload

            mesh = jax.make_mesh((1,), ("x",))


            @partial(jax.jit, in_shardings=(Offload().sharding(mesh),), out_shardings=None)
            def step(state):
                layer = Dense(rngs=None)
                return state * 2, layer
            """,
        },
    )
    result = check(tmp_path / "train.py")
    assert codes(result) == [("OFL1200", "[0]")]
    assert not any("marker_of_a_body_never_parsed" in text for text in parsed)
    assert any("def sharding" in text for text in parsed)
    (d,) = flow(result)
    assert d.origin.span.path == str(tmp_path / "train.py") and d.origin.span.line == 9


@pytest.mark.parametrize(
    ("text", "header"),
    [
        ("import jax\n\n\nclass A(B):\n    x = 1\n", "class A(B):\n    ...\n"),
        (
            "class A(\n    B,\n):  # why\n\n    @property\n    def f(self):\n        pass\n",
            "class A(\n    B,\n):  # why\n\n    ...\n",
        ),
        ("class A(B):\r\n\t'''doc'''\r\n\tx = 1\r\n", "class A(B):\r\n\t...\r\n"),
        ("class A(B): x = 1\n", None),  # the body shares the header's line
        ("class A(\n    B,\n): x = 1\n", None),
        ("x = 1; y = 2\n", None),  # not a class
    ],
)
def test_a_class_header_is_cut_where_its_body_starts_a_line(tmp_path, text, header):
    from offload_fixer.static.outline import outline
    from offload_fixer.static.project import ModuleFacts
    from offload_fixer.static.scopes import ForeignScope

    facts = ModuleFacts(str(tmp_path / "m.py"), text.encode(), text, outline(text))
    chunk = ForeignScope(None, facts).class_header(len(facts.outline.groups) - 1)
    if header is None:
        assert chunk is None
    else:
        import libcst as cst

        module = cst.Module(
            list(chunk.statements), default_indent=chunk.default_indent, default_newline=chunk.default_newline
        )
        assert module.code.lstrip("\r\n") == header
