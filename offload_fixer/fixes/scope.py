"""Where a fix may write: Python files (and notebooks) inside the project, or the files the
user named on the command line. A report file is something people share (a CI artefact, an
attachment), and a tree can hold symlinks to anywhere, so the paths a finding names are never
trusted as they are: each is resolved (symlinks followed) before it is compared."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field

from offload_fixer.resolved_paths import PathChangedError, resolve

PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")
"""The files a fix may rewrite; a script with a ``#!`` python line only when it is named."""
PROJECT_MARKERS = ("pyproject.toml", ".git")


def project_root(start: str) -> str:
    """The nearest directory at or above ``start`` holding a ``pyproject.toml`` or a ``.git``;
    ``start`` itself when none does."""
    directory = resolve(start)
    if not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    candidate = directory
    while True:
        if any(os.path.lexists(os.path.join(candidate, marker)) for marker in PROJECT_MARKERS):
            return candidate
        parent = os.path.dirname(candidate)
        if parent == candidate:
            return directory
        candidate = parent


@dataclass(frozen=True)
class WriteScope:
    """The directories a fix may write below and the files it may write wherever they are."""

    roots: tuple[str, ...]
    named: frozenset[str] = frozenset()
    checked: dict[str, str] = field(default_factory=dict, compare=False)
    """Each path judged, with where it led then: a write compares its own resolution with it."""

    @classmethod
    def of(cls, roots: Iterable[str], named: Iterable[str] = ()) -> WriteScope:
        return cls(
            tuple(dict.fromkeys(resolve(r) for r in roots)),
            frozenset(resolve(p) for p in named),
        )

    def refusal(self, path: str, real: str | None = None) -> str | None:
        """Why a fix may not write ``path`` (``None`` where it may), judged by ``real``, its
        resolution (symlinks followed; resolved now when not given). A path judged before
        that resolves elsewhere now is refused: it changed between the check and the write."""
        if real is None:
            try:
                real = resolve(path)
            except PathChangedError as exc:
                return exc.why
        earlier = self.checked.setdefault(path, real)
        if earlier != real:
            return f"now leads to {real}, not to {earlier} as when it was checked"
        if real in self.named:
            return None
        if not real.endswith(PYTHON_SUFFIXES):
            return "not a Python file or notebook, and not named on the command line"
        if not any(real == root or real.startswith(root.rstrip(os.sep) + os.sep) for root in self.roots):
            where = f" (a symlink to {real})" if real != os.path.abspath(path) else ""
            return f"outside the project {' or '.join(self.roots)}{where}, and not named on the command line"
        return None
