"""Walking directories: .gitignore files, user excludes, directories every tool skips."""

from __future__ import annotations

import os

import pytest

from offload_fixer.config import is_excluded
from offload_fixer.static.files import SimpleIgnore, ignore_spec, python_files


def _tree(root, paths):
    for path in paths:
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text("x = 1\n")


def _relative(root, files):
    return [os.path.relpath(f, root).replace(os.sep, "/") for f in files]


def test_gitignore_files_apply_below_their_directory(tmp_path):
    _tree(
        tmp_path,
        [
            "a.py",
            "gen/b.py",
            "src/c.py",
            "src/d_pb2.py",
            "src/out/e.py",
            "src/keep_pb2.py",
            "node_modules/f.py",
            "__pycache__/g.py",
            "src/h.txt",
        ],
    )
    (tmp_path / ".gitignore").write_text("# generated\ngen/\n")
    (tmp_path / "src" / ".gitignore").write_text("*_pb2.py\n!keep_pb2.py\n/out\n")
    assert _relative(tmp_path, python_files([str(tmp_path)])) == ["a.py", "src/c.py", "src/keep_pb2.py"]


def test_excludes_are_the_settings_engine(tmp_path):
    """The walk takes its exclusions from ``config.is_excluded``, the engine the settings use:
    a pattern without ``/`` names a file or directory anywhere, one with ``/`` a path from
    the root; an excluded directory is not entered."""
    _tree(tmp_path, ["a.py", "tests/test_a.py", "pkg/tests/test_b.py", "pkg/c.py"])
    root = str(tmp_path)
    entered = []

    def excluded(patterns):
        def test(path):
            entered.append(os.path.relpath(path, root).replace(os.sep, "/"))
            return is_excluded(path, patterns, root)

        return test

    assert _relative(tmp_path, python_files([root], excluded(["tests"]))) == ["a.py", "pkg/c.py"]
    assert "pkg/tests/test_b.py" not in entered  # pruned with its directory
    files = python_files([root], excluded(["./tests"]))
    assert _relative(tmp_path, files) == ["a.py", "pkg/c.py", "pkg/tests/test_b.py"]


def test_explicit_files_are_always_checked(tmp_path):
    _tree(tmp_path, [".venv/x.py"])
    explicit = str(tmp_path / ".venv" / "x.py")
    assert list(python_files([explicit], lambda path: True)) == [explicit]


@pytest.mark.parametrize(
    "pattern, path, ignored",
    [
        ("build/", "build/", True),
        ("build/", "build/x.py", True),
        ("build/", "src/build/x.py", True),
        ("build/", "build", False),
        ("*.log", "deep/a.log", True),
        ("/top.py", "top.py", True),
        ("/top.py", "sub/top.py", False),
        ("a/**/b.py", "a/x/y/b.py", True),
        ("docs/*.py", "docs/conf.py", True),
        ("docs/*.py", "src/docs/conf.py", False),
    ],
)
def test_simple_reader_agrees_with_gitignore_semantics(pattern, path, ignored):
    assert SimpleIgnore([pattern]).match_file(path) is ignored
    assert ignore_spec([pattern]).match_file(path) is ignored


def test_negation_re_includes_a_file():
    lines = ["*.py", "!keep.py"]
    for spec in (SimpleIgnore(lines), ignore_spec(lines)):
        assert spec.match_file("drop.py") and not spec.match_file("keep.py")


def test_what_cannot_be_read_is_named_never_skipped(tmp_path):
    from offload_fixer.static.files import Unreadable, walk

    _tree(tmp_path, ["good.py"])
    os.symlink("b.py", tmp_path / "a.py")
    os.symlink("a.py", tmp_path / "b.py")
    os.symlink("gone.py", tmp_path / "dangling.py")
    os.mkfifo(tmp_path / "pipe.py")
    os.symlink("/dev/zero", tmp_path / "zero.py")
    found = {os.path.basename(getattr(item, "path", item)): item for item in walk([str(tmp_path)])}
    assert found["good.py"] == str(tmp_path / "good.py")
    reasons = {name: item.reason for name, item in found.items() if isinstance(item, Unreadable)}
    assert "symlink loop" in reasons["a.py"] and "symlink loop" in reasons["b.py"]
    assert "dangling" in reasons["dangling.py"]
    assert "FIFO" in reasons["pipe.py"] and "character device" in reasons["zero.py"]
    assert list(python_files([str(tmp_path)])) == [str(tmp_path / "good.py")]  # the plain listing


def test_the_walk_never_leaves_the_tree_through_a_symlink_and_names_each_file_once(tmp_path):
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "pkg").mkdir(parents=True)
    outside.mkdir()
    (outside / "o.py").write_text("x = 1\n")
    (tree / "pkg" / "t.py").write_text("x = 1\n")
    (tree / "a_out.py").symlink_to(outside / "o.py")
    (tree / "a_alias.py").symlink_to(tree / "pkg" / "t.py")
    (tree / "dir_out").symlink_to(outside, target_is_directory=True)
    found = list(python_files([str(tree), str(tree / "pkg" / "t.py")]))
    assert found == [os.path.join(str(tree), "pkg", "t.py")]


