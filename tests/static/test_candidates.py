"""The checked file read statement by statement: which statements can hold a jit site, and
that reading only those finds what parsing the whole file finds."""

from __future__ import annotations

import textwrap

import pytest

from offload_fixer.static import check_source
from offload_fixer.static.candidates import jit_candidates, site_candidates
from offload_fixer.static.interpreter import Interpreter
from offload_fixer.static.outline import SourceCache, outline
from offload_fixer.static.project import ModuleFacts, Project

from .helpers import HEADER, PROPAGATION

STEP = """
def step(params, x):
    moved = jax.device_put(params, host)
    return x, {"mu": moved * 2}
"""

UNRELATED = "".join(
    f"""

def unrelated_{i}(a, b):
    total = jnp.zeros(3)
    for k in range({i} + 2):
        total = total + jnp.sum(a * k) - jnp.mean(b)
    return {{"total": total, "scale": lax.abs(total) * {i}}}
"""
    for i in range(30)
)


def facts_of(text: str, path: str = "m.py") -> ModuleFacts:
    return ModuleFacts(path, text.encode(), text, outline(text))


def assert_same_as_whole(text: str, path: str = "m.py", project: Project | None = None) -> list:
    """The findings read statement by statement (no document cache) equal a whole parse's (a
    document cache that parses every statement); returns them."""
    lazy = check_source(text, path, jax_version=PROPAGATION, project=project)
    whole = check_source(text, path, jax_version=PROPAGATION, cache=SourceCache(on_demand=False), project=project)
    assert lazy.diagnostics == whole.diagnostics
    return [d for d in lazy.diagnostics if d.code == "OFL1200"]


def test_only_the_statements_that_can_hold_a_site_are_parsed():
    text = HEADER + UNRELATED + STEP + "\n\nstep_jit = jax.jit(step, donate_argnums=0)\n"
    facts = facts_of(text)
    indices = jit_candidates(facts, None, "m.py")
    assert [facts.pieces()[i].strip().splitlines()[0] for i in indices] == [
        "step_jit = jax.jit(step, donate_argnums=0)"
    ]
    interpreter = Interpreter(facts, text, None, None, "m.py")
    (sites,) = [s for s in interpreter.jit_sites_by_statement(indices).values() if s]
    assert len(sites) == 1
    for jitted in sites:
        interpreter.analyse(jitted)
    # the site, `step`, and what they read (jax, host, mesh, ...): not the 30 unrelated functions
    assert facts.cache.parsed < 15 < len(facts.outline.groups)
    assert len(assert_same_as_whole(text)) == 1


def test_a_site_through_module_level_aliases_and_a_helper():
    text = (
        HEADER
        + textwrap.dedent("""\
        from jax import jit as J

        fast = J
        again = fast


        def compiled():
            return partial(again, donate_argnums=0)
        """)
        + UNRELATED
        + STEP.replace("def step", "@compiled()\ndef step")
        + "\nlater = again(step)\n"
    )
    facts = facts_of(text)
    chosen = {facts.pieces()[i].strip().splitlines()[0] for i in jit_candidates(facts, None, "m.py")}
    assert chosen == {"fast = J", "again = fast", "def compiled():", "@compiled()", "later = again(step)"}
    interpreter = Interpreter(facts, text, None, None, "m.py")
    assert len(interpreter.jit_sites()) == 2  # the decorator and `again(step)`
    assert len(assert_same_as_whole(text)) == 1  # one finding for the function jitted twice


def test_a_site_through_an_imported_project_helper(tmp_path):
    (tmp_path / "helpers.py").write_text("import functools\nimport jax\n\nfast = functools.partial(jax.jit)\n")
    text = (
        HEADER
        + "from helpers import fast as compile_step\n"
        + UNRELATED
        + STEP.replace("def step", "@compile_step\ndef step")
        + "\nidentity = jax.jit(lambda x: x)\n"
    )
    main = tmp_path / "main.py"
    main.write_text(text)
    facts = facts_of(text, str(main))
    project = Project()
    assert len(jit_candidates(facts, project, str(main))) == 2  # `identity = ...` and `step`
    assert len(jit_candidates(facts, None, str(main))) == 1  # imports stay names: `fast` is no jit
    assert len(assert_same_as_whole(text, str(main), project)) == 1


def test_names_python_normalises_are_found_as_ast_spells_them():
    text = HEADER + UNRELATED + STEP.replace("step", "échelle_𝔥") + "\n\nstep_jit = jax.jit(échelle_𝔥)\n"
    assert len(assert_same_as_whole(text)) == 1


