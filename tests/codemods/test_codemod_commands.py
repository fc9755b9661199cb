"""The codemod commands on their own: pytree paths, what they refuse and why, aliases, and
``python -m libcst.tool codemod`` run the way a user runs it: the installed package, from a
project of their own whose ``.libcst.codemod.yaml`` lists ``offload_fixer.codemods``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import jax
import libcst as cst
import pytest
from libcst.codemod import CodemodContext, SkipFile

from offload_fixer.codemods.host_output import HostOutputCommand
from offload_fixer.codemods.move_to_device import MoveToDeviceCommand

CPU_MEMORY_KINDS = {memory.kind for memory in jax.devices("cpu")[0].addressable_memories()}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A scratch project set up as libcst's docs say: ``initialize``, then our module listed."""
    root = tmp_path / "project"
    root.mkdir()
    subprocess.run(
        [sys.executable, "-m", "libcst.tool", "initialize", "."], cwd=root, check=True, capture_output=True, timeout=120
    )
    config = root / ".libcst.codemod.yaml"
    listed = "- 'libcst.codemod.commands'\n"
    assert listed in config.read_text()
    config.write_text(config.read_text().replace(listed, listed + "- 'offload_fixer.codemods'\n"))
    return root


def run(command: type, source: str, **target: object) -> tuple[str, MoveToDeviceCommand | HostOutputCommand]:
    codemod = command(CodemodContext(), target=command.TARGET(**target))
    module = codemod.transform_module(cst.parse_module(textwrap.dedent(source)))
    return module.code, codemod


def test_missing_function_is_a_problem_not_an_edit() -> None:
    code, codemod = run(MoveToDeviceCommand, "def f(x):\n    return x\n", function_name="g")
    assert code == "def f(x):\n    return x\n"
    assert codemod.problems == ["no function g in this file"]
    assert codemod.context.warnings == codemod.problems


def test_options_from_kwargs_are_not_guessed() -> None:
    source = """\
        import jax

        def f(x, s):
            return x, jax.device_put(x, s)

        g = jax.jit(f, **OPTIONS)
        """
    _, codemod = run(HostOutputCommand, source, function_name="f", output_paths=("[1]",))
    assert not codemod.edits
    assert "**kwargs" in codemod.problems[0]


def test_out_shardings_that_does_not_match_the_output_is_reported() -> None:
    source = """\
        from functools import partial
        import jax

        @partial(jax.jit, out_shardings=(None, None))
        def f(x, s):
            return x, x, jax.device_put(x, s)
        """
    _, codemod = run(HostOutputCommand, source, function_name="f", output_paths=("[2]",))
    assert "does not match the output structure" in codemod.problems[0]


def test_partial_applied_to_the_function_and_aliases_are_reused() -> None:
    source = """\
        from functools import partial as bind
        import jax.numpy
        from jax.sharding import NamedSharding

        HOST = NamedSharding(MESH, SPEC, memory_kind="pinned_host")

        def f(x):
            return x, jax.device_put(x, HOST)

        g = bind(jax.jit, donate_argnums=0)(f)
        """
    code, codemod = run(HostOutputCommand, source, function_name="f", output_paths=("[1]",), origin_line=8)
    assert "g = bind(jax.jit, donate_argnums=0, out_shardings=(None, HOST))(f)\n" in code
    assert codemod.edits[0].safety == "safe"


def test_a_sharding_tree_built_with_dict_call_is_declared_host_leaf_by_leaf() -> None:
    """``dict(w=..., b=...)`` is a container of shardings like ``{"w": ..., "b": ...}`` (it
    used to end the codemod with an AttributeError)."""
    source = """
    import functools
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    MESH = jax.make_mesh((1,), ("x",))
    ON_DEVICE = NamedSharding(MESH, P(), memory_kind="device")
    STATE = dict(w=ON_DEVICE, b=ON_DEVICE)


    @functools.partial(jax.jit, out_shardings=(None, STATE))
    def step(params, state):
        return params, state
    """
    code, codemod = run(HostOutputCommand, source, function_name="step", output_paths=("[1]",))
    assert 'out_shardings=(None, jax.tree.map(lambda s: s.with_memory_kind("pinned_host"), STATE))' in code
    assert not codemod.outcomes[0].problems


