"""Which ``.py`` files a directory holds for the check: ``.gitignore`` files, user excludes and
the directories every Python tool skips (virtual environments, caches, VCS metadata)."""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator, Sequence

SKIPPED_DIRECTORIES = frozenset(
    {
        ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", "__pycache__", ".mypy_cache",
        ".pytest_cache", ".ruff_cache", ".pytype", ".eggs", "node_modules", "__pypackages__",
        "site-packages", "build", "dist", "_build", "buck-out", ".ipynb_checkpoints",
        ".offload-fixer-cache",
    }
)
"""Skipped while walking a directory; a path given explicitly is always checked (as ruff does)."""


class SimpleIgnore:
    """The parts of gitignore syntax that matter for source trees: comments, ``!`` negation,
    trailing ``/`` for directories, anchoring by a leading or inner ``/``, ``*``/``**`` globs."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.rules: list[tuple[bool, bool, bool, str]] = []
        for raw in lines:
            line = raw.rstrip("\n").rstrip()
            if not line or line.startswith("#"):
                continue
            negate = line.startswith("!")
            line = line[1:] if negate else line
            directory_only = line.endswith("/")
            line = line.strip("/") if directory_only else line
            anchored = "/" in line
            self.rules.append((negate, directory_only, anchored, line.lstrip("/")))

    def match_file(self, relative: str) -> bool:
        is_directory = relative.endswith("/")
        parts = relative.strip("/").split("/")
        ignored = False
        for negate, directory_only, anchored, pattern in self.rules:
            if self._matches(parts, is_directory, directory_only, anchored, pattern):
                ignored = not negate
        return ignored

    @staticmethod
    def _matches(parts: list[str], is_directory: bool, directory_only: bool, anchored: bool, pattern: str) -> bool:
        # A pattern that names a directory also covers everything below it.
        for end in range(1, len(parts) + 1):
            if directory_only and end == len(parts) and not is_directory:
                continue
            if anchored:
                if fnmatch.fnmatchcase("/".join(parts[:end]), pattern.replace("**/", "*").replace("/**", "*")):
                    return True
            elif fnmatch.fnmatchcase(parts[end - 1], pattern):
                return True
        return False


def ignore_spec(lines: Sequence[str]):
    """A gitignore matcher: ``pathspec`` when installed, else :class:`SimpleIgnore`."""
    try:
        import pathspec
    except ImportError:
        return SimpleIgnore(lines)
    return pathspec.GitIgnoreSpec.from_lines(lines)


def python_files(paths: Iterable[str], excludes: Sequence[str] = ()) -> Iterator[str]:
    """Files to check, in a stable order: given files as they are, directories walked for
    ``.py`` files, and for ``.ipynb`` notebooks too where nbformat is installed to read them."""
    from offload_fixer.notebook import notebooks_supported

    suffixes = (".py", ".ipynb") if notebooks_supported() else (".py",)
    for path in map(os.fspath, paths):
        if os.path.isdir(path):
            root_rules = [(path, ignore_spec(list(excludes)))] if excludes else []
            yield from _walk(path, root_rules, suffixes)
        else:
            yield path


def _walk(directory: str, rules: list, suffixes: tuple[str, ...]) -> Iterator[str]:
    gitignore = os.path.join(directory, ".gitignore")
    if os.path.isfile(gitignore):
        try:
            with open(gitignore, encoding="utf-8", errors="replace") as handle:
                rules = rules + [(directory, ignore_spec(handle.read().splitlines()))]
        except OSError:
            pass
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        is_directory = entry.is_dir(follow_symlinks=False)
        if is_directory and entry.name in SKIPPED_DIRECTORIES:
            continue
        if not is_directory and not (entry.name.endswith(suffixes) and entry.is_file()):
            continue
        if _ignored(entry.path, is_directory, rules):
            continue
        if is_directory:
            yield from _walk(entry.path, rules, suffixes)
        else:
            yield entry.path


def _ignored(path: str, is_directory: bool, rules: list) -> bool:
    for base, spec in rules:
        relative = os.path.relpath(path, base).replace(os.sep, "/")
        if spec.match_file(relative + "/" if is_directory else relative):
            return True
    return False
