"""How far the static check agrees with the dynamic analysis: a confusion matrix.

Each program is run under ``offload-fixer run`` (the dynamic analysis: the judge) and checked
statically from its source. The corpus is the examples, the training packages, the test
programs and ``tests/static_vs_dynamic/`` (programs written for this comparison: meshes of 8
CPU devices, scans streaming layers, loops, ``custom_vjp``, dataclasses, helpers, ``where``). A unit is one (file, jitted function, output path) that either side
reports with OFL1200, plus every jitted function neither side reports (true negatives, counted
per function). Only functions the program actually compiled are compared (the dynamic analysis
cannot judge the others), and a static finding on a subtree (``[1]``) matches dynamic findings
on its leaves (``[1]['w']``). The static check must have no false positives on programs the
dynamic analysis passes; misses are expected where a value flows through something the static
rules do not model. Host compute (OFL1201) is compared per program (how many of the programs
where ``run`` reports it the static check reports it in too, and in how many it alone does) and
per compiled function: a static OFL1201 in a function where ``run`` reports none is a false
positive too.

    .venv/bin/python scripts/static_vs_dynamic.py                 # examples/, training packages, test programs
    .venv/bin/python scripts/static_vs_dynamic.py path/to/prog.py  # any programs that run (or package dirs)
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PROGRAMS = sorted(
    [
        *ROOT.glob("examples/*.py"),
        *ROOT.glob("tests/runner_programs/*.py"),
        *ROOT.glob("tests/lsp_fixtures/*.py"),
        *ROOT.glob("tests/static_vs_dynamic/*.py"),
        *(main.parent for main in ROOT.glob("examples/training/*/__main__.py")),
    ]
)
"""Scripts, and training packages (a directory with ``__main__.py``, run as ``python -m``)."""


@dataclass
class Matrix:
    true_positive: set = field(default_factory=set)
    false_positive: set = field(default_factory=set)
    false_negative: set = field(default_factory=set)
    true_negative: set = field(default_factory=set)
    not_run: list = field(default_factory=list)
    host_compute: set = field(default_factory=set)
    """Programs where ``run`` reports host compute (OFL1201)."""
    host_compute_found: set = field(default_factory=set)
    """... and the static check reports OFL1201 too."""
    host_compute_named: set = field(default_factory=set)
    """... and the static check reports OFL1201, or an OFL1200 whose trace names the host compute
    (the static check reports one root cause once: a host value computed on that reaches a
    device output is that output's finding)."""
    host_compute_static_only: set = field(default_factory=set)
    """Programs where only the static check reports host compute."""
    host_compute_functions: set = field(default_factory=set)
    """Compiled functions (path, name) where ``run`` reports host compute."""
    host_compute_functions_found: set = field(default_factory=set)
    """... and the static check reports OFL1201 in them too."""
    host_compute_false_positive: set = field(default_factory=set)
    """Compiled functions where only the static check reports OFL1201: a static false error."""
    codes: dict = field(default_factory=dict)
    """program -> (codes ``run`` reports, codes ``check`` reports), for ``--verbose``."""
    eager_found: set = field(default_factory=set)
    """Eager findings, ``(file, line, code)``, that ``run`` and the static check both report: an
    operation outside any jit on an array in host memory (``run``'s ``... (eager)`` reports), and
    JAX's refusal of mixed memory spaces, which stops the program (OFL1215 at its line)."""
    eager_missed: set = field(default_factory=set)
    eager_false_positive: set = field(default_factory=set)


def _functions(diagnostics, code: str) -> set[tuple[str, str]]:
    """The jitted functions (path, name) ``code`` is reported in."""
    return {
        (os.path.realpath(d.function.path or ""), d.function.name.rsplit(".", 1)[-1])
        for d in diagnostics
        if d.code == code and d.function is not None and not _eager(d)
    }


def _units(diagnostics) -> set[tuple[str, str, str]]:
    return {
        (os.path.realpath(d.function.path or ""), d.function.name.rsplit(".", 1)[-1], d.output_path or "")
        for d in diagnostics
        if d.code == "OFL1200" and d.function is not None and not _eager(d)
    }


def _eager(diagnostic) -> bool:
    """A finding of an eager operation: the jit JAX compiles around it (``multiply (eager)``)."""
    return diagnostic.function is not None and diagnostic.function.name.endswith(" (eager)")


def _eager_units(diagnostics, files: set[str]) -> set[tuple[str, int, str]]:
    """``(file, line, code)`` of the eager findings in ``files``: the two sides name JAX's jits
    differently (``_reduce_sum`` against ``sum``), so an operation is known by its line."""
    found = set()
    for d in diagnostics:
        span = d.location
        if (_eager(d) or d.code == "OFL1215") and span is not None and os.path.realpath(span.path) in files:
            found.add((os.path.realpath(span.path), span.line, d.code))
    return found


_REFUSAL = re.compile(r'File "([^"]+)", line (\d+)')
_REFUSAL_TEXT = "memory_space of all inputs passed to"


def _refusal(exception: str | None, files: set[str]) -> set[tuple[str, int, str]]:
    """JAX's refusal of mixed memory spaces that stopped the program, at the innermost line of
    the program's own files in its traceback (OFL1215 there)."""
    if not exception or _REFUSAL_TEXT not in exception:
        return set()
    frames = [(os.path.realpath(path), int(line)) for path, line in _REFUSAL.findall(exception)]
    mine = [frame for frame in frames if frame[0] in files]
    return {(*mine[-1], "OFL1215")} if mine else set()


def _in(diagnostic, files: set[str]) -> bool:
    span = diagnostic.span or (diagnostic.origin.span if diagnostic.origin else None)
    if span is None and diagnostic.function is not None and diagnostic.function.path:
        return os.path.realpath(diagnostic.function.path) in files  # an output of a transformed function
    return span is not None and os.path.realpath(span.path) in files


def _compiled(diagnostic, checked: set) -> bool:
    """A finding of a function the program compiled (``run`` cannot judge the others)."""
    function = diagnostic.function
    if function is None or _eager(diagnostic):
        return True  # an eager operation: compared by its line (:func:`_eager_units`)
    return (os.path.realpath(function.path or ""), function.name.rsplit(".", 1)[-1]) in checked


def _names_host_compute(diagnostic) -> bool:
    from offload_fixer.model import Role

    return diagnostic.code == "OFL1201" or (
        diagnostic.code == "OFL1200" and any(step.role == Role.HOST_COMPUTE for step in diagnostic.trace)
    )


def _covers(static_path: str, dynamic_path: str) -> bool:
    return dynamic_path.startswith(static_path)


def compare(programs: list[Path]) -> Matrix:
    """Run each program (a script, or a package run as a module from the repository root) and
    check its files statically; compare on the files of the program (all of a package's)."""
    from offload_fixer.runner import run_program
    from offload_fixer.static import check_paths

    matrix = Matrix()
    for program in programs:
        program = program.resolve()
        if program.is_dir():
            files = {os.path.realpath(p) for p in program.rglob("*.py")}
            module = ".".join(program.relative_to(ROOT).parts)
            previous = os.getcwd()
            os.chdir(ROOT)
            try:
                result = run_program(module, [], target="tpu", is_module=True)
            finally:
                os.chdir(previous)
        else:
            files = {os.path.realpath(program)}
            result = run_program(str(program), [], target="tpu")
        if result.program_exit_code != 0:
            refused = _refusal(result.program_exception, files)
            if not refused:
                matrix.not_run.append((str(program), "the program failed"))
                continue
            # JAX refused an operation: what ran before it is compared, and the refusal.
            static_diagnostics = [d for r in check_paths([str(program)]) for d in r.diagnostics]
            static_refusals = {u for u in _eager_units(static_diagnostics, files) if u[2] == "OFL1215"}
            matrix.eager_found |= refused & static_refusals
            matrix.eager_missed |= refused - static_refusals
            matrix.eager_false_positive |= static_refusals - refused
            matrix.codes[str(program)] = (["OFL1215"], sorted({u[2] for u in static_refusals}))
            continue
        checked = {
            (os.path.realpath(report.function.path), report.function.name.rsplit(".", 1)[-1])
            for report in result.reports
            if report.function
            and report.function.path
            and os.path.realpath(report.function.path) in files
            and not report.function.name.endswith(" (eager)")
        }
        dynamic = {u for u in _units(result.diagnostics) if u[0] in files}
        static_diagnostics = [d for r in check_paths([str(program)]) for d in r.diagnostics]
        dynamic_eager = _eager_units(result.diagnostics, files)
        static_eager = _eager_units(static_diagnostics, files)
        matrix.eager_found |= dynamic_eager & static_eager
        matrix.eager_missed |= dynamic_eager - static_eager
        matrix.eager_false_positive |= static_eager - dynamic_eager
        dynamic_codes = sorted({d.code for d in result.diagnostics if _in(d, files)})
        static_codes = sorted({d.code for d in static_diagnostics if _in(d, files) and _compiled(d, checked)})
        matrix.codes[str(program)] = (dynamic_codes, static_codes)
        if "OFL1201" in dynamic_codes:
            matrix.host_compute.add(str(program))
            if "OFL1201" in static_codes:
                matrix.host_compute_found.add(str(program))
            if any(_names_host_compute(d) for d in static_diagnostics if _in(d, files) and _compiled(d, checked)):
                matrix.host_compute_named.add(str(program))
        elif "OFL1201" in static_codes:
            matrix.host_compute_static_only.add(str(program))
        dynamic_host = _functions(result.diagnostics, "OFL1201") & checked
        static_host = _functions(static_diagnostics, "OFL1201") & checked
        matrix.host_compute_functions |= dynamic_host
        matrix.host_compute_functions_found |= dynamic_host & static_host
        matrix.host_compute_false_positive |= static_host - dynamic_host
        static = {u for u in _units(static_diagnostics) if u[0] in files and (u[0], u[1]) in checked}
        for unit in dynamic:
            found = any(s[:2] == unit[:2] and _covers(s[2], unit[2]) for s in static)
            (matrix.true_positive if found else matrix.false_negative).add(unit)
        for unit in static:
            if not any(d[:2] == unit[:2] and _covers(unit[2], d[2]) for d in dynamic):
                matrix.false_positive.add(unit)
        flagged = {u[:2] for u in dynamic | static}
        matrix.true_negative |= {(path, name, "*") for path, name in checked - flagged}
    return matrix


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*", type=Path, default=DEFAULT_PROGRAMS)
    parser.add_argument("--verbose", action="store_true", help="the codes each side reports, per program")
    args = parser.parse_args()
    matrix = compare(args.programs)
    if args.verbose:
        for program, (dynamic_codes, static_codes) in sorted(matrix.codes.items()):
            mark = "" if dynamic_codes == static_codes else "  <-"
            print(
                f"{os.path.relpath(program, ROOT)}: run {','.join(dynamic_codes) or '-'}; "
                f"check {','.join(static_codes) or '-'}{mark}"
            )
    print(f"{len(args.programs)} programs")
    print("units: (function, output) with OFL1200; true negatives: clean compiled functions")
    print(f"{'':>16} {'dynamic: E':>11} {'dynamic: ok':>12}")
    print(f"{'static: E':>16} {len(matrix.true_positive):>11} {len(matrix.false_positive):>12}")
    print(f"{'static: ok':>16} {len(matrix.false_negative):>11} {len(matrix.true_negative):>12}")
    for title, units in (("static false positives", matrix.false_positive), ("static misses", matrix.false_negative)):
        for path, function, output in sorted(units):
            print(f"{title}: {os.path.relpath(path, ROOT)} {function} {output or '(result)'}")
    for program, why in matrix.not_run:
        print(f"not compared: {program}: {why}")
    found = len(matrix.true_positive) + len(matrix.false_negative)
    if found:
        print(
            f"static finds {len(matrix.true_positive)} of {found} dynamic findings "
            f"({100 * len(matrix.false_negative) / found:.1f}% missed); "
            f"{len(matrix.false_positive)} static false positives"
        )
    if matrix.host_compute:
        print(
            f"host compute (OFL1201): the static check reports it in {len(matrix.host_compute_found)} of the "
            f"{len(matrix.host_compute)} programs where run does "
            f"({100 * len(matrix.host_compute_found) / len(matrix.host_compute):.1f}%), and alone in "
            f"{len(matrix.host_compute_static_only)}; it names the host compute (OFL1201, or an OFL1200 "
            f"whose trace shows it) in {len(matrix.host_compute_named)} "
            f"({100 * len(matrix.host_compute_named) / len(matrix.host_compute):.1f}%)"
        )
    if matrix.host_compute_functions:
        print(
            f"host compute per compiled function: the static check reports OFL1201 in "
            f"{len(matrix.host_compute_functions_found)} of the {len(matrix.host_compute_functions)} where run does; "
            f"{len(matrix.host_compute_false_positive)} static OFL1201 false positives"
        )
    for path, function in sorted(matrix.host_compute_false_positive):
        print(f"static OFL1201 false positive: {os.path.relpath(path, ROOT)} {function}")
    eager = len(matrix.eager_found) + len(matrix.eager_missed)
    if eager or matrix.eager_false_positive:
        print(
            f"eager findings (file, line, code): the static check reports {len(matrix.eager_found)} of the "
            f"{eager} run reports; {len(matrix.eager_false_positive)} static false positives"
        )
    for title, units in (("eager miss", matrix.eager_missed), ("eager false positive", matrix.eager_false_positive)):
        for path, line, code in sorted(units):
            print(f"{title}: {os.path.relpath(path, ROOT)}:{line} {code}")
    for program in sorted(matrix.host_compute - matrix.host_compute_named):
        print(f"static host-compute misses: {os.path.relpath(program, ROOT)}")
    for program in sorted(matrix.host_compute_static_only):
        print(f"static host compute that run does not report: {os.path.relpath(program, ROOT)}")
    failed = matrix.false_positive or matrix.host_compute_false_positive or matrix.host_compute_static_only
    return 1 if failed or matrix.eager_false_positive else 0


if __name__ == "__main__":
    # The meshes of ``tests/static_vs_dynamic/`` have 4 and 8 devices: CPU devices, set before
    # JAX starts. Only when run as a script: a process that imports this module (the tests) keeps
    # its own devices, and the programs it starts keep its environment.
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