def test_move_to_device_reuses_from_import_and_adds_jax() -> None:
    source = """\
        from jax import device_put as put, jit

        @jit
        def f(x, s):
            return put(x, s)
        """
    code, _ = run(MoveToDeviceCommand, source, function_line=3)
    assert code.startswith("from jax import device_put as put, jit\nimport jax\n")
    assert "    return put(put(x, s), jax.memory.Space.Device)\n" in code


def test_bare_tuple_is_parenthesised_when_wrapped_whole() -> None:
    code, _ = run(MoveToDeviceCommand, "import jax\n\ndef f(x, h):\n    return x, h\n", function_line=3)
    assert "    return jax.device_put((x, h), jax.memory.Space.Device)\n" in code
    compile(code, "f.py", "exec")


def test_return_without_value_is_not_an_output() -> None:
    _, codemod = run(MoveToDeviceCommand, "def f(x):\n    return\n", function_line=1)
    assert codemod.problems == ["f has no return with a value to move to device"]


LIBCST_SOURCE = """\
import jax
from jax.sharding import NamedSharding, PartitionSpec as P

host = NamedSharding(jax.make_mesh((1,), ("x",)), P(), memory_kind="pinned_host")


@jax.jit
def f(x):
    h = jax.device_put(x, host)
    return x, h
"""


@pytest.mark.parametrize(
    ("spelling", "flags", "expected"),
    [
        (
            "move_to_device.MoveToDeviceCommand",
            ["--output-path", "[1]"],
            "    return x, jax.device_put(h, jax.memory.Space.Device)\n",
        ),
        (
            "-x offload_fixer.codemods.host_output.HostOutputCommand",
            ["--output-path", "[1]", "--origin-line", "9"],
            "@partial(jax.jit, out_shardings=(None, host))\n",
        ),
    ],
)
def test_libcst_tool_runs_the_commands(project: Path, spelling: str, flags: list[str], expected: str) -> None:
    done, target = libcst_tool(project, LIBCST_SOURCE, spelling, "--function-line", "7", *flags)
    assert done.returncode == 0, done.stderr
    assert expected in target.read_text()


