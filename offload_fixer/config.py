"""``[tool.offload-fixer]`` in ``pyproject.toml``, resolved like ruff's configuration.

Each checked file takes its settings from the nearest ``pyproject.toml`` above it that has an
``[tool.offload-fixer]`` table (nearest wins; tables are not merged), so a monorepo can give
each package its own target. Command-line flags override the file. Exclusion globs are
relative to the directory of the file that declared them.
"""

from __future__ import annotations

import dataclasses
import os
import stat
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from offload_fixer.exclusion import is_excluded
from offload_fixer.jax_compat import UnsupportedJaxVersion, check_modelled
from offload_fixer.model import FORMAT_ALIASES, FORMATS, STRATEGIES, TARGET_CHOICES, Diagnostic
from offload_fixer.source.decoding import file_kind, read_regular_file
from offload_fixer.source.real_paths import ListedPath, RealPaths, is_directory, real_path

TABLE = "offload-fixer"
DEFAULT_EXCLUDE: tuple[str, ...] = (
    ".bzr",
    ".direnv",
    ".eggs",
    ".git",
    ".hg",
    ".mypy_cache",
    ".nox",
    ".pytest_cache",
    ".ruff_cache",
    ".svn",
    ".tox",
    ".venv",
    "__pycache__",
    "__pypackages__",
    "_build",
    "build",
    "dist",
    "node_modules",
    "site-packages",
    "venv",
)


class ConfigError(ValueError):
    """A configuration file or value that cannot be used; the message names file and key."""


class UnmodelledJaxVersion(ConfigError):
    """A ``jax-version`` offload-fixer does not model (the CLI exits 6 for it, not 2)."""


@dataclass(frozen=True)
class Settings:
    target: str = "tpu"
    strategy: str = "auto"
    select: tuple[str, ...] | None = None
    """Codes or code prefixes to report; ``None`` reports every rule."""
    extend_select: tuple[str, ...] = ()
    """Reported besides ``select`` (every rule is, when ``select`` is not set)."""
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    jax_version: str | None = None
    """The JAX the checked code is written for; ``None`` means the installed one."""
    format: str = "text"
    per_file_ignores: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """(glob, codes) pairs: codes not reported in files the glob matches (``!glob``: files it
    does not match). Globs follow ``exclude``'s rules, relative to ``root``."""
    jobs: int = 0
    """Worker processes; 0 decides by how many files reach the parser (see ``static.api``)."""
    target_version: str | None = None
    """The Python the code is written for (``py312``): ``target-version``, else the lowest
    Python ``requires-python`` admits; ``None``: any (:mod:`offload_fixer.source.python_version`)."""
    root: Path | None = None
    """Directory exclusion globs are relative to: the config file's, or the working directory."""
    config_path: Path | None = None

    def with_overrides(self, **overrides: Any) -> Settings:
        """Apply command-line values; ``None`` means "not given" and keeps the file's value."""
        given = {key: value for key, value in overrides.items() if value is not None}
        unknown = set(given) - set(_KEY_FOR_FIELD)
        if unknown:
            raise TypeError(f"not a setting: {', '.join(sorted(unknown))}")
        raw = {_KEY_FOR_FIELD[key]: value for key, value in given.items()}
        if isinstance(raw.get("per-file-ignores"), tuple):  # already checked (``--config``)
            raw["per-file-ignores"] = {pattern: list(codes) for pattern, codes in raw["per-file-ignores"]}
        return dataclasses.replace(self, **_validate(raw, source="command line"))

    @property
    def python(self) -> tuple[int, int] | None:
        """:attr:`target_version` as ``(3, 12)``."""
        from offload_fixer.source.python_version import parse_target_version

        return parse_target_version(self.target_version) if self.target_version else None

    @property
    def selected(self) -> tuple[str, ...] | None:
        """``select`` and ``extend-select`` together; ``None``: every rule."""
        return None if self.select is None else (*self.select, *self.extend_select)

    def as_table(self) -> dict[str, Any]:
        """The settings as ``[tool.offload-fixer]`` spells them (``check --show-settings``)."""
        return {key: getattr(self, field) for field, key in _KEY_FOR_FIELD.items()}

    def is_selected(self, code: str) -> bool:
        return _is_selected(code, self.selected, self.ignore)

    def is_excluded(self, path: str | os.PathLike[str], real_path: Callable[[str], str] = real_path) -> bool:
        """``real_path``: how paths are resolved (a run's :class:`RealPaths`)."""
        return is_excluded(path, (*self.exclude, *self.extend_exclude), self.root or Path.cwd(), real_path)

    def ignored_in(self, path: str | os.PathLike[str]) -> tuple[str, ...]:
        """``ignore`` plus the ``per-file-ignores`` codes that apply to ``path``."""
        root = self.root or Path.cwd()
        extra: list[str] = []
        for pattern, codes in self.per_file_ignores:
            negated = pattern.startswith("!")
            if is_excluded(path, (pattern[1:] if negated else pattern,), root) != negated:
                extra.extend(codes)
        return (*self.ignore, *extra)

    def reportable(self, diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
        """The diagnostics ``select``, ``ignore`` and ``per-file-ignores`` let through."""
        select = None if self.selected is None else [s.upper() for s in self.selected]
        kept = []
        for d in diagnostics:
            path = _report_path(d)
            ignore = self.ignored_in(path) if path and self.per_file_ignores else self.ignore
            if _is_selected(d.code, select, [s.upper() for s in ignore]):
                kept.append(d)
        return kept


_FIELD_FOR_KEY = {
    "target": "target",
    "strategy": "strategy",
    "select": "select",
    "extend-select": "extend_select",
    "ignore": "ignore",
    "exclude": "exclude",
    "extend-exclude": "extend_exclude",
    "jax-version": "jax_version",
    "per-file-ignores": "per_file_ignores",
    "format": "format",
    "jobs": "jobs",
    "target-version": "target_version",
}
_KEY_FOR_FIELD = {field: key for key, field in _FIELD_FOR_KEY.items()}


def parse_setting_argument(text: str) -> dict[str, Any]:
    """``--config 'KEY = VALUE'`` (a line of TOML, as ruff takes it): the setting as a
    :meth:`Settings.with_overrides` value, checked as a file's would be."""
    tomllib = _toml()
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"--config {text!r}: not a TOML `KEY = VALUE` setting: {exc}") from exc
    unknown = [key for key in table if key not in _FIELD_FOR_KEY]
    if unknown:
        close = _close_matches(unknown[0], list(_FIELD_FOR_KEY), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(_FIELD_FOR_KEY)}"
        raise ConfigError(f"--config {text!r}: unknown key {unknown[0]!r}{hint}")
    return _validate(table, source="--config")


