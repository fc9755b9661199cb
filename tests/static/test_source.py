"""Parsing by top-level statement: the assembled module is the file, every node sits where a
whole-file parse puts it, and a check through a :class:`SourceCache` cuts the text as ``ast``
of the whole text does and reports exactly what a check without one and a whole-file parse
report, before and after edits (which move the cached chunks)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import importlib.util
import itertools
import random
import textwrap
from pathlib import Path

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from offload_fixer import jax_compat
from offload_fixer.static import SourceCache, check_source
from offload_fixer.static.api import LIBCST_LIMIT
from offload_fixer.static.interpreter import Interpreter
from offload_fixer.static.outline import outline
from offload_fixer.static.policies import unpinned_policies
from offload_fixer.static.prefilter import may_hold_host_move
from offload_fixer.static.rules import diagnostics, eager_findings, findings
from offload_fixer.static.source import ParsedSource, parse_source

from .helpers import LEGACY, flow, program

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(
    [
        *(ROOT / "tests" / "lsp_fixtures").glob("*.py"),
        *(ROOT / "examples").glob("*.py"),
        *(ROOT / "tests" / "analysis" / "catalogue").glob("*.py"),
    ],
    key=str,
)

LAYOUTS = {
    "indented comments after blocks": (
        "def f():\n    x = 1\n    # c1\n# c2\n\n    # c3\n\ndef g():\n    pass\n        # deeper\n"
        "    # same\n\n# final\n"
    ),
    "decorators and comments between them": "@a\n# between\n@b(\n  1)\ndef f(): pass\n@c\nclass K: x = 1\n",
    "statements sharing lines": "x = 1; y = 2\nz = (1,\n 2); w = 3\nif x: pass\n",
    "backslash continuation": "x = 1 + \\\n  2\ny = 3\n",
    "header only": "# a\n\n# b\n",
    "header then statements": "\n\n# c\n\nimport x\n\n\n# d\nimport y\n",
    "no trailing newline": "x = 1\ndef f():\n    return 1\n    # c",
    "blank lines with spaces": "x = 1\n   \n\t\ny = 2\n  ",
    "string holding code at column 0": 's = """\ndef fake():\n    pass\n"""\ndef real():\n    return 1\n',
    "indent set by a later block": "if x: pass\nelse:\n  y = 1\ndef f():\n    return 2\n",
    "indentation differing per function": "def f():\n  x = 1\n\ndef g():\n    y = 2\n    if y:\n        z = 3\n",
    "tabs": "x = 1\nclass A:\n\tdef f(self):\n\t\treturn 1\n\t# tab\ndef g():\n    return 2\n",
    "crlf": "import x\r\n\r\ndef f():\r\n    return 1\r\n# end\r\n",
    "mixed line ends": "import x\r\ndef f():\n    return 1\r\n\ny = 2\n",
    "mixed line ends, crlf later": "import x\ndef f():\r\n    return 1\r\ny = 2",
    "form feeds": "x = 1\n\x0c\ndef f():\n    return 1\n\x0c# c\ny = 2\n",
    "equal chunks": "x = 1\nx = 1\ndef f():\n    return 1\n\n\ndef f():\n    return 1\n",
    "match": "match x:\n  case 1:\n      pass\ndef f():\n    return 1\n",
    "type parameters (Python 3.12)": "class Box[T]:\n    x = 1\ntype Pair[T] = tuple[T, T]\ndef f[T](x: T) -> T:\n    return x\n",
}


def jit_programs_in_static_tests() -> list[str]:
    """The programs the other static tests check: their string constants that mention jit,
    with the shared header where they rely on it."""
    found: dict[str, None] = {}
    for path in sorted((ROOT / "tests" / "static").glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "jit" in node.value:
                body = textwrap.dedent(node.value)
                for text in (body, program(body)):
                    try:
                        ast.parse(text)
                    except SyntaxError:
                        continue
                    if may_hold_host_move(text):
                        found[text] = None
    return list(found)


def lsp_benchmark():
    spec = importlib.util.spec_from_file_location("lsp_latency", ROOT / "benchmarks" / "lsp_latency.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def benchmark_module() -> str:
    return lsp_benchmark().generate(2000, True)


def test_the_benchmarks_typed_versions_differ_one_line_at_a_time():
    """``lsp_latency.py --real`` types in a real file: each version parses and differs from
    the one before in one line, the files themselves untouched."""
    path = ROOT / "offload_fixer" / "static" / "source.py"
    text = path.read_text(encoding="utf-8")
    versions = lsp_benchmark().typed_versions(text, 12)
    assert len(versions) == 13 and versions[0] == text == path.read_text(encoding="utf-8")
    for before, after in itertools.pairwise(versions):
        ast.parse(after)
        changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
        assert len(changed) == 1 and changed[0][1].startswith(changed[0][0])


PROGRAMS = jit_programs_in_static_tests()


LAYOUT_NODES = (
    cst.EmptyLine,
    cst.BaseParenthesizableWhitespace,
    cst.TrailingWhitespace,
    cst.Newline,
    cst.Comment,
    cst.Comma,
    cst.Dot,
    cst.Colon,
    cst.AssignEqual,
    cst.Semicolon,
    cst.LeftParen,
    cst.RightParen,
    cst.LeftSquareBracket,
    cst.RightSquareBracket,
    cst.LeftCurlyBrace,
    cst.RightCurlyBrace,
    cst.BaseBinaryOp,
    cst.BaseBooleanOp,
    cst.BaseCompOp,
    cst.BaseUnaryOp,
    cst.BaseAugOp,
    cst.Asynchronous,
)
"""Layout, which diagnostics never name; blank and comment lines may also change owner (a
block's footer or the next statement)."""


def node_layout(module: cst.Module, positions) -> list[tuple[str, object]]:
    """``(node type, code range)`` of every node but layout, in text order."""
    out: list[tuple[str, object]] = []

    class Collect(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, LAYOUT_NODES):
                return False
            if not isinstance(node, cst.Module):
                out.append((type(node).__name__, positions(node)))
            return True

    module.visit(Collect())
    return out


def parsed(text: str, cache: SourceCache | None = None) -> ParsedSource:
    try:
        found = outline(text)
    except SyntaxError:
        found = None
    return parse_source(text, found, cache)


@pytest.mark.parametrize("name", [*LAYOUTS, *(path.name for path in FILES), "benchmark"])
def test_chunks_assemble_the_file_and_keep_every_position(name):
    text = LAYOUTS.get(name) or (
        benchmark_module()
        if name == "benchmark"
        else next(p for p in FILES if p.name == name).read_text(encoding="utf-8")
    )
    whole = cst.parse_module(text)
    chunked = parsed(text)
    assert len(chunked.pieces) == len(whole.body)
    assert chunked.module.code == whole.code == text
    assert (chunked.module.default_indent, chunked.module.default_newline, chunked.module.has_trailing_newline) == (
        whole.default_indent,
        whole.default_newline,
        whole.has_trailing_newline,
    )
    whole_positions = MetadataWrapper(whole, unsafe_skip_copy=True).resolve(PositionProvider)
    expected = node_layout(whole, whole_positions.__getitem__)
    assert node_layout(chunked.module, chunked.code_range) == expected
    assert len(expected) > 0 or not whole.body


def test_a_module_parsed_whole_is_located_statement_by_statement():
    text = LAYOUTS["indented comments after blocks"] + LAYOUTS["statements sharing lines"]
    whole = cst.parse_module(text)
    positions = MetadataWrapper(whole, unsafe_skip_copy=True).resolve(PositionProvider)
    assert node_layout(whole, ParsedSource(whole).code_range) == node_layout(whole, positions.__getitem__)


def test_text_ast_cannot_cut_is_parsed_whole():
    text = "def f():\n    return 1\n"
    assert len(parse_source(text, None).pieces) == 1
    with pytest.raises(cst.ParserSyntaxError):
        parse_source("def f(:\n", None)


def test_a_change_inside_one_function_parses_one_chunk():
    text = benchmark_module()
    cache = SourceCache(on_demand=False)  # every chunk parsed, as the check's whole path does
    check_source(text, "generated.py", cache=cache)
    first, groups = cache.parsed, cache.outline.groups
    edited = text.replace("c * 3 + 1.0", "c * 3 + 7.0", 1)
    assert edited != text
    check_source(edited, "generated.py", cache=cache)
    assert cache.parsed == first + 1
    edited_chunk = next(i for i, (a, b) in enumerate(cache.outline.spans) if a <= edited.index("7.0") < b)
    assert [i for i, (a, b) in enumerate(zip(groups, cache.outline.groups)) if a is not b] == [edited_chunk]
    check_source(text, "generated.py", cache=cache)  # undo: the old chunk is still there
    assert cache.parsed == first + 1


def test_equal_statements_stay_distinct_nodes():
    body = "@jax.jit\ndef f(x):\n    return jax.device_put(x, host) * 2\n"
    text = program("\n\n" + body + "\n\n" + body)  # two chunks of the same text
    module = parsed(text, SourceCache()).module
    assert module.body[-1] is not module.body[-2] and module.body[-1].deep_equals(module.body[-2])
    for on_demand in (True, False):
        cached = check_source(text, "prog.py", jax_version=LEGACY, cache=SourceCache(on_demand=on_demand))
        assert cached == check_source(text, "prog.py", jax_version=LEGACY)
        assert len({d.return_span.line for d in flow(cached)}) == 2


def test_cache_keeps_the_latest_text_and_a_bounded_rest():
    cache = SourceCache(spare=2)
    text = "import jax\n" + "".join(f"x{i} = {i}\n" for i in range(10))
    parsed(text, cache)
    assert len(cache) == 11
    for i in range(5):
        parsed(text.replace("x0 = 0", f"x0 = {i + 100}"), cache)
    assert len(cache) == 11 + 2


def edits(text: str, rng: random.Random, count: int) -> list[str]:
    """One-line edits: a changed number, a line added or removed (which moves every chunk
    below it), a comment, an indented line, a line break in the middle of a statement."""
    lines = text.splitlines(keepends=True)
    out = []
    for _ in range(count):
        index = rng.randrange(len(lines))
        line = lines[index]
        kind = rng.choice(["number", "insert", "delete", "comment", "indent", "top", "split"])
        changed = list(lines)
        if kind == "number" and any(ch.isdigit() for ch in line):
            digit = next(i for i, ch in enumerate(line) if ch.isdigit())
            changed[index] = line[:digit] + "7" + line[digit + 1 :]
        elif kind == "insert":
            changed.insert(index, "\n")
        elif kind == "delete":
            del changed[index]
        elif kind == "comment":
            changed.insert(index, "    # note\n" if line.startswith(" ") else "# note\n")
        elif kind == "indent":
            changed[index] = "    " + line
        elif kind == "top":
            changed.insert(0, "import os\n")
        else:
            cut = len(line) // 2
            changed[index] = line[:cut] + "\n" + line[cut:]
        out.append("".join(changed))
    return out


class WholeModulePositions:
    """Positions as the check computed them before chunks: the whole module at once."""

    def __init__(self, module: cst.Module, path: str, sha256: str) -> None:
        self.module = module
        self.path = path
        self.sha256 = sha256
        self.positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)

    def path_of(self, node):
        return self.path

    def sha256_of(self, node):
        return self.sha256

    def code_range(self, node):
        return self.positions[node]

    def functions_around(self, node):
        return [(r, n.name.value) for n, r in self.positions.items() if isinstance(n, cst.FunctionDef)]