HOST_STEP = """
import jax
{imports}


@jax.jit
def step(x):
    return {{"mu": jax.device_put(x, {host}) * 2}}
"""


def star_package(tmp_path, init: str = "from .dummies import *\n") -> None:
    """``pkg``, whose ``__init__`` star-imports a module (as ``diffusers``-style packages do),
    and its submodule ``placements`` that binds a host sharding."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text(init)
    (tmp_path / "pkg" / "dummies.py").write_text("class Dummy:\n    pass\n")
    (tmp_path / "pkg" / "placements.py").write_text(
        "import jax\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\n"
        'HOST = NamedSharding(jax.make_mesh((1,), ("x",)), P(), memory_kind="pinned_host")\n'
    )


@pytest.mark.parametrize(
    ("imports", "host", "found"),
    [
        ("from pkg.placements import HOST", "HOST", 1),
        ("from pkg import placements", "placements.HOST", 1),  # not bound by the package: its submodule
        ("import pkg.placements as placements", "placements.HOST", 1),
        ("from pkg.dummies import Dummy", "Dummy", 0),  # the star import makes nothing else host
        ("from pkg import dummies", "dummies.Dummy", 0),
    ],
)
@pytest.mark.parametrize(
    "init",
    [
        "from .dummies import *\n",
        # Python imports a module path's parts as modules, whatever the package binds by their names
        "from .dummies import *\nplacements = dummies = None\n",
    ],
)
def test_a_package_with_a_star_import_still_resolves_its_submodules(tmp_path, init, imports, host, found):
    if "placements = " in init and imports.startswith("from pkg import"):
        found = 0  # ``from pkg import name`` takes what the package binds
    star_package(tmp_path, init)
    main = tmp_path / "main.py"
    text = HOST_STEP.format(imports=imports, host=host)
    main.write_text(text)
    project = Project()
    assert len(site_candidates(facts_of(text, str(main)), project, str(main))) == found
    assert len(assert_same_as_whole(text, str(main), project)) == found


@pytest.mark.parametrize(
    ("imports", "found"),
    [
        ("from pkg.placements import *", 1),
        ("from pkg import *", 1),  # a star import of a package that star-imports its dummies, and ...
        ("from pkg.dummies import *", 0),  # ... a module that binds no host value
        ("from pkg.placements import *\nHOST = None", 0),  # a binding of the file's own comes after
    ],
)
def test_a_name_a_star_import_binds_is_the_project_module_s(tmp_path, imports, found):
    """As Python binds it: a public name of the project module a star import names, or of
    the modules that one star-imports (``pkg/__init__.py`` here star-imports ``placements``)."""
    star_package(tmp_path, "from .dummies import *\nfrom .placements import *\n")
    main = tmp_path / "main.py"
    text = HOST_STEP.format(imports=imports, host="HOST")
    main.write_text(text)
    project = Project()
    assert len(site_candidates(facts_of(text, str(main)), project, str(main))) == found
    assert len(assert_same_as_whole(text, str(main), project)) == found


def test_a_star_import_of_a_library_or_a_private_name_binds_nothing_the_interpreter_knows(tmp_path):
    (tmp_path / "placements.py").write_text("import jax\n\n_HOST = jax.memory.Space.Host\n")
    main = tmp_path / "main.py"
    text = HOST_STEP.format(imports="from placements import *", host="_HOST")
    main.write_text(text)
    assert site_candidates(facts_of(text, str(main)), Project(), str(main)) == []
    text = "from jax import *\n\nx = 1\n\n\ndef f(y):\n    return y\n"
    assert jit_candidates(facts_of(text), None, "m.py") == []


POLICY_MODULE = """
import jax
from jax import checkpoint_policies as cp
{extra}

def policy(kind):
    if kind == "dots":
        return cp.offload_dot_with_no_batch_dims("device", "pinned_host")
    return jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["h"],
        offload_src="device", offload_dst="pinned_host")
