"""Record ``offload-fixer run`` on a TPU machine: the transcripts CI compares its emulated runs with.

On a TPU VM (JAX's default backend the TPU), every run of the corpus is made in this one
process, as ``offload-fixer run ARGS`` (the command line's own ``main``), since one process at
a time can hold the chip and each spends seconds opening it: the examples, the programs with
several failing compilations (``tests/accelerator_programs/``, one of them eager each),
``--no-keep-going``, ``-v`` (JAX's traceback under each failure), ``--confirm`` (the chip's compiler as the judge) and ``--fix`` on three
programs copied into a directory of their own (the fixed program is run again on the chip).
Each run's report (``-o``), its notes (stderr) and the program's output are recorded with the
exit status, beside the JAX, jaxlib and libtpu versions and the device kind:

    python3 scripts/accelerator_transcripts.py tests/accelerator/tpu_v5e_transcripts.json

JAX's caches are cleared between runs, so that each compiles (and is checked) as in a process
of its own. The record is written after every run: where the process dies (a compiler that
aborts takes it down), ``--resume`` goes on with the next run and records the one that died
as ``aborted``. ``tests/test_accelerator_transcripts.py`` runs each recorded command again on the
CPU under ``OFFLOAD_FIXER_EMULATE_ACCELERATOR=tpu`` and compares the transcripts line by line,
timings aside. With that variable set, this script records the emulated runs instead (to
compare by hand).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPORT = "REPORT"
"""Stands for the report file each run writes (``-o REPORT``)."""

EXAMPLES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "examples").glob("*.py"))
PROGRAMS = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests" / "accelerator_programs").glob("*.py"))
FIXED = ("examples/optimizer_offload_broken.py", "examples/param_streaming_broken.py", "examples/unpinned_host_trap.py")


def corpus() -> list[dict]:
    """Each run: its arguments after ``run``, and the files copied into a directory of its own
    to run in (``--fix`` writes the copy, never the repository)."""
    runs = [{"argv": ["-o", REPORT, path], "copy": []} for path in (*EXAMPLES, *PROGRAMS)]
    runs.append({"argv": ["-o", REPORT, "--no-keep-going", "tests/accelerator_programs/rollout_buffer.py"], "copy": []})
    runs.append({"argv": ["-o", REPORT, "-v", "tests/accelerator_programs/trajectory_on_host.py"], "copy": []})
    runs.append({"argv": ["-o", REPORT, "--confirm", "tests/accelerator_programs/momentum_on_host.py"], "copy": []})
    runs += [{"argv": ["-o", REPORT, "--fix", Path(path).name], "copy": [path]} for path in FIXED]
    return runs


def run_once(argv: list[str], cwd: Path) -> dict:
    """``offload-fixer run ARGV`` in this process, in ``cwd``: exit status, report, notes and
    the program's output, each stream captured at its file descriptor."""
    from offload_fixer.cli import main

    report = cwd / ".offload-fixer-report.txt"
    args = [str(report) if a == REPORT else a for a in argv]
    captured: dict[str, str] = {}
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        previous = os.getcwd()
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(stdout.fileno(), 1)
        os.dup2(stderr.fileno(), 2)
        os.chdir(cwd)
        start = time.perf_counter()
        try:
            main(["run", *args], prog_name="offload-fixer")
            status = 0
        except SystemExit as exc:
            status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            seconds = time.perf_counter() - start
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in saved.items():
                os.dup2(copy, fd)
                os.close(copy)
            os.chdir(previous)
        for name, handle in (("stdout", stdout), ("stderr", stderr)):
            handle.seek(0)
            captured[name] = handle.read().decode("utf-8", "replace")
    text = report.read_text(encoding="utf-8") if report.exists() else None
    report.unlink(missing_ok=True)
    return {"exit_code": status, "report": text, **captured, "seconds": round(seconds, 2)}


def versions() -> dict:
    import jax

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {
        "recorded": datetime.date.today().isoformat(),
        "device_kind": jax.devices()[0].device_kind,
        "backend": jax.default_backend(),
        "emulated": os.environ.get("OFFLOAD_FIXER_EMULATE_ACCELERATOR") or None,
        "jax": jax.__version__,
        "jaxlib": installed("jaxlib"),
        "libtpu": installed("libtpu"),
        "python": platform.python_version(),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the JSON record to write")
    parser.add_argument("--only", nargs="*", default=None, help="run only the runs whose arguments name these")
    parser.add_argument("--resume", action="store_true", help="go on with the runs the record does not hold yet")
    args = parser.parse_args()
    record = json.loads(args.out.read_text(encoding="utf-8")) if args.resume and args.out.exists() else {"runs": []}
    done = {tuple(run["argv"]) for run in record["runs"]}
    pending = record.pop("pending", None)
    if pending is not None and tuple(pending["argv"]) not in done:
        record["runs"].append({**pending, "aborted": True})  # the process died in it
        done.add(tuple(pending["argv"]))
    for run in corpus():
        if tuple(run["argv"]) in done or (args.only and not any(name in " ".join(run["argv"]) for name in args.only)):
            continue
        _write(args.out, {**record, "pending": run})
        with tempfile.TemporaryDirectory(prefix="offload-fixer-chip-") as scratch:
            cwd = ROOT
            if run["copy"]:
                cwd = Path(scratch)
                for path in run["copy"]:
                    shutil.copy(ROOT / path, cwd / Path(path).name)
            print(f"offload-fixer run {' '.join(run['argv'])}", file=sys.stderr, flush=True)
            result = run_once(run["argv"], cwd)
            if run["copy"]:
                result["fixed"] = {Path(p).name: (cwd / Path(p).name).read_text(encoding="utf-8") for p in run["copy"]}
        print(f"  exit {result['exit_code']} in {result['seconds']} s", file=sys.stderr, flush=True)
        record["runs"].append({**run, **result})
        import jax

        jax.clear_caches()  # the next run compiles (and is checked) as in a process of its own
    _write(args.out, {**record, **versions()})
    return 0


def _write(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