def whole_file_diagnostics(text: str) -> tuple:
    """The diagnostics of one whole-file parse with whole-module positions."""
    module = cst.parse_module(text)
    spelling = jax_compat.spelling(LEGACY)
    interpreter = Interpreter(module, text, regime=spelling.regime)
    by_statement: dict[int, list] = {}
    for index, sites in interpreter.jit_sites_by_statement().items():
        for jitted in sites:
            site = interpreter.analyse(jitted)
            if site is not None:
                by_statement.setdefault(index, []).extend(findings(site, spelling))
    # Then the code outside any jit, every statement of it, as the check runs it.
    for index, (operations, called) in interpreter.eager_by_statement(range(interpreter.statement_count)).items():
        here = by_statement.setdefault(index, [])
        here.extend(eager_findings(operations))
        for site in called:
            here.extend(findings(site, spelling))
    found = [f for index in sorted(by_statement) for f in by_statement[index]]
    digest = hashlib.sha256(text.encode()).hexdigest()
    located = WholeModulePositions(module, "prog.py", digest)
    policies = tuple(unpinned_policies(located, text, "prog.py", "tpu", digest))
    return (tuple(diagnostics(found, located, "tpu", spelling)) if found else ()) + policies


def outline_or_error(text: str, cache: SourceCache | None = None):
    try:
        found = outline(text, cache)
    except (SyntaxError, ValueError) as exc:
        return type(exc), str(exc)
    return found.spans, ast.dump(found.tree)


