"""A document checked again through its ``SourceCache`` re-analyses only the top-level
statements an edit can affect (its own, and those reading a name it binds, transitively),
and reports exactly what a check from scratch reports."""

from __future__ import annotations

import itertools
import os
from dataclasses import replace

from offload_fixer.static import SourceCache, check_source
from offload_fixer.static.project import Project

from .helpers import LEGACY

HEAD = """\
import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding

host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")
device = SingleDeviceSharding(jax.devices()[0], memory_kind="device")
place = host
"""
HELPER = """

def helper(x):
    return x * 2
"""
HOST_HELPER = """

def helper(x):
    return jax.device_put(x, place)
"""
USERS = """

@jax.jit
def step(x):
    return helper(x)


@jax.jit
def unrelated(x):
    return jnp.tanh(x)
"""


class Document:
    """One document edited version by version, checked through one cache and one project."""

    def __init__(self, path: str = "prog.py", project: Project | None = None) -> None:
        self.path = path
        self.cache = SourceCache()
        self.project = project or Project()

    def check(self, text: str) -> tuple:
        """The diagnostics through the cache, after asserting they are a fresh check's."""
        result = check_source(text, self.path, jax_version=LEGACY, cache=self.cache, project=self.project)
        fresh = check_source(text, self.path, jax_version=LEGACY, project=Project())
        # A fresh check analyses only the sites a host value reaches (candidates.site_candidates),
        # so it may read fewer modules for its findings than the document's whole analysis.
        assert replace(result, dependencies=()) == replace(fresh, dependencies=()), text
        assert set(fresh.dependencies) <= set(result.dependencies), text
        return result.diagnostics

    def reanalysed(self, text: str) -> list[str]:
        """The first line of each statement analysed again for this version."""
        assert self.cache.analysis is not None
        module = self.cache.outline
        assert module is not None
        spans = module.spans or []
        return [text[spans[i][0] : spans[i][1]].strip().splitlines()[0] for i in self.cache.analysis.reanalysed]


def test_an_edit_to_a_helper_reanalyses_the_functions_that_call_it():
    document = Document()
    assert document.check(HEAD + HELPER + USERS) == ()
    text = HEAD + HOST_HELPER + USERS
    found = document.check(text)
    assert [d.code for d in found] == ["OFL1200"]
    assert document.reanalysed(text) == ["def helper(x):", "@jax.jit"]  # helper, then step


def test_an_edit_to_a_global_reanalyses_its_readers_transitively():
    document = Document()
    text = HEAD + HOST_HELPER + USERS
    assert document.check(text)
    on_device = text.replace("place = host", "place = device")
    assert document.check(on_device) == ()
    # place, then helper (reads place), then step (reads helper); never `unrelated`.
    assert document.reanalysed(on_device) == [
        "place = device",
        "def helper(x):",
        "@jax.jit",
    ]
    assert document.check(text)


def test_an_unrelated_edit_reanalyses_one_statement():
    document = Document()
    text = HEAD + HOST_HELPER + USERS
    found = document.check(text)
    edited = text.replace("jnp.tanh(x)", "jnp.tanh(x) * 3")
    assert [(d.code, d.message) for d in document.check(edited)] == [(d.code, d.message) for d in found]
    assert len(document.cache.analysis.reanalysed) == 1


def test_a_binding_added_between_reanalyses_its_readers():
    """A second ``helper`` above ``step`` shadows the first where ``step`` reads it; lines
    added above a kept statement move its finding down."""
    document = Document()
    text = HEAD + HOST_HELPER + USERS
    assert document.check(text)
    shadowed = HEAD + HOST_HELPER + HELPER + USERS
    assert document.check(shadowed) == ()
    assert document.check("# a comment\n\n" + text)
    assert document.check(HEAD + USERS) == ()  # the helper removed: unknown


def test_a_global_declaration_or_other_rules_start_again():
    document = Document()
    text = HEAD + HOST_HELPER + USERS
    assert document.check(text)
    declared = text + "\n\ndef reset():\n    global place\n    place = None\n"
    assert document.check(declared) == ()
    assert len(document.cache.analysis.reanalysed) == len(document.cache.outline.spans)
    assert document.check(text)
    fresh = check_source(text, "prog.py", jax_version="0.10.2", project=Project())
    assert check_source(text, "prog.py", jax_version="0.10.2", cache=document.cache, project=document.project) == fresh


