"""Which ``.py`` files (and ``.ipynb`` notebooks) a directory holds for the check: ``.gitignore``
files, the directories every Python tool skips (virtual environments, caches, VCS metadata)
and what the caller excludes. Exclusion is a predicate the caller passes: the one ``exclude``
engine is :func:`offload_fixer.config.is_excluded` (each file's own settings), used alike by
``check``, ``run``, ``fix`` and the language server."""

from __future__ import annotations

import errno
import fnmatch
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from offload_fixer.resolved_paths import PathChangedError, resolve
from offload_fixer.source.decoding import file_kind
from offload_fixer.source.real_paths import ListedPath, RealPaths, is_directory

SKIPPED_DIRECTORIES = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".bzr",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".pytype",
        ".eggs",
        "node_modules",
        "__pypackages__",
        "site-packages",
        "build",
        "dist",
        "_build",
        "buck-out",
        ".ipynb_checkpoints",
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
    """A gitignore matcher: ``pathspec`` when installed, else :class:`SimpleIgnore`; each built
    only for the paths that a literal of some pattern could match (:class:`_Prescreened`)."""
    return _Prescreened(lines)


def _full_spec(lines: Sequence[str]):
    try:
        import pathspec
    except ImportError:
        return SimpleIgnore(lines)
    return pathspec.GitIgnoreSpec.from_lines(lines)


PRESCREEN_AFTER = 32
"""Paths a spec's literal texts let through before its patterns are compiled into one search
(a few milliseconds; ``pathspec`` asks each pattern in turn, some 20 microseconds a path)."""


class _Prescreened:
    """A gitignore matcher asked only about paths that hold the literal text of some pattern
    (``/build/`` of ``build/``, ``.pyc`` of ``*.pyc``), then only about those that one search of
    all its patterns at once matches: a path no pattern matches is not ignored, whatever the
    negations, and most paths of a tree are ruled out by the first test, the rest by the
    second (``pathspec`` tries each pattern in turn). ``pathspec``, whose import and compiled
    patterns cost more than the rest of the walk of a cached run, is loaded only where the
    literal texts let a path through."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)
        self.literals = _literals(self.lines)
        self.plain = _plain_rules(self.lines) if self.literals is not None else None
        """Each pattern's literal texts and, for a plain one, how :class:`SimpleIgnore` reads it."""
        self._spec: Any = None
        self._asked = 0
        self._any: re.Pattern[str] | None = None

    def match_file(self, relative: str) -> bool:
        if self.literals is not None:
            padded = f"/{relative}/"
            prefixes, texts = self.literals
            if not padded.startswith(prefixes) and not any(text in padded for text in texts):
                return False
            if self.plain is not None:
                # Only the patterns whose texts the path holds can match it; where those are
                # all plain, they are read here (a checkout's ``.venv*`` or ``*.log`` against
                # ``.../logistic_regression/``), and ``pathspec`` is not loaded for them.
                hit = [rule for found, rule in self.plain if any(text in padded for text in found)]
                if all(rule is not None for rule in hit):
                    is_directory = relative.endswith("/")
                    parts = relative.strip("/").split("/")
                    return any(SimpleIgnore._matches(parts, is_directory, *rule) for rule in hit)  # type: ignore[misc]
        if self._spec is None:
            self._spec = _full_spec(self.lines)
        self._asked += 1
        if self._asked == PRESCREEN_AFTER:  # asked often: one search of all patterns pays
            self._any = _any_pattern(self._spec)
        if self._any is not None:
            from pathspec.util import normalize_file

            if self._any.search(normalize_file(relative)) is None:
                return False
        return bool(self._spec.match_file(relative))


def _any_pattern(spec: Any) -> re.Pattern[str] | None:
    """One expression that matches where any pattern of a ``pathspec`` spec does; None where
    the patterns are not all plain expressions of its gitignore translation (whose one named
    group, the directory mark, becomes a plain group), or the spec is :class:`SimpleIgnore`."""
    texts, flags = [], set()
    for pattern in getattr(spec, "patterns", None) or ():
        if getattr(pattern, "include", None) is None:
            continue  # a comment or blank line: matches nothing
        regex = getattr(pattern, "regex", None)
        if not isinstance(regex, re.Pattern) or not isinstance(regex.pattern, str):
            return None
        text = regex.pattern.replace("(?P<ps_d>", "(?:")
        if "(?P" in text:
            return None
        texts.append(f"(?:{text})")
        flags.add(regex.flags)
    if not texts or len(flags) > 1:
        return None
    try:
        return re.compile("|".join(texts), flags.pop())
    except re.error:
        return None


