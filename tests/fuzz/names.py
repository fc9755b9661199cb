"""Names as Python binds and reads them, and the fixes that must respect both.

Imports only a type checker sees: programs that import ``jax`` under ``if TYPE_CHECKING:``
(or in a function, or only as ``jax.numpy``) and take what they run from ``from jax import
device_put, jit``. Each is fixed by the real ``check --fix --unsafe-fixes`` for a seeded
strategy and JAX version, and then run (all of a campaign's programs in one interpreter, on
the CPU). What must hold: the fix is made, the fixed program still runs, and a ``NameError``
is never what a fix adds.

Identifiers spelled with look-alikes: Python reads identifiers as their NFKC form, so an
italic ``h`` (U+210E), a fullwidth one (U+FF48) and ``h`` are one variable, and ``first``
spelled with the ``fi`` ligature (U+FB01) is ``first``. A program with a finding has some
of its identifiers (its variables, its function and parameter, its sharding, an attribute of
``jax``) spelled so, in some of their uses. What must hold: ``check`` finds what it finds in
the program spelled in ASCII (the same codes on the same lines); ``check --fix`` fixes it;
the fixed file compiles, a second check finds nothing fixable there, no line the fix left
alone changes, and every look-alike spelling of the original is still in the file.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import textwrap
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from offload_fixer.exit_codes import ExitCode

from .bad_input import OLD
from .campaign import changed_outside_statements

NAME_FAILURES = ("traceback", "not fixed", "not compiling", "NameError", "program fails", "wrong exit code")
UNICODE_FAILURES = (
    "traceback",
    "missed",
    "different findings",
    "not fixed",
    "not compiling",
    "not idempotent",
    "outside-edit",
    "spelling lost",
)
VERSIONS = (OLD, "0.6.2", "0.10.2")
STRATEGIES = ("auto", "device", "host")


# ---------------------------------------------------------------------------------------
# Imports only a type checker sees
TYPE_ONLY = {
    "TYPE_CHECKING": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import jax\n",
    "typing.TYPE_CHECKING, with an else": "import typing\n\nif typing.TYPE_CHECKING:\n    import jax\nelse:\n    pass\n",
    "in main() only": "",
    "as jax.numpy only": "import jax.numpy as jnp\n",
}
HOST_SHARDINGS = {
    "SingleDeviceSharding": (
        "from jax import devices\nfrom jax.sharding import SingleDeviceSharding\n",
        'HOST = SingleDeviceSharding(devices()[0], memory_kind="pinned_host")\n',
    ),
    "NamedSharding": (
        "from jax import make_mesh\nfrom jax.sharding import NamedSharding, PartitionSpec\n",
        'MESH = make_mesh((1,), ("x",))\nHOST = NamedSharding(MESH, PartitionSpec(), memory_kind="pinned_host")\n',
    ),
}
USES = {
    "returned": "    return x * 2, h\n",
    "computed on": "    return x * 2, h + 1\n",
    "returned in a dict": '    return {"y": x * 2, "h": h}\n',
}


@dataclass
class NameCase:
    label: str
    text: str
    jax_version: str
    strategy: str
    problems: list[str] = field(default_factory=list)
    fixed: str = ""


def type_only_case(rng: random.Random) -> NameCase:
    imports = rng.choice(list(TYPE_ONLY))
    sharding = rng.choice(list(HOST_SHARDINGS))
    use = rng.choice(list(USES))
    sharding_imports, sharding_definition = HOST_SHARDINGS[sharding]
    annotation = "jnp.ndarray" if imports == "as jax.numpy only" else "jax.Array"
    main_import = "    import jax\n" if imports == "in main() only" else ""
    text = (
        "from __future__ import annotations\n\n"
        + TYPE_ONLY[imports]
        + "from jax import device_put, jit\n"
        + sharding_imports
        + "\n"
        + sharding_definition
        + f"\n\n@jit\ndef step(x: {annotation}):\n    h = device_put(x, HOST)\n"
        + USES[use]
        + "\n\ndef main():\n"
        + main_import
        + "    from jax import numpy as np_\n\n    print(step(np_.ones(4)))\n"
        + '\n\nif __name__ == "__main__":\n    main()\n'
    )
    # a returned host value is an error only where JAX types the output device memory (before 0.4.29)
    version = rng.choice(VERSIONS) if use == "computed on" else OLD
    return NameCase(f"jax {imports}, {sharding}, host value {use}", text, version, rng.choice(STRATEGIES))


def run_type_only_cases(count: int, seed: int, directory: Path, run: bool = True) -> tuple[Counter, list[str]]:
    rng = random.Random(seed)
    counts: Counter = Counter()
    details: list[str] = []
    cases = [type_only_case(rng) for _ in range(count)]
    paths = []
    for index, case in enumerate(cases):
        path = directory / f"type_only_{index:04d}.py"
        path.write_text(case.text, encoding="utf-8")
        counts["programs fixed"] += 1
        status, output = _cli(
            ["check", "--fix", "--unsafe-fixes", "--no-cache", "--jax-version", case.jax_version]
            + ["--strategy", case.strategy, path.name],
            directory,
        )
        case.fixed = path.read_text(encoding="utf-8")
        if status is None:
            case.problems.append(f"traceback: {output}")
        elif status not in (ExitCode.CLEAN, ExitCode.FINDINGS):
            case.problems.append(f"wrong exit code: {status}\n{output[-1500:]}")
        elif case.fixed == case.text:
            case.problems.append(f"not fixed: the fix left the file as it was\n{output[-1500:]}")
        try:
            compile(case.fixed, str(path), "exec")
        except SyntaxError as exc:
            case.problems.append(f"not compiling: {exc}")
        paths.append(path)
    if run:
        originals = directory / "originals"
        originals.mkdir()
        for index, case in enumerate(cases):
            (originals / paths[index].name).write_text(case.text, encoding="utf-8")
        before = _run_programs([originals / p.name for p in paths])
        after = _run_programs(paths)
        for case, path in zip(cases, paths):
            ran, now = before.get(path.name), after.get(path.name)
            if now is not None and "NameError" in now:
                case.problems.append(f"NameError: the fixed program fails: {now}\n{case.fixed}")
            elif ran is None and now is not None:
                case.problems.append(f"program fails: the original ran, the fixed one fails: {now}\n{case.fixed}")
    for case in cases:
        counts[f"{case.label.split(',')[0]} programs"] += 1
        for problem in case.problems:
            counts[problem.split(":", 1)[0]] += 1
            details.append(f"{case.label} ({case.strategy}, JAX {case.jax_version}): {problem[:3000]}")
    counts["programs fixed"] -= counts.get("not fixed", 0)
    return counts, details


_RUNNER = textwrap.dedent(
    """\
    import json, runpy, sys, traceback
    outcomes = {}
    for path in sys.argv[1:]:
        try:
            runpy.run_path(path, run_name="__main__")
        except BaseException as exc:
            outcomes[path.rsplit("/", 1)[-1]] = f"{type(exc).__name__}: {exc}"
    print("OUTCOMES " + json.dumps(outcomes))
    """
)


def _run_programs(paths: list[Path]) -> dict[str, str]:
    """Each program run as ``__main__``, all in one interpreter on the CPU: name -> the
    exception it ended with (the programs that ran to their end are not listed)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1"}
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, *map(str, paths)], capture_output=True, text=True, env=env, timeout=900
    )
    line = next((line for line in done.stdout.splitlines() if line.startswith("OUTCOMES ")), None)
    if line is None:
        return {path.name: f"the interpreter ended first: {done.stderr[-1500:]}" for path in paths}
    return json.loads(line.removeprefix("OUTCOMES "))