def test_real_paths_answer_as_realpath_does(tmp_path, monkeypatch):
    """:class:`RealPaths` resolves each directory once for a run; its every answer is
    ``os.path.realpath``'s: through symlinked directories and files, ``..``, loops and paths
    that do not exist."""
    from offload_fixer.source.real_paths import RealPaths

    _tree(tmp_path, ["a/b/c.py", "x.py"])
    (tmp_path / "l").symlink_to(tmp_path / "a", target_is_directory=True)
    (tmp_path / "a" / "b" / "up.py").symlink_to("../../x.py")
    (tmp_path / "f.py").symlink_to("l/b/c.py")
    os.symlink("loop2.py", tmp_path / "loop1.py")
    os.symlink("loop1.py", tmp_path / "loop2.py")
    os.symlink("nowhere/gone.py", tmp_path / "dangling.py")
    monkeypatch.chdir(tmp_path / "a")
    paths = [
        *(str(tmp_path / p) for p in ("a/b/c.py", "l/b/c.py", "l/b/up.py", "f.py", "loop1.py", "dangling.py")),
        *(str(tmp_path / p) for p in ("l/b/../b/c.py", "l/..", "l/b/", "a/missing/z.py", "l", "l/b")),
        "b/c.py",
        "../l/b/c.py",
        "../f.py",
        "",
        ".",
        "..",
        "b",
        "b/.",
        "/",
        "//x",
    ]
    real = RealPaths()
    for path in paths * 2:  # the second time from what it kept
        assert real(path) == os.path.realpath(path), path


PATTERNS = [
    "*.pyc",
    "build/",
    "/top.py",
    "a/**/b.py",
    "docs/*.py",
    "lib",
    "!keep.py",
    "*.py[cod]",
    "[!a]bc/",
    "foo  ",
    " lead",
    "#comment",
    "\\#hash",
    "\\!bang",
    "**/deep",
    "x?y.py",
    "dist/**",
    "!lib/keep/",
    "sub/lib/x.py",
    "*.py[co]",
    "x\\*y",
    "a[bc]d/",
    "\\ lead2",
    "/docs/_build",
    "/pkg/**/gen",
    "#not/a/pattern",
    "*",
]
PATHS = [
    "a.pyc",
    "x/a.pyo",
    "x/a.py",
    "build/",
    "build/x.py",
    "src/build/x.py",
    "top.py",
    "sub/top.py",
    "a/b.py",
    "a/x/y/b.py",
    "docs/conf.py",
    "lib/",
    "lib/keep/",
    "lib/keep/x.py",
    "sub/lib/x.py",
    "libs/x.py",
    "keep.py",
    "xbc/",
    "abc/",
    "foo",
    "foo/",
    " lead",
    "lead",
    "#hash",
    "!bang",
    "q/deep/",
    "deep",
    "xzy.py",
    "dist/a/b.py",
    "plain.py",
    "m.pyc",
    "m.pyd",
    "x*y",
    "xzzy",
    "abd/",
    "acd/x.py",
    "aed/",
    " lead2",
    "docs/_build/",
    "docs/_build/x.py",
    "sub/docs/_build/",
    "pkg/gen/",
    "pkg/a/b/gen/x.py",
    "not/a/pattern",
]


@pytest.mark.parametrize("after", [1, 10**9])
@pytest.mark.parametrize("pattern", PATTERNS)
def test_prescreened_matching_is_pathspecs(pattern, after, monkeypatch):
    """Ruling paths out by the literal text of the patterns, then (``after`` that many paths
    asked) by one search of them all, never changes pathspec's answer: each pattern alone,
    after the others, and with a negation."""
    from offload_fixer.static import files

    pathspec = pytest.importorskip("pathspec")
    monkeypatch.setattr(files, "PRESCREEN_AFTER", after)
    for lines in ([pattern], [p for p in PATTERNS if p not in ("*", pattern)] + [pattern], [pattern, "!x/"]):
        screened, full = ignore_spec(lines), pathspec.GitIgnoreSpec.from_lines(lines)
        assert [p for p in PATHS if screened.match_file(p)] == [p for p in PATHS if full.match_file(p)], lines


def test_plain_patterns_are_read_without_pathspec():
    """A path that holds a plain pattern's text (``.log`` of ``*.log`` in ``logistic``) is
    decided by the pattern's own reading, and ``pathspec`` is not built; a path that holds a
    negation's text is left to it."""
    spec = ignore_spec(["*.log", "venv*/", "build/", "*.py[cod]", "# comment"])
    assert [
        spec.match_file(p) for p in ("a/b.log", "x/logistic/y.py", "venv3/", "venv3.py", "a/b.pyc", "build/x.py")
    ] == [
        True,
        False,
        True,
        False,
        True,
        True,
    ]
    assert spec._spec is None
    negated = ignore_spec(["*.log", "!keep.log", ".gemini/", "!.gemini/commands/"])
    assert negated.match_file("a/b.log") and negated.match_file(".gemini/")
    assert negated._spec is None
    assert not negated.match_file("a/keep.log")
    assert negated._spec is not None
