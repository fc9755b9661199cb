"""``check --show-settings`` and ``check --show-files``: what ``check`` would use, as ruff
shows it, without checking anything."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import click


def show_settings(path: str, settings: Any) -> None:
    """The settings a file is checked with, in the spelling of ``[tool.offload-fixer]``."""
    click.echo(f'Resolved settings for: "{os.path.abspath(path)}"')
    source = f'"{settings.config_path}"' if settings.config_path else "none (the defaults and the flags)"
    click.echo(f"Settings path: {source}\n")
    for key, value in settings.as_table().items():
        click.echo(f"{key} = {_toml(key, value)}")


_UNSET = {"select": "every rule", "jax-version": "the installed JAX", "target-version": "any Python"}


def _toml(key: str, value: Any) -> str:
    if value is None:
        return f"# {_UNSET.get(key, 'not set')}"
    if key == "per-file-ignores":
        return "{" + ", ".join(f'"{glob}" = {_toml("", list(codes))}' for glob, codes in value) + "}"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(f'"{item}"' for item in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return str(value)


def show_files(files: Sequence[str]) -> None:
    """Every file ``check`` would read, absolute, sorted (ruff's ``--show-files``)."""
    for path in sorted(os.path.abspath(f) for f in files):
        click.echo(path)
