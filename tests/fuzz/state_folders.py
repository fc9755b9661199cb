"""The tool's state folders in a hostile checkout, and on a full disk.

Symlinked folders: a project (``proj/``, a ``pyproject.toml`` and a file with a finding) whose
``.offload-fixer-cache/`` (the static check's results), its version folder, or
``.offload-fixer/`` (``run``'s report for the editor) is a symlink: out of the project, to
``outside/`` beside it, or to a folder inside the project. ``check`` runs twice (in this
process), ``run`` once (the installed command). What must hold:

* nothing outside the project is created or changed;
* a folder that leads out is not used, and the command says so exactly once;
* one that stays inside is used, without a word;
* the findings and the exit status are those of a project without the link.

Full disk: the project sits on a small tmpfs (in a private mount namespace, ``unshare``),
filled to the last byte; ``check`` and ``run`` run there, then space is freed and they run
again. A state file (``.gitignore`` above all, which keeps git from tracking the state) is
whole or absent after the first run, never empty or partial (one that was empty before it
may stay so: there is no room to repair it); after the second, every one of them is whole; no temporary file is left. Some rounds start from an empty ``.gitignore``, as
an older version's write on a full disk left it: the next run repairs it.
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import subprocess
import sys
import textwrap
import traceback
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from offload_fixer.exit_codes import ExitCode
from offload_fixer.version import __version__

from .bad_input import ENTRY, FIXABLE, OLD, RUNNABLE

CACHE, LAST_RUN = ".offload-fixer-cache", ".offload-fixer"
LINKS = ("cache out", "cache version folder out", "cache inside", "run folder out", "run folder inside")
STATE_FAILURES = ("traceback", "wrong exit code", "write outside", "not said once", "said", "not used", "lost report")
DISK_FAILURES = ("partial state file", "not repaired", "temporary file left", "wrong exit code", "traceback")
GITIGNORES = {CACHE: "# Written by offload-fixer.\n*\n", LAST_RUN: "# written by offload-fixer run\n*\n"}


@dataclass
class StateCase:
    link: str
    problems: list[str] = field(default_factory=list)


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every entry below ``root``: a file's bytes, None for a directory or a link."""
    found: dict[str, bytes | None] = {}
    for path in sorted(root.rglob("*")):
        found[str(path.relative_to(root))] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return found


