"""The command line's options, declared once (:data:`OPTIONS`), and what one invocation was
told: its settings, its console, its outcome."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import click

from offload_fixer.console import COLOR_CHOICES, color_enabled
from offload_fixer.exit_codes import ExitCode
from offload_fixer.model import FORMAT_ALIASES, FORMATS, STRATEGIES, TARGET_CHOICES, Diagnostic
from offload_fixer.source.python_version import TARGET_VERSIONS

MACHINE_FORMATS = ("json", "sarif", "github")
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


def _config_arguments(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[str, ...]:
    """``--config``: a file, or ``KEY = VALUE`` in TOML (ruff's two forms); one file at most."""
    files = [value for value in values if not is_setting_argument(value)]
    for value in files:
        if not os.path.isfile(value) and os.path.exists(value):
            if os.path.isdir(value):
                raise click.BadParameter(f"{value!r} is a directory; give a pyproject.toml or KEY = VALUE")
        elif not os.path.exists(value):
            raise click.BadParameter(f"{value!r}: no such file, and not a KEY = VALUE setting")
    if len(files) > 1:
        raise click.BadParameter("names more than one configuration file")
    return values


def is_setting_argument(value: str) -> bool:
    """``--config 'target = "gpu"'`` rather than ``--config path/pyproject.toml``."""
    return "=" in value and not os.path.exists(value)


OPTIONS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "target": click.option(
        "--target", type=click.Choice(TARGET_CHOICES), default=None, help="Accelerator to predict for [default: tpu]."
    ),
    "format": click.option(
        "--format",
        "--output-format",
        "fmt",
        type=click.Choice((*FORMATS, *FORMAT_ALIASES)),
        default=None,
        callback=lambda ctx, param, value: FORMAT_ALIASES.get(value, value),
        help="Output format [default: text, or full as ruff calls it]; concise is one line per finding.",
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
        multiple=True,
        callback=_config_arguments,
        metavar="FILE|KEY=VALUE",
        help="A pyproject.toml to use instead of the nearest one, or a setting as TOML "
        "(`--config 'target = \"gpu\"'`) over every file's (repeatable).",
    ),
    "target_version": click.option(
        "--target-version",
        type=click.Choice(TARGET_VERSIONS),
        default=None,
        help="The Python the code is written for [default: from requires-python; else any].",
    ),
    "extend_select": click.option(
        "--extend-select",
        default=None,
        callback=_non_empty_codes,
        help="Comma-separated codes or prefixes to report besides `select`.",
    ),
    "show_settings": click.option(
        "--show-settings", is_flag=True, help="Print the settings the first path is checked with, and exit."
    ),
    "show_files": click.option("--show-files", is_flag=True, help="Print the files that would be checked, and exit."),
    "add_noqa": click.option(
        "--add-noqa", is_flag=True, help="Add a `# noqa: OFL…` on each line a finding points at (ruff's spelling)."
    ),
    "watch": click.option("-w", "--watch", is_flag=True, help="Check again whenever a checked file changes."),
    "silent": click.option(
        "-s",
        "--silent",
        is_flag=True,
        help="Print no findings, summary or notes, only errors (the exit status says what was found).",
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
    "fix": click.option(
        "--fix/--no-fix",
        default=False,
        help="Write the safe fixes, then report what is left (--no-fix: do not, whatever came before).",
    ),
    "fix_only": click.option(
        "--fix-only/--no-fix-only",
        default=False,
        help="Write the safe fixes and say only what was fixed: what is left is neither reported nor "
        "counted in the exit status (implies --fix).",
    ),
    "exit_non_zero_on_fix": click.option(
        "--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when a fix was written, even if nothing is left."
    ),
    "diff": click.option("--diff", is_flag=True, help="Print the fixes as a unified diff; write nothing."),
    "strategy": click.option(
        "--strategy",
        type=click.Choice(STRATEGIES),
        default=None,
        help=(
            "device: move back to device; host: declare host outputs; auto: per origin; "
            "workaround: auto, and edit around known compiler bugs too [default: auto]."
        ),
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
    "no_cache": click.option(
        "-n",
        "--no-cache",
        is_flag=True,
        envvar="OFFLOAD_FIXER_NO_CACHE",
        help="Neither read nor write the results kept in .offload-fixer-cache/ [env: OFFLOAD_FIXER_NO_CACHE].",
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
    "topology": click.option(
        "--topology",
        default=None,
        metavar="NAME",
        help="Check for this TPU pod (v5e-256, v5e:16x16, v4-1024, v5p:4x4x8): the program sees its "
        "compile-only devices as jax.devices(), as process 0 (needs libtpu).",
    ),
    "num_slices": click.option(
        "--num-slices",
        type=click.IntRange(min=1),
        default=None,
        help="With --topology: that many slices of the pod (multi-slice) [default: 1].",
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
    "extend_select",
    "silent",
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
    config: tuple[str, ...] = ()
    """``--config``: a file and ``KEY = VALUE`` settings (:func:`is_setting_argument`)."""
    color: str = "auto"
    statistics: bool = False
    show_fixes: bool = False
    fix: bool = False
    diff: bool = False
    strategy: str | None = None
    unsafe_fixes: bool = False
    jax_version: str | None = None
    confirm: bool = False
    extend_select: list[str] | None = None
    silent: bool = False
    fix_only: bool = False
    """``--fix-only``: the fixes written, what is left neither reported nor counted (ruff's)."""
    exit_non_zero_on_fix: bool = False

    @classmethod
    def take(cls, params: dict[str, Any]) -> Invocation:
        """Pop the shared options out of a command's parameters."""
        names = {f.name for f in dataclasses.fields(cls)}
        taken = cls(**{name: params.pop(name) for name in list(params) if name in names})
        taken.quiet = taken.quiet or taken.silent
        taken.fix = taken.fix or taken.fix_only
        return taken

    @property
    def write(self) -> bool:
        return self.fix and not self.diff


class Console:
    """Where the report goes (stdout, or ``-o FILE``) and the tool's own messages (stderr)."""

    def __init__(self, invocation: Invocation, report_to_stderr: bool = False) -> None:
        self.output_file = invocation.output_file
        self.quiet = invocation.quiet
        self.silent = invocation.silent
        """``--silent``: no report and no notes; errors only (the exit status says the rest)."""
        self.report_to_stderr = report_to_stderr
        """``check --fix -``: stdout carries the fixed source, so the report goes to stderr."""
        self.color_err = color_enabled(invocation.color, sys.stderr)
        self.color_out = (
            False
            if self.output_file
            else (self.color_err if report_to_stderr else color_enabled(invocation.color, sys.stdout))
        )
        self._report: list[str] = []
        self._said: set[str] = set()

    def report(self, text: str) -> None:
        """Part of the report: stdout, or the output file (written once, at the end)."""
        if self.silent:
            return
        if self.output_file:
            self._report.append(text)
        elif text:
            click.echo(text, nl=False, err=self.report_to_stderr, color=self.color_out)

    def note(self, text: str, always: bool = False) -> None:
        if always or not self.quiet:
            click.echo(text, err=True, color=self.color_err)

    def note_once(self, text: str) -> None:
        """A warning said once per command, however often it applies (a state folder not used)."""
        if text not in self._said:
            self._said.add(text)
            self.note(self.styled_error(text), always=True)

    def styled_error(self, text: str) -> str:
        return click.style(text, fg="red") if self.color_err else text

    def flush(self) -> None:
        """Write the output file in one rename, so a reader never sees half a report."""
        if not self.output_file:
            return
        from offload_fixer.resolved_paths import write_file

        try:
            write_file(self.output_file, "".join(self._report).encode("utf-8"))
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
    analysed: str | None = None
    """How many files were analysed, read from the cache, or ruled out by the prefilter (``--verbose``)."""
    internal_errors: list[str] = field(default_factory=list)
    """Files the check itself failed on (a bug of offload-fixer): a note each, on stderr; the
    exit code stays that of the findings."""
    compilations: list[Any] = field(default_factory=list)
    """``--confirm``: each compilation's report with the compiler's verdict on it."""
    trees: dict[Any, frozenset[str]] = field(default_factory=dict)
    """``run``: every flat output's path of each jitted function, so the text output can name
    the whole sub-trees a finding reaches (:func:`offload_fixer.report.output_trees`)."""
    written: bool = False
    """A fix was written (``--exit-non-zero-on-fix``), whatever it left to report."""
    measured: list[Any] = field(default_factory=list)
    """``run --fix``: each fix compiled, with its memory figures (``model.MeasuredFix``)."""
    notes: list[str] = field(default_factory=list)
    """Said before the report: files not checked and why (a notebook of another language)."""