# ---------------------------------------------------------------------------------------
# Finding and reading configuration files
def find_config(start: str | os.PathLike[str]) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` with a ``[tool.offload-fixer]`` table."""
    path = _resolved(start)
    directory = path if path.is_dir() else path.parent
    for candidate_dir in (directory, *directory.parents):
        candidate = candidate_dir / "pyproject.toml"
        if _is_file(candidate) and _read_table(candidate) is not None:
            return candidate
    return None


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; False in a directory that cannot be entered (the walk
    reports that directory; its settings are those of the nearest readable table above). A
    FIFO or device (a link to ``/dev/zero``) is refused by its type, never read or skipped."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return stat.S_ISREG(mode)
    raise ConfigError(f"{path}: is {file_kind(mode)}, not a regular file: not read")


def load_settings(config_path: str | os.PathLike[str]) -> Settings:
    """Settings declared in one ``pyproject.toml`` (defaults where it says nothing)."""
    path = _resolved(config_path)
    table = _read_table(path)
    if table is None:
        raise ConfigError(f"{path}: no [tool.{TABLE}] table")
    unknown = [key for key in table if key not in _FIELD_FOR_KEY]
    if unknown:
        key = unknown[0]
        close = _close_matches(key, list(_FIELD_FOR_KEY), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(_FIELD_FOR_KEY)}"
        raise ConfigError(f"{path}: unknown key {key!r} in [tool.{TABLE}]{hint}")
    values = _validate(table, source=str(path))
    values.setdefault("target_version", _requires_python_target(path))
    return Settings(root=path.parent, config_path=path, **values)


def _toml() -> Any:
    """``tomllib`` (``tomli`` before Python 3.11), loaded where a setting or file is read: a run
    in a tree without ``pyproject.toml`` needs no TOML parser."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    return tomllib


def _close_matches(word: str, possibilities: list[str], n: int) -> list[str]:
    import difflib  # for a misspelt key: an error message

    return difflib.get_close_matches(word, possibilities, n=n)


def _requires_python_target(path: Path | None) -> str | None:
    """The ``target-version`` the ``[project] requires-python`` of a ``pyproject.toml`` implies."""
    from offload_fixer.source.python_version import from_requires_python

    if path is None:
        return None
    tomllib = _toml()
    try:
        project = tomllib.loads(read_regular_file(path).decode("utf-8")).get("project")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    spec = project.get("requires-python") if isinstance(project, dict) else None
    return from_requires_python(spec) if isinstance(spec, str) else None


_UNKNOWN: Any = object()


class SettingsResolver:
    """Settings for each checked path, from its nearest configuration; caches per directory.
    ``snapshot``: the tree is taken not to change while the resolver lives (one run of
    ``check``), so each directory's real path is resolved once (:class:`RealPaths`); a
    long-lived resolver (the language server's) resolves every path it is asked about."""

    def __init__(
        self,
        overrides: dict[str, Any] | None = None,
        config: str | os.PathLike[str] | None = None,
        snapshot: bool = False,
    ):
        self._overrides = overrides or {}
        self.real_path: Callable[[str], str] = RealPaths() if snapshot else real_path
        self._fixed = load_settings(config) if config is not None else None
        self._by_config: dict[Path | None, Settings] = {}
        self._config_for_dir: dict[Path, Path | None] = {}
        self._project_for_dir: dict[Path, Path | None] = {}
        self._by_directory: dict[str, Settings] = {}
        """A directory's real path -> the settings of the files in it."""
        self._by_path: dict[str, Settings] | None = {} if snapshot else None
        """A path as asked -> its settings (``snapshot``: a run asks of each file twice, when
        the walk tests it and when it is checked)."""

    def settings_for(self, path: str | os.PathLike[str]) -> Settings:
        """``config`` given to the constructor applies everywhere, as ruff's ``--config`` does."""
        if self._fixed is not None:
            return self._settled(self._fixed.config_path, lambda: self._fixed)
        path = os.fspath(path)
        if self._by_path is not None and path in self._by_path:
            return self._by_path[path]
        resolved = self.real_path(path)
        # a path the walk listed is no symlink or is asked as one: its listing says whether it is a directory
        directory = (
            resolved if is_directory(path if isinstance(path, ListedPath) else resolved) else os.path.dirname(resolved)
        )
        found = self._by_directory.get(directory)
        if found is None:
            found = self._by_directory[directory] = self._settings_in(Path(directory))
        if self._by_path is not None:
            self._by_path[path] = found
        return found

    def _settings_in(self, directory: Path) -> Settings:
        config_path = self._config_at(directory)
        if config_path is not None:
            return self._settled(config_path, lambda: load_settings(config_path))
        project = self._project_at(directory)  # without a table: its requires-python only
        return self._settled(
            project, lambda: Settings(root=Path.cwd(), target_version=_requires_python_target(project))
        )

    def is_excluded(self, path: str | os.PathLike[str]) -> bool:
        """Whether ``path``'s own settings exclude it (:meth:`Settings.is_excluded`)."""
        return self.settings_for(path).is_excluded(path, self.real_path)

    def _config_at(self, directory: Path) -> Path | None:
        """:func:`find_config` of ``directory``, each directory above it asked once per run (a
        tree's directories share the ``pyproject.toml`` at its root, which is read once)."""
        found = self._config_for_dir.get(directory, _UNKNOWN)
        if found is _UNKNOWN:
            candidate = directory / "pyproject.toml"
            if _is_file(candidate) and _read_table(candidate) is not None:
                found = candidate
            else:
                found = None if directory.parent == directory else self._config_at(directory.parent)
            self._config_for_dir[directory] = found
        return found

    def _project_at(self, directory: Path) -> Path | None:
        """The nearest ``pyproject.toml`` at or above ``directory`` (the project's, for
        ``requires-python`` where no table is found), each directory asked once per run."""
        found = self._project_for_dir.get(directory, _UNKNOWN)
        if found is _UNKNOWN:
            candidate = directory / "pyproject.toml"
            if _is_file(candidate):
                found = candidate
            else:
                found = None if directory.parent == directory else self._project_at(directory.parent)
            self._project_for_dir[directory] = found
        return found

    def _settled(self, key: Path | None, load: Any) -> Settings:
        if key not in self._by_config:
            self._by_config[key] = load().with_overrides(**self._overrides)
        return self._by_config[key]


def _resolved(path: str | os.PathLike[str]) -> Path:
    """The absolute path with symlinks followed where they lead somewhere; a symlink loop is
    kept as written (``Path.resolve`` raises ``RuntimeError`` on one before Python 3.13)."""
    return Path(real_path(path))


def _read_table(path: Path) -> dict[str, Any] | None:
    tomllib = _toml()
    try:
        document = tomllib.loads(read_regular_file(path).decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text, so not TOML (byte {exc.start}: {exc.reason})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except RecursionError as exc:  # tomllib parses nested arrays and tables by recursion
        raise ConfigError(f"{path}: nested too deeply to read as TOML") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    tool = document.get("tool", {})
    if not isinstance(tool, dict):
        return None
    if TABLE not in tool and "offload_fixer" in tool:
        raise ConfigError(f"{path}: the table is spelled [tool.{TABLE}], not [tool.offload_fixer]")
    table = tool.get(TABLE)
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.{TABLE}] must be a table")
    return table


# ---------------------------------------------------------------------------------------
# Validation
_T = TypeVar("_T")


def _validate(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """Check values by their file key, returning dataclass field values."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        where = f"{source}: {key}"
        if key in ("target", "strategy", "format"):
            choices = {"target": TARGET_CHOICES, "strategy": STRATEGIES, "format": (*FORMATS, *FORMAT_ALIASES)}[key]
            chosen = _choice(value, choices, where)
            out[_FIELD_FOR_KEY[key]] = FORMAT_ALIASES.get(chosen, chosen) if key == "format" else chosen
        elif key in ("select", "extend-select", "ignore"):
            out[_FIELD_FOR_KEY[key]] = tuple(_selector(code, where) for code in _strings(value, where))
        elif key in ("exclude", "extend-exclude"):
            out[_FIELD_FOR_KEY[key]] = tuple(_strings(value, where))
        elif key == "jax-version":
            if not isinstance(value, str):
                raise ConfigError(f'{where}: expected a version string such as "0.4.35", got {value!r}')
            try:
                check_modelled(value)
            except UnsupportedJaxVersion as exc:
                raise UnmodelledJaxVersion(f"{where}: {exc}") from exc
            out["jax_version"] = value
        elif key == "per-file-ignores":
            if not isinstance(value, dict):
                raise ConfigError(f'{where}: expected a table of glob = ["CODE", ...], got {value!r}')
            out["per_file_ignores"] = tuple(
                (
                    pattern,
                    tuple(_selector(code, f"{where}.{pattern!r}") for code in _strings(codes, f"{where}.{pattern!r}")),
                )
                for pattern, codes in value.items()
            )
        elif key == "target-version":
            from offload_fixer.source.python_version import parse_target_version

            try:
                parse_target_version(value)
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"{where}: {exc}") from exc
            out["target_version"] = value
        elif key == "jobs":
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(
                    f"{where}: expected a whole number >= 0 (0 = decided by the number of files to parse), got {value!r}"
                )
            out["jobs"] = value
        else:
            raise ConfigError(f"{where}: unknown setting")
    return out


def _choice(value: Any, choices: Sequence[_T], where: str) -> _T:
    if value not in choices:
        raise ConfigError(f"{where}: expected one of {', '.join(map(repr, choices))}, got {value!r}")
    return value


def _strings(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
    return list(value)


def _selector(text: str, where: str) -> str:
    """A code (``OFL1200``), a prefix of codes (``OFL120``), or ``ALL``."""
    from offload_fixer.codes import SELECTABLE_CODES

    selector = text.strip().upper()
    codes = list(SELECTABLE_CODES)
    if selector == "ALL" or any(code.startswith(selector) for code in codes):
        return selector
    close = _close_matches(selector, codes, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"{where}: {text!r} selects no rule (codes are {codes[0]}..{codes[-1]}){hint}")


# ---------------------------------------------------------------------------------------
# Selecting codes (excluding paths: :mod:`offload_fixer.exclusion`)
def _is_selected(code: str, select: Sequence[str] | None, ignore: Sequence[str]) -> bool:
    """Ruff's rule: the most specific matching selector wins; on a tie, ``ignore`` wins."""

    def specificity(selectors: Iterable[str]) -> int:
        best = -1
        for selector in selectors:
            if selector == "ALL":
                best = max(best, 0)
            elif code.startswith(selector):
                best = max(best, len(selector))
        return best

    selected = 0 if select is None else specificity(select)
    return selected >= 0 and selected > specificity(ignore)


def select_codes(
    diagnostics: Iterable[Diagnostic], select: Sequence[str] | None = None, ignore: Sequence[str] = ()
) -> list[Diagnostic]:
    """Keep the diagnostics whose code ``select`` (``None`` = all) picks and ``ignore`` does not."""
    select = None if select is None else [s.upper() for s in select]
    ignore = [s.upper() for s in ignore]
    return [d for d in diagnostics if _is_selected(d.code, select, ignore)]


def _report_path(diagnostic: Diagnostic) -> str | None:
    span = diagnostic.location
    if span is None and diagnostic.function is not None:
        return diagnostic.function.path
    return span.path if span is not None else None