def test_a_project_module_changed_on_disk_starts_again(tmp_path):
    shardings = tmp_path / "shardings.py"
    shardings.write_text(HEAD, encoding="utf-8")
    main = tmp_path / "main.py"
    text = "import jax\nimport jax.numpy as jnp\nfrom shardings import place\n" + HOST_HELPER + USERS
    main.write_text(text, encoding="utf-8")
    document = Document(str(main), Project((str(tmp_path),)))
    assert document.check(text)
    shardings.write_text(HEAD.replace("place = host", "place = device"), encoding="utf-8")
    stat = os.stat(shardings)
    os.utime(shardings, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert document.check(text) == ()


def test_a_project_module_read_only_to_rule_statements_out_starts_again_when_changed(tmp_path):
    """No host value reaches ``helper`` at first, so it is never analysed (nor parsed): only
    the candidates read ``shardings``. A move to host there later reaches it."""
    on_device = HEAD.replace('host = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")\n', "")
    on_device = on_device.replace("place = host", "place = device")
    shardings = tmp_path / "shardings.py"
    shardings.write_text(on_device, encoding="utf-8")
    main = tmp_path / "main.py"
    text = (
        "import jax\nimport jax.numpy as jnp\nfrom jax.sharding import SingleDeviceSharding\n"
        "from shardings import place\n\n"
        'unused = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")\n'  # passes the prefilter
        + HOST_HELPER
        + USERS
    )
    main.write_text(text, encoding="utf-8")
    document = Document(str(main), Project((str(tmp_path),)))
    assert document.check(text) == ()
    assert document.cache.outline is not None and document.cache.parsed < len(document.cache.outline.spans)
    shardings.write_text(
        on_device.replace(
            "place = device", 'place = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")'
        ),
        encoding="utf-8",
    )
    stat = os.stat(shardings)
    os.utime(shardings, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert [d.code for d in document.check(text)] == ["OFL1200"]


def test_opening_parses_only_the_statements_a_host_value_can_reach():
    """The first check of a document reads, statement by statement, only what a host value
    can reach (:mod:`offload_fixer.static.candidates`), as a check without a cache does; an
    edit elsewhere is answered without parsing the rest either."""
    unrelated = "".join(f"\n\n@jax.jit\ndef step_{i}(x):\n    return jnp.tanh(x) * {i}\n" for i in range(30))
    document = Document()
    text = HEAD + HOST_HELPER + USERS + unrelated
    assert [d.code for d in document.check(text)] == ["OFL1200"]
    opened = document.cache.parsed
    assert opened < 15 < len(document.cache.outline.spans)
    edited = text.replace("jnp.tanh(x) * 7", "jnp.tanh(x) * 8")
    assert [d.code for d in document.check(edited)] == ["OFL1200"]
    assert document.reanalysed(edited) == ["@jax.jit"]
    assert document.cache.parsed == opened  # step_7 is no candidate: not parsed


def test_findings_kept_with_chunks_the_cache_let_go_stay_placed():
    """With no spare room, the cache lets go of the chunks no later version read (``helper``,
    ``step``) as edits of ``other`` fill it; a new site then reads ``step`` again, parsed
    anew (other nodes), while the finding kept for ``step`` names the nodes of the tree it
    was found in. Both are placed (``Document.check`` compares with a fresh check)."""
    other = "\n\nother = jax.jit(lambda x: jax.device_put(x, host) * {})\n"
    document = Document()
    document.cache = SourceCache(spare=0)
    text = HEAD + HOST_HELPER + USERS
    for i in range(6):
        assert [d.code for d in document.check(text + other.format(i))] == ["OFL1201", "OFL1200", "OFL1200"]
    assert len(document.cache) < document.cache.parsed  # chunks let go
    parsed = document.cache.parsed
    again = text + other.format(5) + "\n\n@jax.jit\ndef again(x):\n    return step(x)\n"
    assert [d.code for d in document.check(again)] == ["OFL1201", "OFL1200", "OFL1200", "OFL1200"]
    assert document.reanalysed(again) == ["@jax.jit"]
    assert document.cache.parsed > parsed + 1  # `step` parsed again, besides the new statement


def test_a_class_reads_and_binds_what_its_members_do():
    """A class's names are put together from its members' (kept by node, for the members a
    document's edit left alone): the same as one walk of the whole statement."""
    import ast
    from pathlib import Path

    from offload_fixer.static.incremental import StatementNames, _names, statement_names

    root = Path(__file__).resolve().parents[2]
    classes = 0
    for path in sorted((root / "offload_fixer").rglob("*.py")):
        for statement in ast.parse(path.read_text(encoding="utf-8")).body:
            binds, reads = _names([(statement, False)], set(), set())
            expected = StatementNames(binds - {""}, reads)
            assert statement_names([statement]) == expected, (path, statement.lineno)
            assert statement_names([statement]) == expected  # from the members' memo
            classes += isinstance(statement, ast.ClassDef)
    assert classes > 100


def _test_class(methods: int) -> str:
    """A test case of ``methods`` tests, some of which offload: large enough to be parsed in
    pieces and outlined member by member."""
    parts = ["\n\nclass OffloadTest:\n    def setUp(self):\n        self.scale = 2\n"]
    for i in range(methods):
        if i % 4:
            parts.append(
                f"\n    def test_host_{i}(self):\n        f = jax.jit(lambda x: jax.device_put(x, place) * {i})\n"
                "        return f\n"
            )
        else:
            parts.append(
                f"\n    def test_plain_{i}(self):\n        y = jnp.tanh({i}.0)\n        return jax.jit(lambda x: x + y)\n"
            )
    return "".join(parts)


def test_a_session_of_edits_in_a_large_test_class_checks_as_from_scratch():
    """Edits one after another anywhere in a large test class (pruned, parsed in pieces,
    outlined member by member), each version checked through the document's cache as a
    fresh check finds it (``Document.check``), positions included."""
    import random

    from offload_fixer.static import class_members, class_pieces

    text = HEAD + _test_class(140)
    assert len(text) > 1.5 * max(class_pieces.SPLIT_CHARS, class_members.MEMBERS_CHARS)
    document = Document()
    rng = random.Random(7)
    document.check(text)
    for step in range(15):
        lines = text.splitlines(keepends=True)
        index = rng.randrange(len(lines))
        line = lines[index]
        choice = step % 5
        if choice == 0 and "jnp.tanh(" in line:
            lines[index] = line.replace("jnp.tanh(", "jnp.sin(")
        elif choice == 1 and line.startswith("        "):
            lines.insert(index, "        z = 1\n")
        elif choice == 2 and "return f" in line:  # the test's jitted function returned unjitted
            lines[index] = line.replace("return f", "return f(1.0)")
        elif choice == 3 and line.strip() == "":
            del lines[index]
        else:
            lines.insert(index, "\n")
        new = "".join(lines)
        try:
            compile(new, "prog.py", "exec")
        except SyntaxError:
            continue
        text = new
        document.check(text)
    assert document.cache.parts  # the class was parsed in pieces, kept for the next version


def test_each_edit_an_editor_makes_reanalyses_what_it_changed_not_what_it_moved():
    """The language-server benchmark's edit kinds (a line inserted or deleted in the middle, a
    jitted function pasted, a helper renamed where it is defined and called, a block removed):
    each version analyses again at most the statements whose text changed and those whose
    callees changed, never the hundred statements below that merely moved, and finds what a
    fresh check finds."""
    from .test_source import lsp_benchmark

    benchmark = lsp_benchmark()
    base = benchmark.generate(600, True)
    for kind in benchmark.EDIT_KINDS:
        document = Document("generated.py")
        versions = benchmark.edit_session(base, kind, 4)
        assert document.check(versions[0])
        for before, after in itertools.pairwise(versions):
            assert document.check(after)
            again = document.reanalysed(after)
            changed = _changed_statements(before, after)
            assert set(again) <= changed | {"@jax.jit"}, (kind, again, changed)
            assert len(again) <= 2, (kind, again)


def _changed_statements(before: str, after: str) -> set[str]:
    """The first lines of the top-level statements of ``after`` that ``before`` does not hold."""
    import ast

    def statements(text: str) -> dict[str, str]:
        lines = text.splitlines(keepends=True)
        tree = ast.parse(text)
        out = {}
        for node in tree.body:
            start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
            segment = "".join(lines[start - 1 : node.end_lineno])
            out[segment] = lines[start - 1].strip()
        return out

    old = statements(before)
    return {first for segment, first in statements(after).items() if segment not in old}