def assert_same_with_and_without_cache(text: str, rng: random.Random, count: int) -> None:
    """Through one cache, the text, edited versions of it and the text again are cut into
    the same chunks and check the same as without a cache, and report what a whole-file
    parse reports; through a cache that parses every statement (the check's whole path) too.
    What does not depend on the cache is computed once per version."""
    caches, outlines = (SourceCache(), SourceCache(on_demand=False)), SourceCache()
    for version in [text, *edits(text, rng, count), text]:
        assert outline_or_error(version, outlines) == outline_or_error(version), version
        # Without a cache only the statements that can hold a site are read: fewer modules.
        alone = check_source(version, "prog.py", jax_version=LEGACY)
        whole = functools.cache(lambda version=version: whole_file_diagnostics_or_none(version))
        for cache in caches:
            result = check_source(version, "prog.py", jax_version=LEGACY, cache=cache)
            assert set(alone.dependencies) <= set(result.dependencies), version
            if result.parse_error is not None and result.parse_error.message.startswith(LIBCST_LIMIT):
                # CPython compiles it but libcst cannot parse it whole: read statement by
                # statement, a file whose unparseable statements the check never reads is
                # still checked.
                assert alone.parse_error is None or alone.parse_error == result.parse_error, version
                continue
            assert result == dataclasses.replace(alone, dependencies=result.dependencies), version
            if result.parse_error is None:
                expected = whole()
                if expected is None:  # libcst does not parse it whole
                    if cache.on_demand:
                        continue  # only statements that parse alone were read, as without a cache (above)
                    expected = ()  # ruled out by the prefilter before any parse
                assert result.diagnostics == expected, version