def _literals(lines: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """For each pattern that can ignore a path (not a comment, a blank line or a ``!``
    negation), texts one of which any path it matches holds, once written ``/path/``: a part of
    the pattern without wildcards is a whole part of the path (``/lib/`` of ``lib/``), else a
    run of its literal text (``.pyc`` of ``*.pyc``, one of ``.pyc``, ``.pyo`` of ``*.py[co]``);
    a pattern anchored by a ``/`` starts the path with its first parts that have no wildcard
    (``/build/lib/`` of ``/build/lib``). Returned as the texts a path may start with and those
    it may hold; None where some pattern has no such text (``*``): every path is asked."""
    prefixes, found = [], []
    for raw in lines:
        line = raw.rstrip()
        if not line or line.startswith(("#", "!")):
            continue
        parts = [_part_texts(part) for part in line.split("/")]
        if any(part is None for part in parts):
            return None
        leading = []
        for part in parts[1:] if line.startswith("/") else parts:
            if part is None or len(part) != 1 or not part[0].startswith("/"):
                break
            leading.append(part[0][1:])
        if "/" in line.rstrip("/") and leading:  # anchored: the pattern's first parts are the path's
            prefixes.append("/" + "".join(leading))
            continue
        best = max((texts for texts in parts if texts), key=lambda texts: min(map(len, texts)), default=None)
        if not best or not all(best):
            return None
        found.extend(best)
    return tuple(dict.fromkeys(prefixes)), tuple(dict.fromkeys(found))


_PLAIN_CLASS = re.compile(r"\[[\w.-]+\]")


def _plain_rules(lines: Sequence[str]) -> list[tuple[tuple[str, ...], tuple[bool, bool, str] | None]] | None:
    """For each pattern that can ignore a path, the texts one of which a path it matches holds
    once written ``/path/`` (as :func:`_literals` finds them) and, where the pattern is plain,
    its rule for :meth:`SimpleIgnore._matches`: one part (a trailing ``/`` for directories),
    ``*``, ``?`` and classes of plain characters, no escape and no ``**``, where ``fnmatch`` and
    gitignore agree. A negation (``!``) is never plain: a path that holds its texts is left to
    ``pathspec`` (one that does not cannot match it, so the negation cannot change its answer).
    None when a pattern has no literal text."""
    rules: list[tuple[tuple[str, ...], tuple[bool, bool, str] | None]] = []
    for raw in lines:
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        negated = line.startswith("!")
        found = _literals([line[1:] if negated else line])
        if found is None:
            return None
        prefixes, texts = found
        directory_only = line.endswith("/")
        body = line[:-1] if directory_only else line
        plain = not negated and not prefixes and body and "/" not in body and "\\" not in body and "**" not in body
        unclassed = _PLAIN_CLASS.sub("", body)
        plain = plain and "[" not in unclassed and "]" not in unclassed
        rules.append((prefixes + texts, (directory_only, False, body) if plain else None))
    return rules


def _part_texts(part: str) -> list[str] | None:
    """What one part of a pattern (between ``/``) makes a path hold: ``["/name/"]`` for a part
    without wildcards (escapes read), else the alternatives of its longest literal run (a class
    of plain characters, ``[co]``, makes one per character), [] for no part, [""] for none;
    None for a pattern that cannot be read (a trailing ``\\``)."""
    if not part:
        return []
    runs: list[list[str]] = [[""]]
    plain, index = True, 0
    while index < len(part):
        character = part[index]
        if character == "\\":
            if index + 1 == len(part):
                return None
            runs[-1] = [text + part[index + 1] for text in runs[-1]]
            index += 2
            continue
        if character in "*?":
            plain = False
            runs.append([""])
        elif character == "[":
            plain = False
            close = part.find("]", index + 2)
            inner = part[index + 1 : close] if close > 0 else ""
            if not inner or len(runs[-1]) * len(inner) > 16 or not all(c.isalnum() or c in "._" for c in inner):
                runs.append([""])
                break  # a class that is not plain characters may close anywhere
            runs[-1] = [text + c for text in runs[-1] for c in inner]
            index = close + 1
            continue
        else:
            runs[-1] = [text + character for text in runs[-1]]
        index += 1
    if plain and runs[0][0] == runs[0][0].strip():
        return [f"/{runs[0][0]}/"]
    return max(([text.strip() for text in run] for run in runs), key=lambda texts: min(map(len, texts)))


@dataclass(frozen=True)
class Unreadable:
    """A path the walk could not use: an unreadable directory, a symlink loop or a dangling
    link, a ``.py`` name on a FIFO or device. Reported, never skipped in silence."""

    path: str
    reason: str


def python_files(paths: Iterable[str], excluded: Callable[[str], bool] | None = None) -> Iterator[str]:
    """Files to check, in a stable order: given files as they are, directories walked for
    ``.py`` files and ``.ipynb`` notebooks."""
    return (item for item in walk(paths, excluded) if isinstance(item, str))


def walk(paths: Iterable[str], excluded: Callable[[str], bool] | None = None) -> Iterator[str | Unreadable]:
    """:func:`python_files`, with an :class:`Unreadable` in place of each path it could not use.
    A walk never leaves its directory through a symlink (to a directory or to a file), and
    yields each real file once.
    ``excluded(path)``: a file or directory found in a walk that is left out (with everything
    below it); a path given is never tested, as in ruff without ``--force-exclude``."""
    suffixes = (".py", ".ipynb")
    seen: set[str] = set()
    """Real paths already yielded: each file once, whatever links or paths name it."""
    real_path = RealPaths()
    for path in map(os.fspath, paths):
        if is_directory(path):
            try:
                top = resolve(path)
            except PathChangedError as exc:
                yield Unreadable(path, f"cannot read: {exc.why}")
                continue
            yield from _walk(path, top, [], suffixes, excluded or _nothing, _Tree(top, seen))
        elif (real := real_path(path)) not in seen:
            seen.add(real)
            yield path


@dataclass(frozen=True)
class _Tree:
    """A walk's top directory (resolved) and the real files it has yielded."""

    root: str
    seen: set[str]

    def admits(self, entry: os.DirEntry, real_directory: str) -> bool:
        """Whether to yield a file found in the walk (in the directory whose real path is
        ``real_directory``): a symlink only where it leads to a file inside the tree (never
        out of it), and each real file once."""
        link = entry.is_symlink()
        real = resolve(entry.path) if link else os.path.join(real_directory, entry.name)
        if real in self.seen:
            return False
        if link and not real.startswith(self.root.rstrip(os.sep) + os.sep):
            return False
        self.seen.add(real)
        return True


def _nothing(path: str) -> bool:
    return False


def _walk(
    directory: str,
    real_directory: str,
    rules: list,
    suffixes: tuple[str, ...],
    excluded: Callable[[str], bool],
    tree: _Tree,
) -> Iterator[str | Unreadable]:
    """The walk below ``directory``, whose real path is ``real_directory``: a directory the
    walk enters is never a symlink, so each one's real path is its parent's and its name."""
    gitignore = os.path.join(directory, ".gitignore")
    if os.path.isfile(gitignore):
        try:
            with open(gitignore, "rb") as handle:
                lines = handle.read().decode("utf-8", errors="replace").splitlines()
            rules = rules + [(directory, ignore_spec(lines))]
        except OSError:
            pass
    try:
        # links after files: a file and a link to it are reported by the file's own name
        entries = sorted(os.scandir(directory), key=lambda e: (e.is_symlink(), e.name))
    except OSError as exc:
        yield Unreadable(directory, f"cannot list directory: {exc.strerror or exc}")
        return
    for entry in entries:
        try:
            is_directory = entry.is_dir(follow_symlinks=False)
        except OSError:
            is_directory = False
        if is_directory and entry.name in SKIPPED_DIRECTORIES:
            continue
        if not is_directory and not entry.name.endswith(suffixes):
            continue
        if _ignored(entry.path, is_directory, rules) or excluded(
            ListedPath(entry.path, entry.is_symlink(), is_directory)
        ):
            continue
        if is_directory:
            yield from _walk(entry.path, os.path.join(real_directory, entry.name), rules, suffixes, excluded, tree)
            continue
        try:
            mode = entry.stat().st_mode  # follows a symlink: the file it names is what is read
        except OSError as exc:
            reason = (
                "symlink loop"
                if exc.errno == errno.ELOOP
                else (
                    "dangling symlink" if entry.is_symlink() and exc.errno == errno.ENOENT else exc.strerror or str(exc)
                )
            )
            yield Unreadable(entry.path, f"cannot read: {reason}")
            continue
        if stat.S_ISREG(mode):
            try:
                admitted = tree.admits(entry, real_directory)
            except PathChangedError as exc:
                yield Unreadable(entry.path, f"cannot read: {exc.why}")
                continue
            if admitted:
                yield ListedPath(entry.path, entry.is_symlink(), False)  # a later walk of it asks nothing
        elif not stat.S_ISDIR(mode):  # a symlink to a directory named *.py is not walked, as before
            yield Unreadable(entry.path, f"is {file_kind(mode)}, not a regular file: not read")


def _ignored(path: str, is_directory: bool, rules: list) -> bool:
    for base, spec in rules:
        # ``path`` is ``base`` joined with the names the walk listed below it (never empty,
        # ``.`` or ``..``): on POSIX, relpath's answer is what follows ``base``
        prefix = base if base.endswith(os.sep) else base + os.sep
        if os.altsep is None and path.startswith(prefix):
            relative = path[len(prefix) :]
        else:
            relative = os.path.relpath(path, base).replace(os.sep, "/")
        if spec.match_file(relative + "/" if is_directory else relative):
            return True
    return False