def _cli(arguments: list[str], cwd: Path) -> tuple[int | None, str]:
    """The command in this process, from ``cwd``: (its status, its output); status None and
    the traceback for an exception."""
    from click.testing import CliRunner

    from offload_fixer.cli import main

    here = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, arguments)
    finally:
        os.chdir(here)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return None, "".join(traceback.format_exception(result.exception))[-3000:]
    return result.exit_code, result.output


# ---------------------------------------------------------------------------------------
# Identifiers spelled with look-alikes
def _math_italic(letter: str) -> str:
    if letter == "h":
        return "\u210e"  # PLANCK CONSTANT: the italic h has its own code point
    if "a" <= letter <= "z":
        return chr(0x1D44E + ord(letter) - ord("a"))
    return chr(0x1D434 + ord(letter) - ord("A")) if "A" <= letter <= "Z" else letter


def _bold(letter: str) -> str:
    if "a" <= letter <= "z":
        return chr(0x1D41A + ord(letter) - ord("a"))
    return chr(0x1D400 + ord(letter) - ord("A")) if "A" <= letter <= "Z" else letter


def _fullwidth(letter: str) -> str:
    return chr(0xFF01 + ord(letter) - 0x21) if "!" < letter <= "~" and letter != "_" else letter


LIGATURES = {"ffi": "\ufb03", "ffl": "\ufb04", "ff": "\ufb00", "fi": "\ufb01", "fl": "\ufb02", "st": "\ufb06"}
STYLES = ("math italic", "bold", "fullwidth", "ligature", "mixed")
IDENTIFIERS = ("h", "host", "step", "x", "mesh", "device_put", "first", "offload_state")
"""What the program below names; ``device_put`` is an attribute of ``jax``."""
PROGRAM = textwrap.dedent(
    """\
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = jax.make_mesh((1,), ("x",))
    host = NamedSharding(mesh, P(), memory_kind="pinned_host")
    first = 1


    @jax.jit
    def step(x):
        h = jax.device_put(x, host)
        offload_state = h
        return x * first, offload_state
    """
)