def test_libcst_tool_lists_the_commands(project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "libcst.tool", "list"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    for command in (
        "move_to_device.MoveToDeviceCommand",
        "host_output.HostOutputCommand",
        "pin_host_memory.PinHostMemoryCommand",
        "rename_checkpoint_name.RenameCheckpointNameCommand",
        "eager_to_device.EagerToDeviceCommand",
    ):
        assert command in done.stdout


def test_libcst_tool_runs_a_command_named_in_full_without_a_configuration(tmp_path: Path) -> None:
    done, target = libcst_tool(
        tmp_path,
        LIBCST_SOURCE,
        "-x offload_fixer.codemods.move_to_device.MoveToDeviceCommand",
        "--function-line",
        "7",
        "--output-path",
        "[1]",
    )
    assert done.returncode == 0, done.stderr
    assert "    return x, jax.device_put(h, jax.memory.Space.Device)\n" in target.read_text()


def test_codemods_import_neither_jax_nor_mlir(tmp_path: Path) -> None:
    probe = (
        "import sys, offload_fixer.codemods.host_output, offload_fixer.codemods.move_to_device, "
        "offload_fixer.codemods.pin_host_memory, offload_fixer.codemods.rename_checkpoint_name, "
        "offload_fixer.codemods.eager_to_device; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'jaxlib', 'mlir') "
        "or m.startswith(('offload_fixer.analysis', 'offload_fixer.ir', 'offload_fixer.xla'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "[]"


@pytest.mark.slow
def test_the_wheel_installs_the_codemods_inside_the_package(tmp_path: Path) -> None:
    """No top-level ``codemods`` package lands in site-packages beside the user's own."""
    source = tmp_path / "source"  # a clean copy: setuptools would reuse a checkout's build/
    shutil.copytree(
        Path(__file__).resolve().parents[2],
        source,
        ignore=shutil.ignore_patterns(".venv*", ".git", "build", "*.egg-info", "__pycache__"),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (wheel,) = tmp_path.glob("offload_fixer-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")} == {"offload_fixer"}
    assert "offload_fixer/codemods/move_to_device.py" in names


def libcst_tool(directory: Path, source: str, spelling: str, *flags: str) -> tuple[subprocess.CompletedProcess, Path]:
    """``python -m libcst.tool codemod`` on ``program.py`` in ``directory``, run from there."""
    target = directory / "program.py"
    target.write_text(textwrap.dedent(source))
    command = [
        sys.executable,
        "-m",
        "libcst.tool",
        "codemod",
        *spelling.split(),
        str(target),
        "--no-format",
        "--hide-progress",
        *flags,
    ]
    done = subprocess.run(command, cwd=directory, capture_output=True, text=True, timeout=120, check=False)
    return done, target


def test_libcst_tool_skips_a_file_the_target_does_not_fit(project: Path) -> None:
    """A wrong --function-line is reported by libcst as a skipped file, with the reason."""
    done, target = libcst_tool(
        project, LIBCST_SOURCE, "move_to_device.MoveToDeviceCommand", "--function-line", "99", "--output-path", "[1]"
    )
    assert target.read_text() == LIBCST_SOURCE
    assert "Skipped 1 files" in done.stderr and "Transformed 0 files" in done.stderr
    assert "--function-line 99 is not a line of this file (10 lines)" in done.stderr
    done, _ = libcst_tool(
        project, LIBCST_SOURCE, "move_to_device.MoveToDeviceCommand", "--function-name", "g", "--output-path", "[1]"
    )
    assert "Skipped 1 files" in done.stderr and "no function g in this file" in done.stderr


def test_every_repeated_line_flag_is_checked_against_the_file() -> None:
    """``--return-line`` may be given several times: each one is checked, not only the last."""
    codemod = MoveToDeviceCommand(CodemodContext(), function_line=7, output_path=["[1]"], return_line=[99, 10])
    with pytest.raises(SkipFile, match="--return-line 99 is not a line of this file"):
        codemod.transform_module(cst.parse_module(LIBCST_SOURCE))


def test_libcst_tool_rejects_a_malformed_path(project: Path) -> None:
    done, target = libcst_tool(
        project, LIBCST_SOURCE, "move_to_device.MoveToDeviceCommand", "--function-line", "7", "--output-path", "[1"
    )
    assert done.returncode == 2 and "not a pytree path" in done.stderr
    assert target.read_text() == LIBCST_SOURCE


SHARDING_TREES = """\
import functools

import jax
from jax.sharding import NamedSharding, PartitionSpec as P

MESH = jax.make_mesh((1,), ("x",))
ON_DEVICE = NamedSharding(MESH, P(), memory_kind="device")
MOMENTS = {"w": ON_DEVICE, "b": ON_DEVICE}
OPT_SHARDINGS = {"count": ON_DEVICE, "mu": MOMENTS}


@functools.partial(jax.jit, out_shardings=(None, OPT_SHARDINGS))
def step(params, opt_state):
    return params, opt_state


def make(shardings):
    @functools.partial(jax.jit, out_shardings=shardings)
    def inner(x):
        return x, x

    return inner
"""


@pytest.mark.jax_dependent  # the fixed program runs under the installed JAX
@pytest.mark.parametrize(
    ("path", "expected"),
    [
        # the whole tree: each leaf re-kinded, the variable left alone for its other uses
        ("[1]", 'out_shardings=(None, jax.tree.map(lambda s: s.with_memory_kind("pinned_host"), OPT_SHARDINGS))'),
        # one leaf of it: patched here, not re-kinded as if the dict were a sharding
        (
            "[1]['mu']['w']",
            'out_shardings=(None, {**OPT_SHARDINGS, "mu": {**MOMENTS, "w": ON_DEVICE.with_memory_kind("pinned_host")}})',
        ),
    ],
)
def test_libcst_tool_declares_leaves_of_a_named_sharding_tree(project: Path, path: str, expected: str) -> None:
    done, target = libcst_tool(
        project,
        SHARDING_TREES,
        "-x offload_fixer.codemods.host_output.HostOutputCommand",
        "--function-name",
        "step",
        "--output-path",
        path,
    )
    assert done.returncode == 0 and "Transformed 1 files" in done.stderr, done.stderr
    fixed = target.read_text()
    assert expected in fixed and "OPT_SHARDINGS.with_memory_kind" not in fixed
    assert 'OPT_SHARDINGS = {"count": ON_DEVICE, "mu": MOMENTS}\n' in fixed
    if not {"device", "pinned_host"} <= CPU_MEMORY_KINDS:
        pytest.skip(
            f"the fixed program builds device and pinned_host shardings; this CPU has {sorted(CPU_MEMORY_KINDS)}"
        )
    imported = subprocess.run(
        [sys.executable, str(target)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert imported.returncode == 0, imported.stderr


def test_libcst_tool_does_not_guess_that_a_parameter_is_a_sharding(project: Path) -> None:
    done, target = libcst_tool(
        project,
        SHARDING_TREES,
        "-x offload_fixer.codemods.host_output.HostOutputCommand",
        "--function-name",
        "inner",
        "--output-path",
        "[1]",
    )
    assert target.read_text() == SHARDING_TREES
    assert "Skipped 1 files" in done.stderr
    assert "`shardings`, which the source does not show to be a sharding or a tree of them" in done.stderr


def test_a_return_whose_value_starts_below_it_is_found_by_any_of_its_lines() -> None:
    """A diagnostic points at the returned value's line, below ``return (``."""
    source = """\
        import jax

        def f(x, h):
            return (
                x,
                h,
            )
        """
    for line in (4, 5, 6, 7):
        code, codemod = run(MoveToDeviceCommand, source, function_line=3, output_paths=("[1]",), return_lines=(line,))
        assert "        jax.device_put(h, jax.memory.Space.Device),\n" in code, line
        assert not codemod.problems
    _, codemod = run(MoveToDeviceCommand, source, function_line=3, output_paths=("[1]",), return_lines=(8,))
    assert codemod.problems == ["f has no return with a value to move to device"]


README_SOURCE = """\
import jax


@jax.jit
def step(x, mu):
    y = x * 2.0
    snapshot = jax.device_put(y, jax.memory.Space.Host)
    mu = mu * 0.9
    return y + 1.0, snapshot, {"mu": mu}
"""
"""The README's example of a codemod on its own: a returned tuple whose [1] is offloaded."""
NO_MU = "output ['mu'] names no part of what step returns at line 9: the result is a tuple of 3 ([0], [1], [2])"
MOVE = "-x offload_fixer.codemods.move_to_device.MoveToDeviceCommand"
HOST = "-x offload_fixer.codemods.host_output.HostOutputCommand"
PIN = "-x offload_fixer.codemods.pin_host_memory.PinHostMemoryCommand"
RENAME = "-x offload_fixer.codemods.rename_checkpoint_name.RenameCheckpointNameCommand"


@pytest.mark.parametrize(
    ("spelling", "flags", "reason"),
    [
        (MOVE, ["--output-path", "['mu']"], NO_MU),
        (MOVE, ["--output-path", "[7]"], "output [7] names no part of what step returns at line 9: the result is"),
        (MOVE, ["--output-path", "[2]['nope']"], "[2] is a dict of 1 (['mu'])"),
        (MOVE, ["--output-path", "[1]", "--output-path", "['mu']"], NO_MU),  # one wrong path: nothing written
        (MOVE, ["--function-name", "train"], "no function train in this file"),
        (MOVE, ["--function-line", "2"], "no function at line 2 in this file"),
        (MOVE, ["--function-line", "40"], "--function-line 40 is not a line of this file (9 lines)"),
        (MOVE, ["--placement", "entry", "--parameter", "params"], "--parameter params names no parameter of step"),
        (MOVE, ["--placement", "entry"], "give --parameter or --parameter-index"),
        (
            MOVE,
            ["--placement", "operand"],
            "--placement operand needs --origin-line (the line of the move to host) and",
        ),
        (MOVE, ["--placement", "after_origin"], "--placement after_origin needs --origin-line"),
        (MOVE, ["--placement", "after_origin", "--origin-line", "6"], "no `name = device_put(...)` statement"),
        (HOST, ["--output-path", "['mu']"], NO_MU),
        (HOST, ["--output-path", "[2]['nope']"], "[2] is a dict of 1 (['mu'])"),
        (HOST, ["--function-name", "train"], "no function train in this file"),
        (PIN, [], "no move to host given (--origin-line)"),
        (PIN, ["--origin-line", "6"], "no device_put or offload policy destination on line 6"),
        (PIN, ["--origin-line", "7"], "the destination of the move on line 7 spells no memory kind"),
        (PIN, ["--origin-line", "99"], "--origin-line 99 is not a line of this file (9 lines)"),
        (RENAME, [], "no offloaded name given (--origin-line)"),
        (RENAME, ["--origin-line", "7"], "no one name an offload policy offloads on line 7"),
        (RENAME, ["--origin-line", "99"], "--origin-line 99 is not a line of this file (9 lines)"),
    ],
)
def test_each_codemod_refuses_what_it_cannot_do_and_says_why(
    tmp_path: Path, spelling: str, flags: list[str], reason: str
) -> None:
    """A target that does not fit the file skips it with the reason, whatever the command: never
    an edit of the whole return, or of another part, in place of the one asked for."""
    function_line = [] if "--function-name" in flags or "--function-line" in flags else ["--function-line", "4"]
    done, target = libcst_tool(tmp_path, README_SOURCE, spelling, *function_line, *flags)
    assert target.read_text() == README_SOURCE
    assert done.returncode == 0 and "Transformed 0 files" in done.stderr and "Skipped 1 files" in done.stderr
    assert reason in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("spelling", "flags", "message"),
    [
        (MOVE, ["--output-path", "[1"], "argument --output-path: not a pytree path: '[1'"),
        (MOVE, ["--output-path", "mu"], "argument --output-path: not a pytree path: 'mu'"),
        (MOVE, ["--function-line", "0"], "argument --function-line: not a line number: '0'"),
        (MOVE, ["--placement", "inside"], "argument --placement: invalid choice: 'inside'"),
        (HOST, ["--jax-version", "9.9"], "argument --jax-version: JAX 9.9 is newer than what offload-fixer models"),
        (HOST, ["--output-kind", "[1]"], "argument --output-kind: expected PATH=KIND, got '[1]'"),
        (PIN, ["--origin-line", "x"], "argument --origin-line: not a line number: 'x'"),
        (RENAME, ["--origin-line", "7", "--origin-col", "0"], "argument --origin-col: not a column number: '0'"),
    ],
)
def test_each_codemods_malformed_flags_are_usage_errors(
    tmp_path: Path, spelling: str, flags: list[str], message: str
) -> None:
    done, target = libcst_tool(tmp_path, README_SOURCE, spelling, "--function-line", "4", *flags)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert target.read_text() == README_SOURCE


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        ("[1] (flat output 1)", '    return y + 1.0, jax.device_put(snapshot, jax.memory.Space.Device), {"mu": mu}\n'),
        ("output [1]", '    return y + 1.0, jax.device_put(snapshot, jax.memory.Space.Device), {"mu": mu}\n'),
        (
            "[2]['mu'] (flat output 2) from mu",
            '    return y + 1.0, snapshot, {"mu": jax.device_put(mu, jax.memory.Space.Device)}\n',
        ),
        (
            "the whole result",
            '    return jax.device_put((y + 1.0, snapshot, {"mu": mu}), jax.memory.Space.Device)\n',
        ),
    ],
)
def test_output_path_takes_the_spellings_the_reports_print(tmp_path: Path, shown: str, expected: str) -> None:
    """What `run` and `check` print for an output (``[1] (flat output 1)``, ``the whole result``)
    can be pasted into ``--output-path`` as it is."""
    done, target = libcst_tool(tmp_path, README_SOURCE, MOVE, "--function-line", "4", "--output-path", shown)
    assert done.returncode == 0 and "Transformed 1 files" in done.stderr, done.stderr
    assert expected in target.read_text()


def test_a_move_of_more_than_the_path_warns_why(tmp_path: Path) -> None:
    """Where the source does not show the structure (a call's result), the whole value moves, and
    the tool's output says so: the unsafe reason the planner would label the fix with."""
    source = README_SOURCE.replace('return y + 1.0, snapshot, {"mu": mu}', "return pack(y + 1.0, snapshot)")
    done, target = libcst_tool(tmp_path, source, MOVE, "--function-line", "4", "--output-path", "[1]")
    assert "jax.device_put(pack(y + 1.0, snapshot), jax.memory.Space.Device)" in target.read_text()
    assert "1 warnings were generated" in done.stderr
    assert "unsafe: the source does not show where the result is inside `pack(y + 1.0, snapshot)`" in done.stderr
