"""The fixed files imported as fresh modules, so a fix can be lowered before it is written: a
lone file written beside the original, a package's file from a temporary copy of the package
with every fixed file overlaid (relative imports then resolve inside the copy); never as
``__main__``, so a script's ``main()`` does not run, and never a file whose import would do
more than define things when the caller requires that (:func:`import_safe`)."""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

_names = itertools.count()


class Unverifiable(Exception):
    """Why a fix cannot be lowered before it is written (said as ``not verified: ...``)."""


def package_root(path: str) -> str | None:
    """The outermost regular package (a folder with ``__init__.py``) holding ``path``."""
    root = None
    folder = os.path.dirname(os.path.abspath(path))
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        root = folder
        folder = os.path.dirname(folder)
    return root


@contextmanager
def fixed_modules(texts: Mapping[str, str], require_safe: bool = False) -> Iterator[Callable[[str], Any]]:
    """``load(path)``: the module of ``path`` as the fixed ``texts`` have it, imported fresh
    under a name of its own, never touching the user's files. A file of a package is imported
    from a temporary copy of the package's ``.py`` files with every fixed file overlaid, the
    copy under a unique package name, so that relative imports (``from . import optim``)
    resolve inside the copy; a lone file is written beside the original (its imports and
    relative paths resolve as the original's do). Everything is removed again on exit.
    ``load`` raises :class:`Unverifiable` where the import fails (or, ``require_safe``,
    would run the program)."""
    texts = {os.path.abspath(p): t for p, t in texts.items()}
    cleanup: list[Callable[[], object]] = []
    copies: dict[str, tuple[str, str]] = {}
    """package root: (the name its copy is imported under, the copy's folder)"""

    def load(path: str) -> Any:
        path = os.path.abspath(path)
        if path in texts:
            text = texts[path]
        else:
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
            except OSError as exc:
                raise Unverifiable(f"{os.path.basename(path)} cannot be read: {exc}") from None
        if require_safe and not import_safe(text):
            raise Unverifiable(f"importing {os.path.basename(path)} would run the program (statements at module level)")
        root = package_root(path)
        try:
            if root is None:
                return _import_lone(path, text, cleanup)
            if root not in copies:
                copies[root] = _copy_package(root, texts, cleanup)
                if require_safe:  # its modules import one another: any of them may run
                    _refuse_unsafe(copies[root][1], path, root)
            name = copies[root][0]
            relative = os.path.relpath(path, root)[: -len(".py")].replace(os.sep, ".")
            dotted = name if relative == "__init__" else f"{name}.{relative.removesuffix('.__init__')}"
            return importlib.import_module(dotted)
        except Unverifiable:
            raise
        except BaseException as exc:  # noqa: BLE001 - the user's module may fail (or exit) on import
            raise Unverifiable(
                f"the fixed {os.path.basename(path)} could not be imported: {type(exc).__name__}: {exc}"
            ) from None

    try:
        yield load
    finally:
        for undo in reversed(cleanup):
            undo()


def _import_lone(path: str, text: str, cleanup: list[Callable[[], object]]) -> Any:
    """The fixed ``text`` imported from a temporary file beside ``path`` (its imports resolve as
    the file's do), created through the directory ``path`` resolves to now: never through a
    symlink swapped in since (:mod:`offload_fixer.resolved_paths`)."""
    from offload_fixer.resolved_paths import Directory, resolve

    directory = resolve(os.path.dirname(os.path.abspath(path)))
    with Directory(directory) as folder:
        handle, created = folder.create(".offload-fixer-confirm-", suffix=".py")
    temporary = os.path.join(directory, created)
    name = f"_offload_fixer_fixed_{next(_names)}"
    cleanup.append(lambda: _remove(temporary))
    cleanup.append(lambda: sys.modules.pop(name, None))
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        out.write(text)
    return import_file(name, temporary, directory)


def _copy_package(root: str, texts: Mapping[str, str], cleanup: list[Callable[[], object]]) -> tuple[str, str]:
    """The package's ``.py`` files copied under a unique name into a temporary folder put
    first on ``sys.path``, the fixed ``texts`` of its files written over them."""
    parent = tempfile.mkdtemp(prefix="offload-fixer-confirm-")
    cleanup.append(lambda: shutil.rmtree(parent, ignore_errors=True))
    name = f"_offload_fixer_fixed_{next(_names)}"
    copy = os.path.join(parent, name)

    def ignored(folder: str, names: list[str]) -> list[str]:
        return [
            n
            for n in names
            if n == "__pycache__" or (not n.endswith(".py") and not os.path.isdir(os.path.join(folder, n)))
        ]

    shutil.copytree(root, copy, ignore=ignored)
    for path, text in texts.items():
        if path.startswith(root + os.sep):
            with open(os.path.join(copy, os.path.relpath(path, root)), "w", encoding="utf-8") as out:
                out.write(text)
    sys.path.insert(0, parent)
    cleanup.append(lambda: sys.path.remove(parent) if parent in sys.path else None)
    cleanup.append(lambda: [sys.modules.pop(m) for m in [m for m in sys.modules if m.split(".")[0] == name]])
    return name, copy


def _refuse_unsafe(copy: str, loaded: str, root: str) -> None:
    """:class:`Unverifiable` where a module of the package copy (its ``__main__.py`` only when
    that is the one loaded) would run the program on import."""
    for folder, _, names in os.walk(copy):
        for name in sorted(names):
            if not name.endswith(".py"):
                continue
            file = os.path.join(folder, name)
            original = os.path.join(root, os.path.relpath(file, copy))
            if name == "__main__.py" and original != loaded:
                continue
            with open(file, encoding="utf-8") as handle:
                if not import_safe(handle.read()):
                    raise Unverifiable(
                        f"importing {os.path.relpath(original, os.path.dirname(root))} would run the program "
                        "(statements at module level)"
                    )


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def import_safe(text: str) -> bool:
    """Whether importing ``text`` only defines things: imports, definitions, assignments and an
    ``if __name__ == "__main__":`` block, so lowering a fix by importing the fixed file does not
    run the user's program again (a script that trains at module level is not imported)."""
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test):
            continue
        return False
    return True


def import_file(name: str, path: str, directory: str) -> Any:
    """Execute the file at ``path`` as module ``name``, with ``directory`` on ``sys.path``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    added = directory not in sys.path
    if added:
        sys.path.insert(0, directory)
    try:
        spec.loader.exec_module(module)
    finally:
        if added:
            sys.path.remove(directory)
    return module
