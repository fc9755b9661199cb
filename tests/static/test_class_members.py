"""A document's outline after an edit inside a large class keeps the members the edit left
alone: the same statements, and the same lines within each chunk, as parsing the whole new
text gives."""

from __future__ import annotations

import ast
import copy
import random
from pathlib import Path

import pytest

from offload_fixer.static import class_members
from offload_fixer.static.class_members import class_after
from offload_fixer.static.outline import SourceCache, outline

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "offload_fixer").rglob("*.py"))
CLASS = '''\
import jax


class Steps:
    """Doc."""

    scale = 2

    def setUp(self):
        self.x = 1

    @jax.jit
    def step(self, x):
        y = x * self.scale
        return y

    # a comment between members
    def test_one(self):
        s = """
text at column 0
"""
        return s

    def test_two(self): return 2

    a = 1; b = 2

    def tearDown(self):
        pass


def after():
    return 1
'''


@pytest.fixture
def every_class(monkeypatch):
    """Every class is updated member by member, however short."""
    monkeypatch.setattr(class_members, "MEMBERS_CHARS", 1)


def lines_within_chunks(text: str, found) -> list[str]:
    """Each chunk's statements dumped with their positions, lines counted from the chunk's
    first statement (a document's outline keeps older numbers for chunks left alone)."""
    dumped = []
    for group in found.groups:
        moved = [copy.deepcopy(statement) for statement in group]
        first = min([group[0].lineno, *(d.lineno for d in getattr(group[0], "decorator_list", ()))])
        for statement in moved:
            ast.increment_lineno(statement, 1 - first)
        dumped.append("\n".join(ast.dump(s, include_attributes=True) for s in moved))
    return dumped


def edits(text: str, rng: random.Random, count: int) -> list[str]:
    """Versions one after another, each one edit away from the last that parses: a character
    typed or removed, a line added, removed, indented or dedented, anywhere."""
    versions = []
    for _ in range(count):
        try:
            ast.parse(versions[-1] if versions else text)
        except SyntaxError:
            pass
        else:
            text = versions[-1] if versions else text
        lines = text.splitlines(keepends=True)
        index = rng.randrange(len(lines))
        line = lines[index]
        kind = rng.choice(["type", "delete", "insert", "remove", "indent", "dedent", "newline"])
        if kind == "type":
            at = rng.randrange(len(line) + 1)
            line = line[:at] + rng.choice(["x", " ", "(", ")", '"', "#", ":", "1"]) + line[at:]
            lines[index] = line
        elif kind == "delete" and len(line) > 1:
            at = rng.randrange(len(line) - 1)
            lines[index] = line[:at] + line[at + 1 :]
        elif kind == "insert":
            lines.insert(index, rng.choice(["\n", "    x = 1\n", "        y = 2\n", "z = 3\n", "    # c\n"]))
        elif kind == "remove":
            del lines[index]
        elif kind == "indent":
            lines[index] = "    " + line
        elif kind == "dedent":
            lines[index] = line[4:] if line.startswith("    ") else line
        else:
            at = rng.randrange(len(line) + 1)
            lines[index] = line[:at] + "\n" + line[at:]
        versions.append("".join(lines))
    return versions


def assert_outlines_alike(texts: list[str]) -> int:
    """Through one cache, each version outlines as it does from scratch; how many versions
    were updated member by member."""
    cache = SourceCache()
    taken = 0
    real = class_members.class_after

    def counting(*args, **kwargs):
        nonlocal taken
        found = real(*args, **kwargs)
        taken += found is not None
        return found

    from offload_fixer.static import outline as outline_module

    outline_module.class_after = counting
    try:
        for text in texts:
            try:
                fresh = outline(text)
            except (SyntaxError, ValueError):
                continue  # the cache keeps the last version that parsed, as a document's does
            found = outline(text, cache)
            assert found.spans == fresh.spans, text
            assert lines_within_chunks(text, found) == lines_within_chunks(text, fresh), text
    finally:
        outline_module.class_after = real
    return taken


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_random_edits_outline_as_a_fresh_parse(every_class, newline):
    text = CLASS.replace("\n", newline)
    taken = 0
    for seed in range(40):
        rng = random.Random(seed)
        taken += assert_outlines_alike([text, *edits(text, rng, 12)])
    assert taken > 100


def test_edits_to_the_classes_of_the_package_outline_as_a_fresh_parse(every_class):
    taken = 0
    for path in FILES[::5]:
        text = path.read_text(encoding="utf-8")
        if "\nclass " not in text:
            continue
        taken += assert_outlines_alike([text, *edits(text, random.Random(path.name), 8)])
    assert taken > 20


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("class Steps:", "class Steps(object):"),  # the header
        ("    scale = 2\n", "scale = 2\n"),  # a statement leaves the class
        ("    def setUp(self):\n        self.x = 1\n", "  def setUp(self):\n        self.x = 1\n"),  # indentation
        ('        s = """\n', '        s = """\n"""\n'),  # a string opened
    ],
)
def test_what_is_not_inside_a_member_is_left_to_a_whole_parse(every_class, old, new):
    (cls,) = [s for s in ast.parse(CLASS).body if isinstance(s, ast.ClassDef)]
    start = CLASS.index("\n\n\nclass") + 3
    end = CLASS.index("\n\n\ndef after") + 1
    chunk = CLASS[start:end]
    edited = chunk.replace(old, new, 1)
    at = chunk.index(old)
    assert class_after([cls], chunk, edited, (at, at + len(old)), None, False) is None


def test_the_members_the_edit_left_alone_are_kept(every_class):
    cache = SourceCache()
    first = outline(CLASS, cache)
    (cls,) = [g[0] for g in first.groups if isinstance(g[0], ast.ClassDef)]
    members = list(cls.body)
    edited = CLASS.replace("        y = x * self.scale\n", "        y = x * self.scale\n        z = y\n")
    second = outline(edited, cache)
    (updated,) = [g[0] for g in second.groups if isinstance(g[0], ast.ClassDef)]
    assert updated is not cls and cls.body == members  # the earlier version's class keeps its list
    kept = [new is old for new, old in zip(updated.body, members)]
    assert kept == [True, True, True, False, True, True, True, True, True]  # `step` parsed again


def test_lines_after_the_last_member_belong_to_the_next_chunk(every_class):
    """A comment line typed under the class's last statement is the next chunk's first line
    in a fresh cut: the class is not updated member by member then."""
    edited = CLASS.replace(
        "    def tearDown(self):\n        pass\n", "    def tearDown(self):\n        return 1\n    # note\n"
    )
    assert_outlines_alike([CLASS, edited])
    assert assert_outlines_alike([CLASS, CLASS.replace("        pass\n", "        return 1\n")]) == 1
