"""The command line's options, declared once (:data:`OPTIONS`), and what one invocation was
told: its settings, its console, its outcome."""

from __future__ import annotations

import dataclasses
import os
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import click

from offload_fixer.console import COLOR_CHOICES, color_enabled
from offload_fixer.exit_codes import ExitCode
from offload_fixer.model import FORMATS, TARGET_CHOICES, Diagnostic

MACHINE_FORMATS = ("json", "sarif", "github")
STRATEGIES = ("auto", "device", "host")
PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")
"""What ``check`` takes when a file is named (a notebook needs the ``notebook`` extra)."""


# ---------------------------------------------------------------------------------------
# Options: declared once, named by the commands that take them
def _non_empty_codes(ctx: click.Context, param: click.Parameter, value: str | None) -> list[str] | None:
    if value is None:
        return None
    codes = [c.strip() for c in value.split(",") if c.strip()]
    if not codes:
        raise click.BadParameter("names no code (give codes or prefixes such as OFL1200,OFL12)")
    return codes


OPTIONS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "target": click.option(
        "--target", type=click.Choice(TARGET_CHOICES), default=None, help="Accelerator to predict for [default: tpu]."
    ),
    "format": click.option(
        "--format",
        "--output-format",
        "fmt",
        type=click.Choice(FORMATS),
        default=None,
        help="Output format [default: text]; concise is one line per finding.",
    ),
    "output_file": click.option(
        "-o",
        "--output-file",
        type=click.Path(dir_okay=False),
        default=None,
        help="Write the report to this file instead of stdout.",
    ),
    "select": click.option(
        "--select",
        default=None,
        callback=_non_empty_codes,
        help="Comma-separated codes or prefixes to report (e.g. OFL1200,OFL12).",
    ),
    "ignore": click.option(
        "--ignore", default=None, callback=_non_empty_codes, help="Comma-separated codes or prefixes to leave out."
    ),
    "exit_zero": click.option("--exit-zero", is_flag=True, help="Exit 0 even when problems are found."),
    "quiet": click.option(
        "-q", "--quiet", is_flag=True, help="Print the findings only: no summary, notes or progress."
    ),
    "verbose": click.option(
        "-v", "--verbose", is_flag=True, help="Also print notes (info), whole traces and tool warnings."
    ),
    "config": click.option(
        "--config",
        type=click.Path(exists=True, dir_okay=False),
        default=None,
        help="A pyproject.toml to use instead of the nearest one.",
    ),
    "color": click.option(
        "--color",
        type=click.Choice(COLOR_CHOICES),
        default="auto",
        show_default=True,
        help="Colour the output; auto follows NO_COLOR, FORCE_COLOR and the terminal.",
    ),
    "statistics": click.option(
        "--statistics", is_flag=True, help="Count the findings per code instead of listing them."
    ),
    "show_fixes": click.option(
        "--show-fixes",
        is_flag=True,
        help="With --fix, list what was fixed; without, print the fixes --fix would write.",
    ),
    "fix": click.option("--fix", is_flag=True, help="Write the safe fixes, then report what is left."),
    "diff": click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing."),
    "strategy": click.option(
        "--strategy",
        type=click.Choice(STRATEGIES),
        default=None,
        help="device: move back to device; host: declare host outputs; auto: per origin [default: auto].",
    ),
    "unsafe_fixes": click.option("--unsafe-fixes", is_flag=True, help="Also apply fixes labelled unsafe."),
    "jax_version": click.option(
        "--jax-version", default=None, help="Apply the rules of this JAX version [default: installed]."
    ),
    "jobs": click.option(
        "-j",
        "--jobs",
        type=click.IntRange(min=0),
        default=None,
        help="At most this many processes [default: a pool only for enough source to pay for it].",
    ),
    "exclude": click.option(
        "--exclude", multiple=True, help="Glob of paths to skip, replacing the configured `exclude` (repeatable)."
    ),
    "extend_exclude": click.option(
        "--extend-exclude", multiple=True, help="Glob of paths to skip, added to `exclude` (repeatable)."
    ),
    "force_exclude": click.option(
        "--force-exclude", is_flag=True, help="Apply `exclude` to files named on the command line too (pre-commit)."
    ),
    "confirm": click.option(
        "--confirm",
        is_flag=True,
        help="Also compile with the target's released compiler (libtpu, JAX's CUDA plugin) and say "
        "whether it agrees; with --fix/--diff, only fixes that compile.",
    ),
    "stdin_filename": click.option(
        "--stdin-filename",
        default=None,
        help="The file name of source read from stdin (`-`), for settings and messages.",
    ),
}
REPORT_OPTIONS = (
    "target",
    "format",
    "output_file",
    "select",
    "ignore",
    "exit_zero",
    "quiet",
    "verbose",
    "config",
    "color",
    "statistics",
    "show_fixes",
)
FIX_OPTIONS = ("fix", "diff", "strategy", "unsafe_fixes")


