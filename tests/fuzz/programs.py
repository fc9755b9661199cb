"""``run`` in a real program's life: programs that fork, that compile from ``atexit`` handlers,
that edit the interpreter's state, and that spell an ``unpinned_host`` sharding.

Each program jits a function whose value moves to host and is computed on there (a finding
``--fix`` fixes), and runs as ``__main__`` under the installed ``offload-fixer run`` (with
``--fix`` in some variants). What must hold:

* ``fork``: the child ends as the program says (``sys.exit``, ``os._exit``, an exception,
  ``SystemExit(3)``; it never calls a jit: JAX after ``fork`` deadlocks, as JAX warns); the run
  reports once, from the process that started it, fixes the file
  once (``--fix``: exit 0 and the fix in the file, never "fix refused"), else exits 1;
* ``atexit``: a jit first called from a handler (registered by call or decorator, a handler
  that fails beside it) is checked: one compilation, its finding, and the report after what
  the handler printed;
* ``interpreter state``: a program that deletes the tool's modules, empties ``sys.modules``,
  blocks an import with ``None``, leaves ``sys.stdout`` replaced or changes directory still
  gets its report and its fix, and no traceback;
* ``unpinned_host``: each spelling of an ``unpinned_host`` sharding, a computed value moved
  there and returned beside a device output, is judged by ``run`` as the released TPU compiler
  judges it (``run --confirm``: its verdict "as predicted"), error 1200 included, and is found
  (``OFL1204``: the move is in the module ``run`` analyses).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from .bad_input import ENTRY, has_pinned_host

TIMEOUT_S = 300
PROGRAM_FAILURES = ("traceback", "reports", "wrong exit code", "not fixed", "fix refused", "not checked", "order")
HEAD = textwrap.dedent(
    """\
    import atexit
    import os
    import sys

    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


    @jax.jit
    def scaled(x):
        h = jax.device_put(x, HOST)
        return h * 2


    """
)
CHILD_ENDS = {
    "sys.exit": "sys.exit(0)",
    "os._exit": "os._exit(0)",
    "an exception": 'raise RuntimeError("the child fails")',
    "work, then sys.exit": "print(sum(range(10))); sys.exit(0)",
    "SystemExit(3)": "raise SystemExit(3)",
}
HANDLERS = {
    "registered by call": "atexit.register(lambda: print('at exit', scaled(jnp.ones(2))))",
    "registered as a decorator": "@atexit.register\ndef goodbye():\n    print('at exit', scaled(jnp.ones(2)))",
    "with arguments": "atexit.register(lambda n: print('at exit', scaled(jnp.ones(n))), 2)",
    "beside a failing one": (
        "atexit.register(lambda: print('at exit', scaled(jnp.ones(2))))\natexit.register(lambda: 1 / 0)"
    ),
}
STATE_EDITS = {
    "deletes the tool's modules": (
        "    for name in [n for n in sys.modules if n.startswith('offload_fixer')]:\n        del sys.modules[name]"
    ),
    "keeps only the modules it started with": (
        "    for name in [n for n in sys.modules if n not in START]:\n        del sys.modules[name]\n"
        "    for name in [n for n in sys.modules if n.startswith(('offload_fixer', 'libcst', 'click'))]:\n"
        "        del sys.modules[name]"
    ),
    "blocks an import with None": "    sys.modules['difflib'] = None\n    sys.modules['libcst'] = None",
    "leaves sys.stdout replaced": "    import io\n    sys.stdout = io.StringIO()",
    "changes directory": "    os.chdir(os.path.dirname(os.path.abspath(__file__)) + '/elsewhere')",
}
UNPINNED = {
    "SingleDeviceSharding": 'SingleDeviceSharding(jax.devices()[0], memory_kind="unpinned_host")',
    "NamedSharding on a Mesh": (
        'NamedSharding(jax.sharding.Mesh(jax.devices()[:1], ("x",)), P(), memory_kind="unpinned_host")'
    ),
    "NamedSharding on make_mesh": 'NamedSharding(jax.make_mesh((1,), ("x",)), P(), memory_kind="unpinned_host")',
    "NamedSharding on an Auto make_mesh": (
        "NamedSharding(jax.make_mesh((1,), ('x',), axis_types=(jax.sharding.AxisType.Auto,)), P(), "
        'memory_kind="unpinned_host")'
    ),
    "with_memory_kind": 'NamedSharding(jax.sharding.Mesh(jax.devices()[:1], ("x",)), P()).with_memory_kind("unpinned_host")',
}


@dataclass
class ProgramCase:
    kind: str
    label: str
    text: str
    fix: bool = False
    problems: list[str] = field(default_factory=list)


def fork_case(rng: random.Random) -> ProgramCase:
    end = rng.choice(list(CHILD_ENDS))
    fix = rng.random() < 0.6
    main = textwrap.dedent(
        f"""\
        def main():
            print(scaled(jnp.ones(2)))
            pid = os.fork()
            if pid == 0:
                {CHILD_ENDS[end]}
            os.waitpid(pid, 0)


        if __name__ == "__main__":
            main()
        """
    )
    return ProgramCase("fork", f"the child ends by {end}{', --fix' if fix else ''}", HEAD + main, fix)


def atexit_case(rng: random.Random) -> ProgramCase:
    handler = rng.choice(list(HANDLERS))
    main = f'\ndef main():\n    print("main done")\n\n\nif __name__ == "__main__":\n    {HANDLERS[handler].replace(chr(10), chr(10) + "    ")}\n    main()\n'
    return ProgramCase("atexit", f"a jit first called at exit, {handler}", HEAD + main)


def state_case(rng: random.Random) -> ProgramCase:
    edit = rng.choice(list(STATE_EDITS))
    main = (
        "START = set(sys.modules)\n\n\ndef main():\n    print(scaled(jnp.ones(2)))\n"
        + STATE_EDITS[edit]
        + '\n\n\nif __name__ == "__main__":\n    main()\n'
    )
    return ProgramCase("interpreter state", f"the program {edit}, --fix", HEAD + main, fix=True)


def unpinned_case(rng: random.Random) -> ProgramCase:
    spelling = rng.choice(list(UNPINNED))
    text = textwrap.dedent(
        f"""\
        import jax
        import jax.numpy as jnp
        from jax.sharding import NamedSharding, PartitionSpec as P, SingleDeviceSharding

        SNAPSHOT = {UNPINNED[spelling]}


        @jax.jit
        def step(x):
            y = x * 2
            return y + 1, jax.device_put(y, SNAPSHOT)


        if __name__ == "__main__":
            print(step(jnp.ones(4)))
        """
    )
    return ProgramCase("unpinned_host", f"unpinned_host as {spelling}", text)


MAKERS = {"fork": fork_case, "atexit": atexit_case, "interpreter state": state_case, "unpinned_host": unpinned_case}


@cache
def can_run_programs() -> bool:
    return ENTRY is not None and has_pinned_host()


@cache
def _has_tpu_compiler() -> bool:
    from offload_fixer.xla import compilers

    return compilers.installed("tpu") is not None


def run_program_case(case: ProgramCase, directory: Path) -> list[str]:
    (directory / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (directory / "elsewhere").mkdir()
    program = directory / "prog.py"
    program.write_text(case.text)
    arguments = ["--fix", "--unsafe-fixes"] if case.fix else ["--confirm"] if case.kind == "unpinned_host" else []
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1", "NO_COLOR": "1"}
    try:
        done = subprocess.run(
            [ENTRY, "run", *arguments, program.name],
            cwd=directory,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return [f"traceback: still running after {TIMEOUT_S} s"]
    output = done.stdout + done.stderr
    problems = []
    tool = [line for line in output.splitlines() if "the child fails" not in line and "ZeroDivisionError" not in line]
    if "Traceback (most recent call last)" in output and case.kind != "atexit" and "an exception" not in case.label:
        problems.append(f"traceback: {output[-2500:]}")
    summaries = re.findall(r"^(?:Found \d+ problem|All checks passed)", done.stdout, re.M)
    if len(summaries) != 1:
        problems.append(f"reports: {len(summaries)} reports, not one\n{output[-2500:]}")
    if "fix refused" in output:
        problems.append(f"fix refused: {[line for line in tool if 'fix refused' in line]}")
    if case.fix:
        if done.returncode != 0:
            problems.append(f"wrong exit code: {done.returncode}, expected 0 (fixed)\n{output[-2500:]}")
        if "jax.memory.Space.Device" not in program.read_text() and "memory_kind" not in program.read_text():
            problems.append(f"not fixed: the file holds no fix\n{output[-2500:]}")
    elif case.kind == "unpinned_host":
        if "as predicted" not in output and "confirmed by libtpu" not in output:
            problems.append(f"not checked: the compiler's verdict and run's differ\n{output[-2500:]}")
        if "OFL1204" not in done.stdout:
            problems.append(f"not checked: the move to unpinned_host is not found\n{output[-2500:]}")
    elif done.returncode != 1:
        problems.append(f"wrong exit code: {done.returncode}, expected 1 (a finding)\n{output[-2500:]}")
    if case.kind == "atexit":
        if "checked 1 distinct compilation" not in output:
            problems.append(f"not checked: the jit at exit was not checked\n{output[-2500:]}")
        elif done.stdout.find("at exit") > done.stdout.find("OFL1201") or "OFL1201" not in done.stdout:
            problems.append(f"order: the report is not after what the handler printed\n{done.stdout[-2500:]}")
    return problems


def run_programs(count: int, seed: int, directory: Path) -> tuple[Counter, list[str]]:
    """``count`` programs, the kinds in turn, seeded."""
    rng = random.Random(seed)
    counts: Counter = Counter()
    details = []
    if not can_run_programs():
        counts["programs skipped (no pinned_host for the programs)"] += count
        return counts, details
    kinds = list(MAKERS)
    for index in range(count):
        case = MAKERS[kinds[index % len(kinds)]](rng)
        if case.kind == "unpinned_host" and not _has_tpu_compiler():
            counts["programs skipped (no TPU compiler for --confirm)"] += 1
            continue
        case_directory = directory / f"program{index:04d}"
        case_directory.mkdir()
        case.problems = run_program_case(case, case_directory)
        counts[f"{case.kind} programs"] += 1
        for problem in case.problems:
            counts[problem.split(":", 1)[0]] += 1
            details.append(f"{case.label}: {problem[:3000]}")
    return counts, details