"""


@pytest.mark.parametrize(
    ("extra", "host"),
    [
        ("", False),  # the destinations of JAX's policies: residuals, which no jit site meets
        ("# comment: keeps pinned_host", True),  # any other spelling still counts
        ("from .policies import placements as cp", True),  # the project's own may make anything
    ],
)
def test_offload_policy_destinations_start_no_host_value(tmp_path, extra, host):
    (tmp_path / "remat.py").write_text(POLICY_MODULE.format(extra=extra))
    main = tmp_path / "main.py"
    text = "import jax\nfrom remat import policy\n\n\n@jax.jit\ndef step(x):\n    return jax.checkpoint(jnp.sin, policy=policy('dots'))(x)\n"
    main.write_text(text)
    assert bool(site_candidates(facts_of(text, str(main)), Project(), str(main))) is host


def test_a_project_module_is_judged_by_the_attribute_read(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "helpers.py").write_text(
        "import functools\nimport jax\n\nfrom . import more\n\nfast = functools.partial(jax.jit)\n\n\n"
        "def plain(x):\n    return x\n"
    )
    (tmp_path / "pkg" / "more.py").write_text("from .helpers import fast as again\n\n\ndef other(x):\n    return x\n")
    text = textwrap.dedent("""\
        from pkg import helpers


        def a(x):
            return helpers.plain(x) + helpers.more.other(x)


        def b(x):
            return helpers.more.again(x)


        def c(x):
            return helpers.fast(x)


        def d(x):
            return [helpers][0].plain(x)
        """)
    main = tmp_path / "main.py"
    main.write_text(text)
    chosen = [
        facts_of(text).pieces()[i].split("(")[0].strip() for i in jit_candidates(facts_of(text), Project(), str(main))
    ]
    assert chosen == ["def b", "def c", "def d"]  # `d` uses the module as a value: anything


def test_only_the_sites_a_host_value_reaches_are_analysed():
    plain = "".join(
        f"""

class TestPlain{i}:
    def test_{i}(self):
        return jax.jit(lambda x: jnp.sin(x) * {i})(jnp.ones(3))
