"""A large class parsed a few methods at a time is the tree a whole parse gives, node for node."""

from __future__ import annotations

import ast
from pathlib import Path

import libcst as cst
import pytest

from offload_fixer.static import class_pieces
from offload_fixer.static.class_pieces import parse_class_in_pieces
from offload_fixer.static.outline import NEWLINE

ROOT = Path(__file__).resolve().parents[2]
CORPORA = ("examples", "tests/static_vs_dynamic", "tests/runner_programs", "tests/lsp_fixtures", "offload_fixer")


@pytest.fixture
def small_pieces(monkeypatch):
    """Every class of a few lines is cut, into pieces of one or two statements."""
    monkeypatch.setattr(class_pieces, "SPLIT_CHARS", 1)
    monkeypatch.setattr(class_pieces, "PIECE_CHARS", 1)


def class_chunks(text: str) -> list[str]:
    """Each top-level class statement with the lines above it, as the check cuts chunks."""
    starts = [0, *(match.end() for match in NEWLINE.finditer(text))]
    chunks, previous = [], 0
    for statement in ast.parse(text).body:
        last = statement.end_lineno or statement.lineno
        end = starts[last] if last < len(starts) else len(text)
        if isinstance(statement, ast.ClassDef):
            chunks.append(text[previous:end])
        previous = end
    return chunks


def test_every_class_of_the_corpora_parses_alike_in_pieces(small_pieces):
    files = sorted(path for corpus in CORPORA for path in (ROOT / corpus).rglob("*.py"))
    split = 0
    for path in files:
        for chunk in class_chunks(path.read_text(encoding="utf-8")):
            found = parse_class_in_pieces(chunk)
            if found is not None:
                split += 1
                assert found.module.deep_equals(cst.parse_module(chunk)), (path, chunk[:80])
    assert split > 100


@pytest.mark.parametrize(
    "text",
    [
        "# header\n\nclass A(Base):\n    '''Doc.'''\n\n    x = 1\n\n    def f(self):\n        return 1\n\n    # between\n    def g(self):\n        pass\n",
        "class A:\n    def f(self):\n        return 1\n        # deeper, after the method: f's block owns it\n\n    def g(self):\n        pass\n\n    def h(self):\n        pass\n",
        "class A:\r\n    def f(self):\r\n        return 1\r\n\r\n    @property\r\n    # on the decorator\r\n    def g(self):\r\n        pass\r\n",
        "class A:\n\tdef f(self):\n\t\treturn 1\n\n\tdef g(self):\n\t\tpass\n\t# trailing, at the body's indent\n",
        "class A:\n    class B:\n        def f(self):\n            pass\n\n    x = 1; y = 2\n    def g(self):\n        s = '''\nclass C:\n    pass\n'''\n        return s",
        "@decorate(\n    1,\n)\nclass A(\n    Base,\n):  # on the header\n    x = 1\n    y = 2\n    z = 3\n",
    ],
)
def test_layouts_parse_alike_in_pieces(small_pieces, text):
    found = parse_class_in_pieces(text)
    assert found is not None
    assert found.module.deep_equals(cst.parse_module(text))
    assert found.module.code == text


@pytest.mark.parametrize(
    "text",
    [
        "class A: x = 1\n",  # the body on the header's line
        "class A:\n    x = 1\n",  # one statement: nothing to cut
        "def f():\n    x = 1\n    y = 2\n",  # not a class
        "class A:\n    x = 1\n    y = (\n",  # not Python
    ],
)
def test_what_cannot_be_cut_is_left_to_a_whole_parse(small_pieces, text):
    assert parse_class_in_pieces(text) is None


def test_only_a_large_class_is_cut():
    text = "class A:\n" + "".join(f"    def f{i}(self):\n        return {i}\n\n" for i in range(40))
    assert len(text) < class_pieces.SPLIT_CHARS and parse_class_in_pieces(text) is None
    large = "class A:\n" + "".join(f"    def f{i}(self):\n        return {i}\n\n" for i in range(1500))
    assert parse_class_in_pieces(large).module.deep_equals(cst.parse_module(large))


def test_a_class_cut_by_the_callers_ast_parses_alike(small_pieces):
    """The ``ast`` of the whole file, its line numbers shifted, cuts each class as the class's
    own parse does; a method blanked out of the text (a pruned one) is skipped."""
    files = sorted(path for corpus in CORPORA for path in (ROOT / corpus).rglob("*.py"))
    cut = blanked_cut = 0
    for path in files:
        text = path.read_text(encoding="utf-8")
        starts = [0, *(match.end() for match in NEWLINE.finditer(text))]
        previous = 0
        for statement in ast.parse(text).body:
            last = statement.end_lineno or statement.lineno
            end = starts[last] if last < len(starts) else len(text)
            chunk, lines_before = text[previous:end], text.count("\n", 0, previous)
            previous = end
            if not isinstance(statement, ast.ClassDef):
                continue
            found = parse_class_in_pieces(chunk, shape=(statement, lines_before))
            if found is None:
                continue
            cut += 1
            assert found.module.deep_equals(cst.parse_module(chunk)), (path, chunk[:80])
            methods = [s for s in statement.body if isinstance(s, ast.FunctionDef) and not s.decorator_list]
            if len(methods) < 2:
                continue
            lines = chunk.splitlines(keepends=True)
            dropped = methods[0]
            for number in range(dropped.lineno - lines_before, dropped.end_lineno - lines_before + 1):
                lines[number - 1] = "\n"
            blanked = "".join(lines)
            pruned = parse_class_in_pieces(blanked, shape=(statement, lines_before))
            if pruned is not None:  # None: one statement left, nothing to cut
                blanked_cut += 1
                assert pruned.module.deep_equals(cst.parse_module(blanked)), (path, chunk[:80])
    assert cut > 100 and blanked_cut > 50


def test_a_shape_whose_lines_are_not_the_texts_cuts_nothing(small_pieces):
    text = "class A:\n    x = 1\n\n    def f(self):\n        return 1\n\n    y = 2\n"
    (cls,) = ast.parse(text).body
    assert parse_class_in_pieces(text, shape=(cls, 0)) is not None
    assert parse_class_in_pieces(text, shape=(cls, 1)) is None  # the statements' lines one off
    assert parse_class_in_pieces(text, shape=(cls, -40)) is None