def spell(name: str, style: str, rng: random.Random) -> str:
    """``name`` as Python reads it the same (NFKC), in a look-alike ``style``."""
    if style == "mixed":
        style = rng.choice(STYLES[:-1])
    if style == "ligature":
        for plain, ligature in LIGATURES.items():
            if plain in name:
                return name.replace(plain, ligature, 1)
        style = "fullwidth"
    convert = {"math italic": _math_italic, "bold": _bold, "fullwidth": _fullwidth}[style]
    positions = [i for i, letter in enumerate(name) if letter.isalpha()]
    chosen = set(rng.sample(positions, rng.randint(1, len(positions))))
    return "".join(convert(letter) if i in chosen else letter for i, letter in enumerate(name))


@dataclass
class UnicodeCase:
    label: str
    text: str
    problems: list[str] = field(default_factory=list)


def unicode_case(rng: random.Random) -> UnicodeCase:
    """:data:`PROGRAM` with one to three identifiers spelled otherwise, each in some of its uses
    (a use inside a string is left alone: it is no identifier there)."""
    chosen = rng.sample(IDENTIFIERS, rng.randint(1, 3))
    text = PROGRAM
    labels = []
    for name in chosen:
        style = rng.choice(STYLES)
        lines = text.split("\n")
        uses = [
            (row, match.start())
            for row, line in enumerate(lines)
            for match in re.finditer(rf"(?<![\w\"]){name}(?![\w\"])", line)
        ]
        picked = rng.sample(uses, rng.randint(1, len(uses)))
        for row, column in sorted(picked, reverse=True):
            line = lines[row]
            lines[row] = line[:column] + spell(name, style, rng) + line[column + len(name) :]
        text = "\n".join(lines)
        labels.append(f"{name} ({style}, {len(picked)} of {len(uses)} uses)")
    compile(text, "<case>", "exec")  # Python reads it as the ASCII program
    return UnicodeCase(", ".join(labels), text)


def run_unicode_cases(count: int, seed: int, directory: Path) -> tuple[Counter, list[str]]:
    rng = random.Random(seed)
    counts: Counter = Counter()
    details: list[str] = []
    plain = directory / "plain.py"
    plain.write_text(PROGRAM, encoding="utf-8")
    _, reference = _cli(
        ["check", "--no-cache", "--output-format", "concise", "--jax-version", OLD, plain.name], directory
    )
    expected = _findings(reference)
    for index in range(count):
        case = unicode_case(rng)
        path = directory / f"unicode_{index:04d}.py"
        path.write_text(case.text, encoding="utf-8")
        status, output = _cli(
            ["check", "--no-cache", "--output-format", "concise", "--jax-version", OLD, path.name], directory
        )
        if status is None:
            case.problems.append(f"traceback: {output}")
        elif not _findings(output):
            case.problems.append(f"missed: `check` finds nothing where it finds {sorted(expected)} in ASCII\n{output}")
        elif _findings(output) != expected:
            case.problems.append(f"different findings: {sorted(_findings(output))}, in ASCII {sorted(expected)}")
        else:
            case.problems += _fixed_well(case.text, path, directory)
        counts["programs"] += 1
        for problem in case.problems:
            counts[problem.split(":", 1)[0]] += 1
            details.append(f"{case.label}: {problem[:3000]}")
    return counts, details


def _findings(output: str) -> set[tuple[str, str]]:
    """(line, code) of each finding of a concise report."""
    return {(m.group(1), m.group(2)) for m in re.finditer(r"^[^:\n]+\.py:(\d+):\d+: (OFL\d+)", output, re.M)}


def _fixed_well(text: str, path: Path, directory: Path) -> list[str]:
    problems = []
    arguments = ["check", "--fix", "--unsafe-fixes", "--no-cache", "--jax-version", OLD, path.name]
    status, output = _cli(arguments, directory)
    fixed = path.read_text(encoding="utf-8")
    if status is None:
        return [f"traceback: {output}"]
    if status != ExitCode.CLEAN or fixed == text:
        return [f"not fixed: exit {status}\n{output[-1500:]}"]
    try:
        compile(fixed, str(path), "exec")
    except SyntaxError as exc:
        return [f"not compiling: {exc}"]
    problems += [f"outside-edit: {p}" for p in changed_outside_statements(text.encode(), fixed.encode())]
    spelled = {word for word in re.findall(r"\w+", text) if not word.isascii()}
    lost = sorted(word for word in spelled if word not in fixed)
    if lost:
        problems.append(f"spelling lost: {lost} are no longer in the fixed file\n{fixed}")
    status, output = _cli(arguments, directory)
    if path.read_text(encoding="utf-8") != fixed:
        problems.append(f"not idempotent: a second fix changed the file again\n{output[-1500:]}")
    return problems