"""
        for i in range(5)
    )
    text = (
        HEADER
        + plain
        + "\n\nalias = host\n\n\nclass TestOffload:\n    def test(self):\n"
        + "        def f(x):\n            return {'mu': jax.device_put(x, alias) * 2}\n\n"
        + "        return jax.jit(f)(jnp.ones(3))\n"
    )
    facts = facts_of(text)
    first_lines = [facts.pieces()[i].strip().splitlines()[0] for i in site_candidates(facts, None, "m.py")]
    assert first_lines == ["class TestOffload:"]  # reached through `alias`, bound to `host`
    assert len(jit_candidates(facts, None, "m.py")) == 6
    assert assert_same_as_whole(text)


def test_a_host_value_through_modules_that_import_each_other(tmp_path):
    (tmp_path / "a.py").write_text(
        "import jax\nfrom b import spare\n\nplace = jax.sharding.SingleDeviceSharding("
        "jax.devices()[0], memory_kind='pinned_host')\n"
    )
    (tmp_path / "b.py").write_text("from a import place\n\nspare = place\n")
    text = HEADER + "from b import spare\n" + UNRELATED + "\nf = jax.jit(lambda x: x, in_shardings=spare)\n"
    main = tmp_path / "main.py"
    main.write_text(text)
    facts = facts_of(text, str(main))
    assert [facts.pieces()[i].split()[0] for i in site_candidates(facts, Project(), str(main))] == ["f"]
    (tmp_path / "a.py").write_text("import jax\nfrom b import spare\n\nplace = None\n")
    assert site_candidates(facts_of(text, str(main)), Project(), str(main)) == []


@pytest.mark.parametrize(
    ("layers", "reached"),
    [
        pytest.param(
            "class Layer(nnx.Module):\n    def place(self):\n        return 'pinned_host'\n",
            False,
            id="a framework's subclass: never known, whatever its body spells",
        ),
        pytest.param(
            "class Layer(metaclass=Meta):\n    def place(self):\n        return 'pinned_host'\n",
            False,
            id="a class with a metaclass",
        ),
        pytest.param(
            "@dataclasses.dataclass\nclass Layer:\n    kind: str = 'pinned_host'\n",
            True,
            id="a dataclass: its fields are known",
        ),
        pytest.param(
            "class Layer(NT):\n    kind: str = 'pinned_host'\n",
            True,
            id="a NamedTuple imported under another name",
        ),
        pytest.param(
            "class Layer(Base):\n    kind = 'pinned_host'\n",
            True,
            id="a base assigned in the module: it may be object",
        ),
        pytest.param(
            "from kinds import Record\n\n\nclass Layer(Record):\n    kind: str = 'pinned_host'\n",
            True,
            id="a NamedTuple aliased in another project module",
        ),
        pytest.param(
            "from kinds import Plain\n\n\nclass Layer(Plain):\n    kind = 'pinned_host'\n",
            True,
            id="a base assigned in another project module",
        ),
        pytest.param(
            "from kinds import Framework\n\n\nclass Layer(Framework):\n    kind = 'pinned_host'\n",
            False,
            id="a framework's class imported through another project module",
        ),
        pytest.param(
            "from kinds import Loop\n\n\nclass Layer(Loop):\n    kind = 'pinned_host'\n",
            False,
            id="a base imported in a cycle of modules",
        ),
        pytest.param(
            "class Layer:\n    kind = 'pinned_host'\n",
            True,
            id="a plain class",
        ),
        pytest.param(
            "class Layer(nnx.Module):\n    kind: MemoryKind = None\n\n\nMemoryKind = 'pinned_host'\n",
            False,
            id="an annotation: a type, never a value",
        ),
        pytest.param(
            "Layer: MemoryKind = None\n\n\nMemoryKind = 'pinned_host'\n",
            False,
            id="a module-level annotation",
        ),
    ],
)
def test_a_class_the_interpreter_cannot_know_and_annotations_carry_no_host_value(tmp_path, layers, reached):
    (tmp_path / "layers.py").write_text(
        "import dataclasses\nfrom typing import NamedTuple as NT\n\nfrom flax import nnx\n\n"
        "Base = object\nMeta = type\n\n\n" + layers
    )
    (tmp_path / "kinds.py").write_text(
        "from typing import NamedTuple as Record\n\nfrom flax.nnx import Module as Framework\n"
        "from layers import Loop\n\nPlain = object\n"
    )
    text = HEADER + "from layers import Layer\n\n\nf = jax.jit(lambda x: (x, Layer))\n"
    main = tmp_path / "main.py"
    main.write_text(text)
    assert bool(site_candidates(facts_of(text, str(main)), Project(), str(main))) == reached


CORPORA = ("examples", "tests/static_vs_dynamic", "tests/lsp_fixtures", "tests/runner_programs")


def test_every_corpus_finds_the_same_read_statement_by_statement_as_parsed_whole():
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    files = sorted(path for corpus in CORPORA for path in (root / corpus).rglob("*.py"))
    assert len(files) > 50
    project = Project()
    found = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        lazy = check_source(text, str(path), project=project)
        whole = check_source(text, str(path), cache=SourceCache(on_demand=False), project=project)
        assert lazy.diagnostics == whole.diagnostics, path
        found += len(lazy.diagnostics)
    assert found > 50


def test_a_project_module_keeps_what_the_candidates_read_in_place_of_its_tree(tmp_path):
    import ast

    text = HEADER + UNRELATED + STEP + "\n\n# a comment\nstep_jit = jax.jit(step)\n"
    path = tmp_path / "mod.py"
    path.write_text(text)
    main = tmp_path / "main.py"
    checked = "import jax\nfrom mod import step_jit\n\nout = step_jit(1, 2)\n"
    main.write_text(checked)
    project = Project()
    assert site_candidates(facts_of(checked, str(main)), project, str(main)) == [2]
    facts = project.facts(str(path))
    assert facts is not None and facts.outline.compacted
    assert len(facts.memo["jit_groups"]) == len(facts.outline.groups)
    # asked for anyway, a chunk's statements are parsed again, with the file's line numbers
    whole = outline(text)
    assert [ast.dump(s, include_attributes=True) for g in facts.outline.groups for s in g] == [
        ast.dump(s, include_attributes=True) for g in whole.groups for s in g
    ]
    assert site_candidates(facts_of(checked, str(main)), project, str(main)) == [2]


def test_the_checked_file_keeps_the_trees_of_the_groups_that_spell_jit_only():
    import ast

    from offload_fixer.static.statement_reads import keep_jit_groups_only

    text = (
        HEADER
        + UNRELATED
        + STEP
        + "\n\nstep_jit = jax.jit(step)\n\n\nclass Test:\n    def test_a(self):\n        jax.jit(step)(1, 2)\n"
    )
    whole = outline(text)
    facts = facts_of(text)
    held, statements = facts.outline, facts.outline.groups  # the caller's outline: let go in place
    spelling = [index for index in range(len(statements)) if "jit" in facts.piece(index)]
    assert len(spelling) == 2 < len(statements)
    keep_jit_groups_only(facts)
    assert facts.outline is held and held.compacted
    # the groups that spell jit keep their statements; the others are parsed again, alike
    assert all(facts.outline.groups[index] is statements[index] for index in spelling)
    assert facts.outline.groups[0] is not statements[0]
    assert [ast.dump(s, include_attributes=True) for g in facts.outline.groups for s in g] == [
        ast.dump(s, include_attributes=True) for g in whole.groups for s in g
    ]
    assert len(facts.memo["jit_groups"]) == len(whole.groups)
    assert jit_candidates(facts, None, None) == jit_candidates(facts_of(text), None, None)


@pytest.mark.parametrize(
    ("helper", "host"),
    [
        ("def options(enable_pinned_host_transfer=False):\n    return {}\n", False),  # a name, no memory kind
        ("def options(kind='pinned_host'):\n    return {}\n", True),
        ("def options(kind='unpinned_host'):\n    return {}\n", True),
        ("def options(space=jax.memory.Space.Host):\n    return {}\n", True),
    ],
)
def test_a_host_memory_kind_is_spelled_as_a_word(tmp_path, helper, host):
    (tmp_path / "helpers.py").write_text(f"import jax\n\n\n{helper}")
    main = tmp_path / "main.py"
    text = "import jax\nfrom helpers import options\n\n\n@jax.jit\ndef step(x):\n    return x, options()\n"
    main.write_text(text)
    assert bool(site_candidates(facts_of(text, str(main)), Project(), str(main))) is host


@pytest.mark.parametrize(
    ("helper", "jit"),
    [
        (
            "from jax._src import pjit\n\n\ndef rule():\n    return pjit.jit_p\n",
            False,
        ),  # a module named pjit, a primitive
        ("def jitted_name(jit_options):\n    return jit_options\n", False),  # words that hold jit
        ("import jax\n\n\ndef rule():\n    return jax.jit\n", True),
        (
            "import functools\nimport jax\n\n\ndef rule():\n    return functools.partial(jax.jit, static_argnums=0)\n",
            True,
        ),
        ("from jax.experimental import pjit\n\n\ndef rule():\n    return pjit.pjit\n", True),
        ("import jax\n\n\ndef rule():\n    return getattr(jax, 'jit')\n", True),  # the string too
        ("from jax import jit\n\n\ndef rule():\n    return jit\n", True),  # through the import
    ],
)
def test_a_jit_is_spelled_by_the_attribute_or_import_that_gives_it(helper, jit):
    text = f"{helper}\n\nfast = rule()\n"
    assert bool(jit_candidates(facts_of(text), None, "m.py")) is jit


@pytest.mark.parametrize(
    ("limits", "host"),
    [
        ("MAX_BYTES = 1 << 30\n\n\ndef budget():\n    return MAX_BYTES\n", False),
        (
            "import jax\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\n"
            'HOST = NamedSharding(jax.make_mesh((1,), ("x",)), P(), memory_kind="pinned_host")\n',
            True,
        ),
        ("import other\n\nLIMIT = 1\n", True),  # through the module it binds, which binds a host value
        ("import other_plain\n\nLIMIT = 1\n", False),
    ],
)
def test_a_module_used_as_a_value_holds_what_its_names_may_hold(tmp_path, limits, host):
    """``configure(limits)``: the callee may read any name of the module (orbax's tests patch
    a limits module so), so the module holds a host value where one of its names may."""
    (tmp_path / "limits.py").write_text(limits)
    (tmp_path / "other.py").write_text(
        "import jax\nfrom jax.sharding import NamedSharding, PartitionSpec as P\n\nimport limits\n\n"
        'HOST = NamedSharding(jax.make_mesh((1,), ("x",)), P(), memory_kind="pinned_host")\n'
    )
    (tmp_path / "other_plain.py").write_text("import limits\n\nSCALE = 2\n")  # each imports the other
    main = tmp_path / "main.py"
    text = (
        "import jax\n\nimport limits\n\n\ndef configure(module):\n    return module\n\n\n"
        "@jax.jit\ndef step(x):\n    return x, configure(limits)\n"
    )
    main.write_text(text)
    assert bool(site_candidates(facts_of(text, str(main)), Project(), str(main))) is host


def test_a_package_used_as_a_value_may_hold_anything(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "placements.py").write_text('KIND = "pinned_host"\n')
    main = tmp_path / "main.py"
    text = "import jax\n\nimport pkg\n\n\n@jax.jit\ndef step(x):\n    return x, print(pkg)\n"
    main.write_text(text)
    assert site_candidates(facts_of(text, str(main)), Project(), str(main)) == [2]
