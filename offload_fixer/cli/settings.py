"""Settings and selection: each file's ``[tool.offload-fixer]`` table, the JAX version,
which findings are reported (select, ignore, exclude, suppressions)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from offload_fixer.cli.options import Console, Invocation, fail
from offload_fixer.exit_codes import ExitCode
from offload_fixer.model import Diagnostic


# ---------------------------------------------------------------------------------------
# Settings and selection
def resolve_settings(invocation: Invocation, start: str, console: Console, snapshot: bool = False, **overrides: Any):
    """The resolver of each file's settings, and the settings of ``start``. ``snapshot``: the
    tree is taken not to change while the resolver lives (one run, not ``--watch``)."""
    from offload_fixer.cli.options import is_setting_argument
    from offload_fixer.config import SettingsResolver, parse_setting_argument

    given = dict(
        target=invocation.target,
        strategy=invocation.strategy,
        jax_version=invocation.jax_version,
        select=invocation.select,
        extend_select=invocation.extend_select,
        ignore=invocation.ignore,
        **overrides,
    )
    if invocation.jax_version is not None:
        check_jax_version(invocation.jax_version, console)
    with config_errors(console):
        # ``--config KEY=VALUE`` over every file's table, the dedicated flags over those
        settings: dict[str, Any] = {}
        for argument in filter(is_setting_argument, invocation.config):
            settings.update(parse_setting_argument(argument))
        settings.update({k: v for k, v in given.items() if v is not None})
        config_file = next((c for c in invocation.config if not is_setting_argument(c)), None)
        resolver = CheckedResolver(SettingsResolver(overrides=settings, config=config_file, snapshot=snapshot), console)
    return resolver, resolver.settings_for(start)


@contextlib.contextmanager
def config_errors(console: Console) -> Iterator[None]:
    """A configuration that cannot be used exits 2; a JAX version offload-fixer does not model
    exits 6, whether from the flag or from a ``pyproject.toml``."""
    try:
        yield
    except Exception as exc:
        _config_error(exc, console)
        raise


class CheckedResolver:
    """Each file's settings (its nearest ``[tool.offload-fixer]`` table, read when first asked
    for), a table that cannot be used exiting as :func:`config_errors` says."""

    def __init__(self, resolver: Any, console: Console) -> None:
        self.resolver = resolver
        self.console = console

    def settings_for(self, path: str):
        try:  # not config_errors(): asked for every file and directory of a tree
            return self.resolver.settings_for(path)
        except Exception as exc:
            _config_error(exc, self.console)
            raise

    def is_excluded(self, path: str) -> bool:
        """Whether ``path``'s own settings exclude it."""
        try:
            return self.resolver.is_excluded(path)
        except Exception as exc:
            _config_error(exc, self.console)
            raise


def _config_error(exc: Exception, console: Console) -> None:
    """Exit as :func:`config_errors` does for a configuration error; return for any other."""
    from offload_fixer.config import ConfigError, UnmodelledJaxVersion

    if isinstance(exc, UnmodelledJaxVersion):
        fail(ExitCode.UNSUPPORTED_JAX, str(exc), console)
    if isinstance(exc, ConfigError):
        fail(ExitCode.USAGE, str(exc), console)


def check_jax_version(text: str, console: Console) -> None:
    from offload_fixer import jax_compat

    try:
        jax_compat.check_modelled(text)
    except jax_compat.UnsupportedJaxVersion as exc:
        fail(ExitCode.UNSUPPORTED_JAX, str(exc), console)


def reportable(
    diagnostics: Sequence[Diagnostic],
    resolver,
    sources: dict[str, str] | None = None,
    texts: dict[str, bytes] | None = None,
):
    """(selected by each file's settings and not suppressed, unused suppressions): what is
    reported is exactly what gets fixed. ``texts``: files as fixed in memory, whose comments
    suppress instead of the files'."""
    from offload_fixer.suppression import filter_suppressed

    selected = []
    for d in diagnostics:
        selected.extend(_settings_of(d, resolver).reportable([d]))
    kept, _suppressed, unused = filter_suppressed(
        selected, sources if sources is not None else _sources_for(selected, texts or {})
    )
    return list(kept), list(unused)


def _settings_of(d: Diagnostic, resolver):
    from offload_fixer.report import primary_span

    span = primary_span(d)
    return resolver.settings_for(span.path if span and span.path and os.path.exists(span.path) else ".")


def without_excluded(diagnostics: Sequence[Diagnostic], resolver, console: Console) -> list[Diagnostic]:
    """The findings of ``run`` and ``fix`` outside the files ``exclude`` leaves out (each file
    by its own settings: the engine ``check``'s walk and the language server use); the
    others are counted in a note, never dropped in silence."""
    from offload_fixer.report import primary_span

    kept, excluded = [], set()
    for d in diagnostics:
        span = primary_span(d)
        if span and span.path and os.path.exists(span.path) and _settings_of(d, resolver).is_excluded(span.path):
            excluded.add(span.path)
        else:
            kept.append(d)
    if excluded:
        count = len(diagnostics) - len(kept)
        console.note(
            f"offload-fixer: {count} finding{'s' if count != 1 else ''} in {len(excluded)} excluded "
            f"file{'s' if len(excluded) != 1 else ''} not shown and not fixed (`exclude`)"
        )
    return kept


def _sources_for(diagnostics: Iterable[Diagnostic], texts: dict[str, bytes]) -> dict[str, str]:
    """Source text of every file a diagnostic points into (suppression comments live there;
    a notebook's is its code cells as one program, whose lines the diagnostics count)."""
    sources = {path: data.decode("utf-8", "replace") for path, data in texts.items()}
    if not diagnostics:
        return sources  # nothing to read (nor the notebook reader to load)
    from offload_fixer.notebook import NotebookError, read_program_bytes

    for d in diagnostics:
        for span in (d.span, d.origin.span if d.origin else None, d.return_span):
            if span and span.path not in sources and os.path.isfile(span.path):
                try:
                    sources[span.path] = read_program_bytes(span.path).decode("utf-8")
                except (OSError, UnicodeDecodeError, NotebookError):
                    continue
    return sources