def whole_file_diagnostics_or_none(text: str) -> tuple | None:
    """:func:`whole_file_diagnostics`, or None where libcst cannot parse the text whole."""
    try:
        return whole_file_diagnostics(text)
    except cst.ParserSyntaxError:
        return None


@pytest.mark.parametrize("index", range(len(PROGRAMS)))
def test_static_test_programs_check_the_same_through_a_cache(index):
    assert_same_with_and_without_cache(PROGRAMS[index], random.Random(index), 4)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fixture_files_check_the_same_through_a_cache(path):
    text = path.read_text(encoding="utf-8")
    assert_same_with_and_without_cache(text, random.Random(path.name), 8)


def test_benchmark_module_checks_the_same_through_a_cache():
    text = benchmark_module()
    result = check_source(text, "prog.py", jax_version=LEGACY)
    assert result.diagnostics  # the host in_shardings finding
    assert_same_with_and_without_cache(text, random.Random(0), 2)


@pytest.mark.parametrize("name", LAYOUTS)
def test_layouts_check_the_same_through_a_cache(name):
    text = program("@jax.jit\ndef f(x):\n    return jax.device_put(x, host) * 2\n") + LAYOUTS[name]
    assert_same_with_and_without_cache(text, random.Random(name), 4)


def test_functions_of_one_statement_keep_their_own_names():
    """What a cached chunk keeps for the interpreter is per function, not per statement: here
    ``a`` binds ``helper`` but ``b`` calls the module's."""
    text = program("""
        def helper(x):
            return jax.device_put(x, host) * 2


        class Steps:
            @staticmethod
            def a(x):
                helper = None
                return x

            @staticmethod
            @jax.jit
            def b(x):
                return helper(x)
    """)
    cache = SourceCache(on_demand=False)  # every statement parsed and its memos kept
    for _ in range(2):  # the second check reads what the first kept
        result = check_source(text, "prog.py", jax_version=LEGACY, cache=cache)
        assert result.diagnostics == whole_file_diagnostics(text)
        assert [d.function.name for d in flow(result)] == ["b"]


TEST_CLASS = '''

class OffloadTest:
    """A test case whose methods jit what they move to host."""

    def setUp(self):
        self.scale = 2

    def test_returns_host(self):
        @jax.jit
        def f(x):
            return jax.device_put(x, host) * self.scale

        return f

    # between two tests
    def test_device_only(self):
        return jax.jit(lambda x: x + 1)

    def test_host_output(self):
        g = jax.jit(lambda x: jax.device_put(x, host))
        return g

    def tearDown(self):
        pass
'''


