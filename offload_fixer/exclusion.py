"""The ``exclude`` engine: whether a path (or a directory above it) matches an exclusion glob,
for ``check``'s walk, ``run``, ``fix`` and the language server alike."""

from __future__ import annotations

import fnmatch
import functools
import os
import re
from collections.abc import Callable, Sequence

from offload_fixer.source.real_paths import real_path as resolved_path
from offload_fixer.source.real_paths import relative_parts


def is_excluded(
    path: str | os.PathLike[str],
    patterns: Sequence[str],
    root: str | os.PathLike[str],
    real_path: Callable[[str], str] = resolved_path,
) -> bool:
    """Whether ``path`` or any directory above it (up to ``root``) matches an exclusion glob.

    As in ruff: a pattern without ``/`` (``build``, ``*_pb2.py``) matches a file or directory
    name anywhere; a pattern with ``/`` (``src/gen/*.py``) matches the path relative to
    ``root``. Both are taken with symlinks followed, by ``real_path`` (a run's
    :class:`RealPaths`, which resolves each directory once).
    """
    parts = relative_parts(real_path(os.fspath(path)), real_path(os.fspath(root)))
    if not parts:
        return False
    patterns = tuple(patterns)
    return _excluded_below(patterns, parts[:-1]) or _matches(patterns, parts)


@functools.lru_cache(maxsize=1024)
def _excluded_below(patterns: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether a directory (``parts`` below the root) or one above it matches: asked once per
    directory of a walk, not once for each of its files."""
    return bool(parts) and (_excluded_below(patterns, parts[:-1]) or _matches(patterns, parts))


def _matches(patterns: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether the last of ``parts`` matches a pattern without ``/``, or the path they spell a
    pattern with one."""
    names, paths = _patterns(patterns)
    return (names is not None and names.match(parts[-1]) is not None) or (
        paths is not None and paths.match("/".join(parts)) is not None
    )


@functools.lru_cache(maxsize=64)
def _patterns(patterns: tuple[str, ...]) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
    """The patterns without ``/`` (matched against each name) and those with one (against
    each path relative to the root), as :func:`is_excluded` reads them: each kind one regular
    expression, the alternatives of the globs as ``fnmatch.fnmatchcase`` spells each (a tree's
    every file and directory is matched against every pattern, so in one match, not twenty)."""
    stripped = [pattern.rstrip("/") for pattern in patterns]
    names = [pattern for pattern in stripped if "/" not in pattern]
    paths = [pattern.removeprefix("./") for pattern in stripped if "/" in pattern]
    return _any_of(names), _any_of(paths)


def _any_of(globs: Sequence[str]) -> re.Pattern[str] | None:
    """One expression that matches what any of ``globs`` matches (None: no glob)."""
    return re.compile("|".join(f"(?:{fnmatch.translate(glob)})" for glob in globs)) if globs else None
