"""The eager fix's refusals, and the command through libcst's own tool, as a user runs it."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext

from offload_fixer import jax_compat
from offload_fixer.codemods.eager_to_device import EagerTarget, EagerToDeviceCommand
from tests.codemods.test_codemod_commands import libcst_tool

SOURCE = """\
import jax
from jax import device_put

row = device_put(HOST, jax.memory.Space.Device)[::2, 0]
x = 1
y = HOST[::2]
"""


def outcome(**target: object) -> EagerToDeviceCommand:
    command = EagerToDeviceCommand(CodemodContext(), target=EagerTarget(**target))  # type: ignore[arg-type]
    fixed = command.transform_module(cst.parse_module(SOURCE))
    assert fixed.code == SOURCE
    return command


def test_an_operand_moved_to_device_already_is_left_as_it_is() -> None:
    command = outcome(eager_line=4, eager_col=7, eager_end_col=56)
    assert command.satisfied == ["device_put(HOST, jax.memory.Space.Device) on line 4 is moved to device"]
    assert not command.problems and not command.edits


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ({"eager_line": 5, "eager_col": 1}, "no operation on an array at line 5, column 1"),
        ({"eager_line": 6, "eager_col": 5, "operand_index": 1}, "the operation at line 6 has no operand 1 to move"),
        (
            {"eager_line": 6, "eager_col": 5, "spelling": jax_compat.spelling("0.6.2")},
            "JAX 0.6.2 has no jax.memory.Space to move an eager operand to device with",
        ),
        ({"eager_line": 5}, "no eager operation given (--eager-line, --eager-col)"),
    ],
)
def test_what_the_fix_cannot_do_is_said_and_nothing_is_edited(target: dict, problem: str) -> None:
    command = outcome(**target)
    assert command.problems == [problem] and not command.edits


def test_libcst_tool_moves_an_eager_operand(tmp_path: Path) -> None:
    done, program = libcst_tool(
        tmp_path,
        SOURCE,
        "-x offload_fixer.codemods.eager_to_device.EagerToDeviceCommand",
        "--eager-line",
        "6",
        "--eager-col",
        "5",
    )
    assert done.returncode == 0, done.stderr
    assert program.read_text() == SOURCE.replace("y = HOST[::2]", "y = device_put(HOST, jax.memory.Space.Device)[::2]")