@pytest.fixture
def small_pieces(monkeypatch):
    """Every class of more than one statement is parsed in pieces of one or two statements,
    and a document's outline follows an edit inside any class member by member."""
    from offload_fixer.static import class_members, class_pieces

    monkeypatch.setattr(class_pieces, "SPLIT_CHARS", 1)
    monkeypatch.setattr(class_pieces, "PIECE_CHARS", 1)
    monkeypatch.setattr(class_members, "MEMBERS_CHARS", 1)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_a_class_in_pieces_places_every_node_in_its_piece(small_pieces, path):
    """Positions and enclosing functions resolved in the one piece of a class that holds a
    node are those of the whole class."""
    from offload_fixer.static.cst_nodes import walk_nodes
    from offload_fixer.static.source import Chunk

    text = path.read_text(encoding="utf-8")
    spans = outline(text).spans or []
    pieced = 0
    for index, (start, end) in enumerate(spans):
        chunk = Chunk.parse(text[start:end], index == 0)
        if chunk is None or not chunk.parts:
            continue
        pieced += 1
        whole = chunk.positions()
        for node in walk_nodes(chunk.statements):
            assert chunk.holds(node)
            assert chunk.position(node) == whole[node], (path.name, type(node).__name__)
            around = chunk.functions_around(node)
            assert set(around) <= set(chunk.functions())
            assert {f for f in chunk.functions() if _contains(f[0], whole[node])} <= set(around)
    assert pieced or "class " not in text


def _contains(outer, inner) -> bool:
    return (outer.start.line, outer.start.column) <= (inner.start.line, inner.start.column) and (
        inner.end.line,
        inner.end.column,
    ) <= (outer.end.line, outer.end.column)


def test_classes_in_pieces_check_the_same_through_a_cache(small_pieces):
    """Edited, moved and copied (a copy's pieces are the same text, never the same nodes)."""
    copy = TEST_CLASS.replace("class OffloadTest", "class OffloadTestCopy")
    text = program(TEST_CLASS + copy)
    for seed in range(6):
        assert_same_with_and_without_cache(text, random.Random(seed), 12)
        assert_same_with_and_without_cache(program(TEST_CLASS), random.Random(10 + seed), 12)


def test_an_edit_to_a_class_in_pieces_parses_the_piece_it_touched(small_pieces):
    from offload_fixer.static.cst_nodes import walk_nodes

    text = program(TEST_CLASS)
    cache = SourceCache()
    first = check_source(text, "prog.py", jax_version=LEGACY, cache=cache)
    assert [d.code for d in first.diagnostics] == ["OFL1201", "OFL1200", "OFL1200"]

    def class_chunk():
        (chunk,) = (c for c in cache.in_use.values() if c.parts)
        return chunk

    before = class_chunk()
    edited = text.replace("self.scale = 2", "self.scale = 3")
    again = check_source(edited, "prog.py", jax_version=LEGACY, cache=cache)
    assert again == check_source(edited, "prog.py", jax_version=LEGACY)
    after = class_chunk()
    assert after is not before and not before.owns_its_parts()
    kept = [b for (_, b), (_, a) in zip(before.parts, after.parts) if a is b]
    assert len(kept) == len(after.parts) - 1  # all but the piece holding the edit
    # A copy of the class in the next version shares the pieces' text, never their nodes.
    copied = edited + TEST_CLASS.replace("class OffloadTest", "class OffloadTestCopy")
    result = check_source(copied, "prog.py", jax_version=LEGACY, cache=cache)
    assert result == check_source(copied, "prog.py", jax_version=LEGACY)
    assert len(result.diagnostics) == 6
    held = [c for c in cache.in_use.values() if c.parts]
    assert len(held) == 2
    ids = [{id(node) for node in walk_nodes(chunk.statements)} for chunk in held]
    assert not ids[0] & ids[1]


def test_a_chunk_whose_piece_another_took_is_parsed_again(small_pieces):
    """A class's cached chunk whose piece a newer class took while the first was not in use
    is parsed again when it is read: two chunks in use never hold the same node."""
    from offload_fixer.static.cst_nodes import walk_nodes
    from offload_fixer.static.source import cached_chunk

    first = textwrap.dedent(TEST_CLASS)
    second = first.replace("class OffloadTest", "class Renamed")
    cache = SourceCache()
    cache.begin()
    one = cached_chunk(cache, first, False, 0)
    cache.begin()  # the next check: `one` is not in use, its pieces may be taken
    other = cached_chunk(cache, second, False, 0)
    assert [a is b for (_, a), (_, b) in zip(one.parts, other.parts)] == [False] + [True] * (len(one.parts) - 1)
    again = cached_chunk(cache, first, False, 0)
    assert again is not one and again.owns_its_parts() and other.owns_its_parts()
    assert not {id(n) for n in walk_nodes(again.statements)} & {id(n) for n in walk_nodes(other.statements)}