def state_case(directory: Path, rng: random.Random, link: str | None = None) -> StateCase:
    case = StateCase(link or rng.choice(LINKS))
    project = directory / "proj"
    outside = directory / "outside" / rng.choice(["state", "deep/er/state"])
    outside.mkdir(parents=True)
    (project / "src").mkdir(parents=True)
    (project / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (project / "src" / "train.py").write_text(FIXABLE)
    inside = project / "build" / "state"
    inside.mkdir(parents=True)
    folder = CACHE if case.link.startswith("cache") else LAST_RUN
    if case.link == "cache version folder out":
        (project / CACHE).mkdir()
        os.symlink(outside, project / CACHE / __version__)
    else:
        os.symlink(outside if case.link.endswith("out") else inside, project / folder)
    before = _tree(directory / "outside")
    leads_out = case.link.endswith("out")
    try:
        if folder == CACHE:
            outputs = [_check(project) for _ in range(2)]
            outputs_of_run = [output for _, output in outputs]
            for status, output in outputs:
                if status != ExitCode.FINDINGS:
                    case.problems.append(f"wrong exit code: {status}, expected 1\n{output[-1500:]}")
                if "src/train.py:10:9" not in output:
                    case.problems.append(f"lost report: the finding is not reported\n{output[-1500:]}")
        else:
            status, output = _run(project)
            outputs_of_run = [output]
            if status != ExitCode.FINDINGS:
                case.problems.append(f"wrong exit code: {status}, expected 1\n{output[-1500:]}")
    except Exception:  # noqa: BLE001 - the property: nothing raises
        case.problems.append("traceback: " + traceback.format_exc()[-2000:])
        return case
    if _tree(directory / "outside") != before:
        case.problems.append(f"write outside: {sorted(set(_tree(directory / 'outside')) - set(before))}")
    for output in outputs_of_run:
        said = output.count("not used")
        if leads_out and said != 1:
            case.problems.append(f"not said once: 'not used' said {said} times\n{output[-1500:]}")
        elif not leads_out and said:
            case.problems.append(f"said: a folder inside the project was refused\n{output[-1500:]}")
    if not leads_out and not any(inside.iterdir()):
        case.problems.append("not used: the folder inside the project holds nothing")
    return case


def _check(project: Path) -> tuple[int, str]:
    from click.testing import CliRunner

    from offload_fixer.cli import main

    cwd = os.getcwd()
    os.chdir(project)
    try:
        result = CliRunner().invoke(main, ["check", "--jax-version", OLD, "src"])
    finally:
        os.chdir(cwd)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def _run(project: Path) -> tuple[int, str]:
    (project / "prog.py").write_text(RUNNABLE + "\nprint(scaled(jnp.ones(2)))\n")
    done = subprocess.run(
        [ENTRY, "run", "prog.py"], cwd=project, capture_output=True, text=True, timeout=300, env=_environment()
    )
    output = done.stdout + done.stderr
    if "Traceback (most recent call last)" in output:
        raise RuntimeError(output[-2000:])
    return done.returncode, output


def _environment() -> dict[str, str]:
    return {**os.environ, "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1", "NO_COLOR": "1"}


def run_state_cases(count: int, seed: int, directory: Path) -> tuple[Counter, list[str]]:
    """``count`` cases, the kinds of link in turn, seeded."""
    rng = random.Random(seed)
    counts: Counter = Counter()
    details = []
    for index in range(count):
        link = LINKS[index % len(LINKS)]
        if link.startswith("run") and not _can_run_programs():
            counts["cases skipped (no pinned_host for the program)"] += 1
            continue
        case_directory = directory / f"state{index:04d}"
        case_directory.mkdir()
        case = state_case(case_directory, rng, link)
        counts[f"{link} cases"] += 1
        for problem in case.problems:
            counts[problem.split(":", 1)[0]] += 1
            details.append(f"{link}: {problem}")
    return counts, details


# ---------------------------------------------------------------------------------------
# A full disk
_ROUND = textwrap.dedent(
    """\
    set -u
    mount -t tmpfs -o size={size}k tmpfs {disk}
    cp -r {template}/. {disk}/
    cd {disk}/proj
    {prepare}
    dd if=/dev/zero of={disk}/fill bs=4096 2>/dev/null
    {command}; echo "first status $?"
    for folder in {folders}; do
      if [ -e "$folder/.gitignore" ]; then echo "gitignore $folder"; od -c "$folder/.gitignore" | head -3; fi
    done
    find . -name '.*.*' -path '*offload-fixer*' | sed 's/^/left after the first /'
    rm {disk}/fill
    {command}; echo "second status $?"
    for folder in {folders}; do echo "then $folder"; cat "$folder/.gitignore" 2>&1 | head -3; done
    find . -name '.*.*' -path '*offload-fixer*' | sed 's/^/left after the second /'
    """
)


@cache
def can_fill_a_disk() -> bool:
    """Whether this machine lets a user mount a small tmpfs in a namespace of its own."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /tmp && touch /tmp/x"],
        capture_output=True,
    )
    return probe.returncode == 0


@cache
def _can_run_programs() -> bool:
    from .bad_input import has_pinned_host

    return ENTRY is not None and has_pinned_host()


@dataclass
class DiskRound:
    command: str
    empty_gitignore: bool
    problems: list[str] = field(default_factory=list)


def full_disk_round(directory: Path, command: str, empty_gitignore: bool) -> DiskRound:
    """``command`` (``check`` or ``run``) on a full disk, then with room again."""
    outcome = DiskRound(command, empty_gitignore)
    template = directory / "template"
    (template / "proj" / "src").mkdir(parents=True)
    (template / "proj" / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (template / "proj" / "src" / "train.py").write_text(FIXABLE)
    (template / "proj" / "prog.py").write_text(RUNNABLE + "\nprint(scaled(jnp.ones(2)))\n")
    disk = directory / "disk"
    disk.mkdir()
    folder = CACHE if command == "check" else LAST_RUN
    prepare = f"mkdir -p {folder} && : > {folder}/.gitignore" if empty_gitignore else ":"
    invocation = (
        f"{shlex.quote(str(ENTRY))} check --jax-version {OLD} src"
        if command == "check"
        else f"{shlex.quote(str(ENTRY))} run prog.py"
    )
    script = _ROUND.format(
        size=512,
        disk=shlex.quote(str(disk)),
        template=shlex.quote(str(template)),
        prepare=prepare,
        command=f"{invocation} >/dev/null 2>{shlex.quote(str(directory / 'err'))}",
        folders=folder,
    )
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script], capture_output=True, text=True, timeout=600, env=_environment()
    )
    output = done.stdout
    errors = (directory / "err").read_text() if (directory / "err").exists() else ""
    if "Traceback (most recent call last)" in errors:
        outcome.problems.append(f"traceback: {errors[-2000:]}")
    for status in ("first", "second"):
        found = next((line.split()[-1] for line in output.splitlines() if line.startswith(f"{status} status")), None)
        if found != str(int(ExitCode.FINDINGS)):
            outcome.problems.append(
                f"wrong exit code: the {status} run exited {found}\n{output[-1500:]}\n{errors[-1500:]}"
            )
    dumps = output.split("gitignore ")[1:] if not empty_gitignore else []  # an empty one stays so with no room
    for dump in dumps:
        octal = dump.split("then ")[0].split("left after")[0]
        if "*" not in octal:
            outcome.problems.append(
                f"partial state file: after the full-disk run, {dump.splitlines()[0]}/.gitignore is {octal!r}"
            )
    then = output.split(f"then {folder}\n", 1)[-1]
    if GITIGNORES[folder] not in then.replace("\r", "") and not then.startswith(GITIGNORES[folder]):
        outcome.problems.append(f"not repaired: {folder}/.gitignore after a run with room: {then[:200]!r}")
    outcome.problems += [
        f"temporary file left: {line}" for line in output.splitlines() if line.startswith("left after")
    ]
    return outcome


def run_full_disk(rounds: int, directory: Path) -> tuple[Counter, list[str]]:
    counts: Counter = Counter()
    details = []
    if not can_fill_a_disk() or ENTRY is None:
        counts["rounds skipped (no unshare and tmpfs here)"] += rounds
        return counts, details
    shapes = [(command, empty) for command in ("check", "run") for empty in (False, True)]
    for index in range(rounds):
        command, empty = shapes[index % len(shapes)]
        if command == "run" and not _can_run_programs():
            counts["rounds skipped (no pinned_host for the program)"] += 1
            continue
        round_directory = directory / f"disk{index:04d}"
        round_directory.mkdir()
        outcome = full_disk_round(round_directory, command, empty)
        counts[f"{command}{', from an empty .gitignore' if empty else ''} rounds"] += 1
        for problem in outcome.problems:
            counts[problem.split(":", 1)[0]] += 1
            details.append(f"{command}{' (empty .gitignore first)' if empty else ''}: {problem}")
    return counts, details


if __name__ == "__main__":  # a quick look: python -m tests.fuzz.state_folders DIRECTORY
    print(run_full_disk(4, Path(sys.argv[1])))
