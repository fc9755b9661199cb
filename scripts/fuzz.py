"""The full fuzz and fault campaign, on demand; ``tests/fuzz/`` runs a seeded sample of each part.

    .venv/bin/python scripts/fuzz.py --variants 800                # everything
    .venv/bin/python scripts/fuzz.py --variants 200 --interrupts 10 --skip-lsp-timing
    .venv/bin/python scripts/fuzz.py --only races --races 200      # one part

Parts: mutated variants of the examples and fixtures (form feeds included) fixed by the real
``check --fix`` and checked (bytes outside the edits, compiling, idempotence, each file
written once and no other, the programs still run); the CLI bad-input table; interrupted
many-file ``--fix`` runs (two-round fixes among them); seeded path cases (report paths,
symlinked trees, notebooks' line ends, deep JSON and TOML); a symlink swapped in during a fix
(before, inside and racing the write); state folders that are symlinks, and state files on a
full disk; fixes of modules that import ``jax`` for the type checker only, run afterwards;
identifiers spelled with Unicode look-alikes; ``run`` on programs that fork, compile at exit,
edit the interpreter's state or spell ``unpinned_host`` shardings; the language server's
protocol scenarios, messages nested deeply, and its time on a 5 MB document (and on one at the
size limit it analyses). Prints the counts, each part's tried and failed; exits 1 when any
failure count is not 0.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FAILURES = (
    "traceback",
    "refused",
    "fix-refused",
    "not-compiling",
    "not-idempotent",
    "outside-edit",
    "program-fails",
    "write-outside",
    "replaced-twice",
    "wrong-exit-code",
)


def fix_variants(count: int, seed: int, run: bool) -> tuple[Counter, list[str]]:
    from tests.fuzz.campaign import run_campaign

    outcomes, counts = run_campaign(count, seed, run=run)
    details = [f"{o.variant.label}: {p[:2000]}" for o in outcomes for p in o.problems]
    return counts, details


def cli_table() -> tuple[Counter, list[str]]:
    from tests.fuzz.bad_input import CASES, can_make_append_only, can_make_unreadable, has_pinned_host, run_case

    counts: Counter = Counter()
    details = []
    for case in CASES:
        with tempfile.TemporaryDirectory(prefix="offload-fixer-bad-input-") as tmp:
            directory = Path(tmp)
            if (
                (case.needs_unreadable and not can_make_unreadable())
                or (case.name == "fix-append-only-file" and not can_make_append_only(directory))
                or (case.needs_pinned_host and not has_pinned_host())
            ):
                counts["rows skipped"] += 1
                continue
            problem, _ = run_case(case, directory)
        counts["rows run"] += 1
        if problem:
            kind = problem.split(":", 1)[0]
            counts[{"hang": "hangs", "traceback": "tracebacks"}.get(kind, kind)] += 1
            details.append(f"{case.name}: {problem}")
    return counts, details


def interrupted_fixes(runs: int, files: int, seed: int) -> tuple[Counter, list[str]]:
    from tests.fuzz.interrupts import interrupt_once, reference

    counts: Counter = Counter()
    details = []
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="offload-fixer-interrupts-") as tmp:
        directory = Path(tmp)
        originals, fixed, took = reference(directory, files)
        counts["files per run"] = files
        for _ in range(runs):
            outcome = interrupt_once(directory, originals, fixed, took, rng)
            counts["interrupted runs"] += 1
            counts[f"by {outcome.signal.name if hasattr(outcome.signal, 'name') else outcome.signal}"] += 1
            counts["files left original"] += outcome.original
            counts["files fully fixed"] += outcome.fixed
            counts["runs stopped while writing (some files fixed, some original)"] += 0 < outcome.fixed < files
            counts["files half-written"] += len(outcome.half_written)
            counts["files lost"] += len(outcome.lost)
            counts["temporary files left after SIGKILL"] += len(outcome.left_behind) if outcome.signal == 9 else 0
            for problem in outcome.problems:
                counts[problem.split(":", 1)[0]] += 1 if not problem.startswith(("half-written", "lost")) else 0
                details.append(f"signal {outcome.signal} after {outcome.delay_s:.2f} s: {problem}")
    return counts, details


def path_cases(count: int, seed: int) -> tuple[Counter, list[str]]:
    from tests.fuzz.paths import run_path_cases

    with tempfile.TemporaryDirectory(prefix="offload-fixer-paths-") as tmp:
        return run_path_cases(count, seed, Path(tmp))


def in_directory(run, prefix: str):
    """``run(directory)`` in a temporary directory of its own."""
    with tempfile.TemporaryDirectory(prefix=f"offload-fixer-{prefix}-") as tmp:
        return run(Path(tmp))


def lsp_scenarios() -> tuple[Counter, list[str]]:
    from tests.fuzz.lsp_protocol import SCENARIOS, run_scenario

    counts: Counter = Counter()
    details = []
    for scenario in SCENARIOS:
        with tempfile.TemporaryDirectory(prefix="offload-fixer-lsp-") as tmp:
            problem, _ = run_scenario(scenario, Path(tmp))
        counts["scenarios"] += 1
        if problem:
            counts["failed"] += 1
            details.append(f"{scenario.name}: {problem}")
    return counts, details


def lsp_timing(sizes: list[int]) -> list[str]:
    from tests.fuzz.lsp_protocol import time_large_document

    lines = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="offload-fixer-lsp-size-") as tmp:
            took, diagnostics, what = time_large_document(Path(tmp), size)
        lines.append(f"  {size / 1e6:.1f} MB document: {what} in {took:.2f} s ({diagnostics} diagnostics)")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variants", type=int, default=800, help="mutated programs to fix and check")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-run", action="store_true", help="do not run the fixed programs")
    parser.add_argument("--interrupts", type=int, default=30, help="interrupted --fix runs")
    parser.add_argument("--files", type=int, default=200, help="files in each interrupted --fix run")
    parser.add_argument(
        "--path-cases",
        type=int,
        default=200,
        help="seeded report paths, symlinked trees, notebooks' line ends, deep JSON and TOML",
    )
    parser.add_argument("--skip-cli", action="store_true")
    parser.add_argument("--races", type=int, default=120, help="fix runs with a symlink swapped in")
    parser.add_argument("--state-cases", type=int, default=20, help="projects whose state folders are symlinks")
    parser.add_argument("--full-disk", type=int, default=8, help="check and run rounds on a full disk")
    parser.add_argument("--type-only", type=int, default=40, help="modules importing jax for the type checker only")
    parser.add_argument("--unicode-names", type=int, default=60, help="programs spelled with look-alike names")
    parser.add_argument("--programs", type=int, default=24, help="programs that fork, compile at exit, edit state")
    parser.add_argument("--deep-messages", type=int, default=40, help="language-server messages nested deeply")
    parser.add_argument("--only", nargs="*", default=None, help="run only these parts (by the option's name)")
    parser.add_argument("--skip-lsp", action="store_true")
    parser.add_argument("--skip-lsp-timing", action="store_true")
    parser.add_argument(
        "--lsp-sizes",
        type=int,
        nargs="*",
        default=[5_000_000, 999_000],
        help="document sizes (characters) to time the language server on",
    )
    args = parser.parse_args()
    # JAX in this process (and the commands it starts) on the CPU, whatever plugins are
    # installed: libtpu and the CUDA plugin would otherwise look for their hardware
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    sys.path.insert(0, str(ROOT))
    failed = 0
    details: list[str] = []

    def report(title: str, counts: Counter, bad: tuple[str, ...], tried: int | None = None) -> None:
        """A part's counts, failures last; with ``tried``, a line of what was tried and what failed."""
        nonlocal failed
        print(title)
        for key, value in sorted(counts.items(), key=lambda kv: (kv[0] in bad, kv[0])):
            print(f"  {key}: {value}")
        for key in bad:
            if key not in counts:
                print(f"  {key}: 0")
        failures = sum(counts.get(key, 0) for key in bad)
        if tried is not None:
            skipped = sum(value for key, value in counts.items() if "skipped" in key)
            print(f"  => tried {tried - skipped}, failures {failures}")
        failed += failures

    def wanted(part: str) -> bool:
        return args.only is None or part in args.only

    start = time.perf_counter()
    if args.variants and wanted("variants"):
        counts, found = fix_variants(args.variants, args.seed, not args.no_run)
        report(f"fix variants (seed {args.seed})", counts, FAILURES)
        details += found
    if not args.skip_cli and wanted("cli"):
        counts, found = cli_table()
        report("CLI bad-input table", counts, ("wrong exit code", "wrong outcome", "tracebacks", "hangs"))
        details += found
    if args.interrupts and wanted("interrupts"):
        counts, found = interrupted_fixes(args.interrupts, args.files, args.seed)
        report(
            "interrupted --fix runs",
            counts,
            ("files half-written", "files lost", "temporary files left", "traceback", "hang", "wrong exit code"),
        )
        details += found
    if args.path_cases and wanted("path-cases"):
        from tests.fuzz.paths import PATH_FAILURES

        counts, found = path_cases(args.path_cases, args.seed)
        report(f"path and hostile-file cases (seed {args.seed})", counts, PATH_FAILURES)
        details += found
    if args.races and wanted("races"):
        from tests.fuzz.races import RACE_FAILURES, run_races

        counts, found = in_directory(lambda d: run_races(args.races, args.seed, d), "races")
        report(f"a symlink swapped in during a fix (seed {args.seed})", counts, RACE_FAILURES, args.races)
        details += found
    if args.state_cases and wanted("state-cases"):
        from tests.fuzz.state_folders import STATE_FAILURES, run_state_cases

        counts, found = in_directory(lambda d: run_state_cases(args.state_cases, args.seed, d), "state")
        report(f"state folders that are symlinks (seed {args.seed})", counts, STATE_FAILURES, args.state_cases)
        details += found
    if args.full_disk and wanted("full-disk"):
        from tests.fuzz.state_folders import DISK_FAILURES, run_full_disk

        counts, found = in_directory(lambda d: run_full_disk(args.full_disk, d), "disk")
        report("state files on a full disk", counts, DISK_FAILURES, args.full_disk)
        details += found
    if args.type_only and wanted("type-only"):
        from tests.fuzz.names import NAME_FAILURES, run_type_only_cases

        counts, found = in_directory(
            lambda d: run_type_only_cases(args.type_only, args.seed, d, run=not args.no_run), "type-only"
        )
        title = f"fixes of modules importing jax for the type checker only (seed {args.seed})"
        report(title, counts, NAME_FAILURES, args.type_only)
        details += found
    if args.unicode_names and wanted("unicode-names"):
        from tests.fuzz.names import UNICODE_FAILURES, run_unicode_cases

        counts, found = in_directory(lambda d: run_unicode_cases(args.unicode_names, args.seed, d), "unicode")
        report(f"identifiers spelled with look-alikes (seed {args.seed})", counts, UNICODE_FAILURES, args.unicode_names)
        details += found
    if args.programs and wanted("programs"):
        from tests.fuzz.programs import PROGRAM_FAILURES, run_programs

        counts, found = in_directory(lambda d: run_programs(args.programs, args.seed, d), "programs")
        title = f"run on programs that fork, compile at exit, edit state (seed {args.seed})"
        report(title, counts, PROGRAM_FAILURES, args.programs)
        details += found
    if not args.skip_lsp and wanted("lsp"):
        counts, found = lsp_scenarios()
        report("language server protocol", counts, ("failed",))
        details += found
    if args.deep_messages and not args.skip_lsp and wanted("deep-messages"):
        from tests.fuzz.lsp_protocol import deep_messages

        counts, found = in_directory(lambda d: deep_messages(args.deep_messages, args.seed, d), "deep")
        report(f"language-server messages nested deeply (seed {args.seed})", counts, ("failed",), args.deep_messages)
        details += found
    if not args.skip_lsp and not args.skip_lsp_timing and wanted("lsp-timing"):
        print("language server, time from didOpen to its answer")
        print("\n".join(lsp_timing(args.lsp_sizes)))
    print(f"campaign: {time.perf_counter() - start:.0f} s, {failed} failure(s)")
    for line in details:
        print(f"FAILURE {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