def options(*names: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Attach the named :data:`OPTIONS`, in that order in ``--help``."""

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        for name in reversed(names):
            func = OPTIONS[name](func)
        return func

    return decorate


@dataclass
class Invocation:
    """What the shared options of one command say (``None``: not given)."""

    target: str | None = None
    fmt: str | None = None
    output_file: str | None = None
    select: list[str] | None = None
    ignore: list[str] | None = None
    exit_zero: bool = False
    quiet: bool = False
    verbose: bool = False
    config: str | None = None
    color: str = "auto"
    statistics: bool = False
    show_fixes: bool = False
    fix: bool = False
    diff: bool = False
    strategy: str | None = None
    unsafe_fixes: bool = False
    jax_version: str | None = None
    confirm: bool = False

    @classmethod
    def take(cls, params: dict[str, Any]) -> Invocation:
        """Pop the shared options out of a command's parameters."""
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{name: params.pop(name) for name in list(params) if name in names})

    @property
    def write(self) -> bool:
        return self.fix and not self.diff


class Console:
    """Where the report goes (stdout, or ``-o FILE``) and the tool's own messages (stderr)."""

    def __init__(self, invocation: Invocation, report_to_stderr: bool = False) -> None:
        self.output_file = invocation.output_file
        self.quiet = invocation.quiet
        self.report_to_stderr = report_to_stderr
        """``check --fix -``: stdout carries the fixed source, so the report goes to stderr."""
        self.color_err = color_enabled(invocation.color, sys.stderr)
        self.color_out = (
            False
            if self.output_file
            else (self.color_err if report_to_stderr else color_enabled(invocation.color, sys.stdout))
        )
        self._report: list[str] = []

    def report(self, text: str) -> None:
        """Part of the report: stdout, or the output file (written once, at the end)."""
        if self.output_file:
            self._report.append(text)
        elif text:
            click.echo(text, nl=False, err=self.report_to_stderr, color=self.color_out)

    def note(self, text: str, always: bool = False) -> None:
        if always or not self.quiet:
            click.echo(text, err=True, color=self.color_err)

    def styled_error(self, text: str) -> str:
        return click.style(text, fg="red") if self.color_err else text

    def flush(self) -> None:
        """Write the output file in one rename, so a reader never sees half a report."""
        if not self.output_file:
            return
        path = os.path.abspath(self.output_file)
        try:
            handle, temporary = tempfile.mkstemp(prefix=".offload-fixer-", dir=os.path.dirname(path))
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write("".join(self._report))
            os.replace(temporary, path)
        except OSError as exc:
            fail(ExitCode.USAGE, f"cannot write the report to {self.output_file}: {exc.strerror or exc}", self)


def fail(code: ExitCode, message: str, console: Console | None = None) -> NoReturn:
    text = f"offload-fixer: error: {message}"
    click.echo(console.styled_error(text) if console else text, err=True, color=console.color_err if console else None)
    sys.exit(int(code))


@dataclass
class Outcome:
    """What a command found, for rendering and the exit code."""

    diagnostics: list[Diagnostic] = field(default_factory=list)
    file_errors: list[Any] = field(default_factory=list)
    unused_suppressions: list[Any] = field(default_factory=list)
    checked: str | None = None
    """What was checked, in words, for the summary of a clean run."""
    fixed: int | None = None
    complete: bool = True
    failure: ExitCode | None = None
    """Program failed (3) or fix refused (5): exits with it whatever was found."""
    pending: bool = False
    """``--diff`` has changes to show."""
    notes: list[str] = field(default_factory=list)
    """Said before the report: files not checked and why (a notebook of another language)."""
