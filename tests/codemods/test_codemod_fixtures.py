"""Before/after fixtures for both codemods: every return shape, out_shardings shape, jit
spelling and version spelling the fixes support.

Each case applies its targets (line numbers of the *before* file) the way
``offload_fixer.fixes.apply`` does: to a fixpoint, so the second pass proving nothing
changes is part of every case. The ``after`` files are the exact expected output.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext

from offload_fixer import jax_compat
from offload_fixer.codemods.fix_command import FixCommand
from offload_fixer.codemods.host_output import HostOutputCommand
from offload_fixer.codemods.move_to_device import MoveToDeviceCommand
from offload_fixer.codemods.pin_host_memory import PinHostMemoryCommand
from offload_fixer.codemods.targets import FixTarget
from offload_fixer.fixes.apply import fix_to_fixpoint, split_lines

FIXTURES = Path(__file__).parent / "fixtures"
OLD_JAX = jax_compat.spelling("0.7.0")
"""The last JAX without ``jax.memory.Space``: moves spelled with ``memory_kind=``."""


@dataclass(frozen=True)
class Case:
    fixture: str
    jobs: tuple[tuple[type[FixCommand], FixTarget], ...]
    safety: tuple[str, ...]
    """Expected safety of each edit made in the first pass, in order."""


def md(**kwargs: object) -> tuple[type[FixCommand], FixTarget]:
    return MoveToDeviceCommand, FixTarget(**kwargs)  # type: ignore[arg-type]


def ho(**kwargs: object) -> tuple[type[FixCommand], FixTarget]:
    return HostOutputCommand, FixTarget(**kwargs)  # type: ignore[arg-type]


def pin(**kwargs: object) -> tuple[type[FixCommand], FixTarget]:
    return PinHostMemoryCommand, FixTarget(placement="pin_memory", **kwargs)  # type: ignore[arg-type]


CASES = {
    # unpinned_host spelled pinned_host at the move: in the call, through a name (shared:
    # unsafe), through with_memory_kind
    "pin_memory": Case(
        "pin_memory",
        (
            pin(function_line=8, origin_line=9, origin_col=12),
            pin(function_line=14, origin_line=15, origin_col=12),
            pin(function_line=19, origin_line=21, origin_col=12),
        ),
        ("safe", "unsafe", "safe"),
    ),
    # move to device: return shapes
    "md_return_name": Case(
        "md_return_name",
        (
            md(function_name="offload", function_line=9),
            md(function_name="offload_sin", inner_line=19),
        ),
        ("safe", "safe"),
    ),
    "md_return_containers": Case(
        "md_return_containers",
        (
            md(function_line=9, output_paths=("[1]",)),
            md(function_line=15, output_paths=("[1]",)),
            md(function_line=21, output_paths=("['offloaded']",)),
            md(function_line=27, output_paths=("['offloaded']",)),
        ),
        ("safe",) * 4,
    ),
    "md_nested": Case("md_nested", (md(function_line=8, output_paths=("['opt'][0]",)),), ("safe",)),
    "md_several_returns": Case(
        "md_several_returns",
        (md(function_name="step", inner_line=11, output_paths=("[0]",)),),
        ("safe", "safe"),
    ),
    "md_assignment": Case(
        "md_assignment",
        (
            md(function_line=8, output_paths=("[1]",)),
            md(function_line=15, output_paths=("['w']",)),
        ),
        ("safe", "unsafe"),
    ),
    "md_entry": Case(
        "md_entry",
        (
            md(
                function_line=11,
                placement="entry",
                parameter="params",
                spelling=OLD_JAX,
            ),
        ),
        ("safe",),  # the move where a streamed argument enters is the intended fix
    ),
    # a nested def right after the move keeps the blank line PEP 8 wants before it
    "md_entry_before_def": Case(
        "md_entry_before_def",
        (
            md(function_line=11, placement="entry", parameter="weights"),
            md(function_line=19, placement="entry", parameter="weights"),
        ),
        ("safe", "safe"),
    ),
    "md_aliases": Case("md_aliases", (md(function_line=9),), ("safe",)),
    "md_no_jax_module": Case("md_no_jax_module", (md(function_line=9),), ("safe",)),
    "md_transfer": Case(
        "md_transfer",
        (
            md(
                function_line=5,
                placement="after_origin",
                origin_line=7,
                spelling=OLD_JAX,
            ),
        ),
        ("unsafe",),
    ),
    # a name bound to TransferToMemoryKind(...): that call respelled (the object has no with_memory_kind)
    "md_transfer_named": Case(
        "md_transfer_named",
        (md(function_line=7, output_paths=("[1]",), origin_line=9, spelling=OLD_JAX),),
        ("safe",),
    ),
    "md_derived": Case(
        "md_derived",
        (md(function_line=4, output_paths=("[0]",), origin_line=6, spelling=OLD_JAX),),
        ("safe",),
    ),
    "md_fallback": Case(
        "md_fallback",
        (md(function_line=9, output_paths=("[0]",), origin_line=6, spelling=OLD_JAX),),
        ("unsafe",),
    ),
    "md_method": Case(
        "md_method",
        (
            md(
                function_name="Trainer.step",
                function_line=11,
                output_paths=("[1]",),
                origin_line=13,
                origin_col=23,
                spelling=OLD_JAX,
            ),
        ),
        ("safe",),
    ),
    # host output: jit spellings and out_shardings shapes
    "ho_decorators": Case(
        "ho_decorators",
        (
            ho(function_line=13, output_paths=("[1]",), origin_line=15),
            ho(function_line=19, output_paths=("[1]",), origin_line=21),
            ho(function_line=25, output_paths=("[1]",), origin_line=27),
            ho(function_line=31, output_paths=("['saved']",), origin_line=33),
        ),
        ("safe",) * 4,
    ),
    "ho_existing": Case(
        "ho_existing",
        (
            ho(function_line=11, output_paths=("[1]",)),
            ho(function_line=17, output_paths=("[1]",)),
            ho(function_line=22, output_paths=("[1][0]",)),
            ho(function_line=28, output_paths=("['b']",)),
        ),
        ("safe",) * 4,
    ),
    "ho_calls": Case(
        "ho_calls",
        (
            ho(function_name="step", output_paths=("[1]",), origin_line=11),
            ho(function_name="positional", output_paths=("[1]",), origin_line=16),
            ho(function_name="multiline", output_paths=("['mu']",), origin_line=21),
            ho(function_name="inline", origin_line=26),
        ),
        ("safe", "safe", "safe", "unsafe"),
    ),
    "ho_nested": Case(
        "ho_nested",
        (
            ho(function_line=11, output_paths=("[1]['mu']",), origin_line=13),
            ho(function_line=18, output_paths=("['h']",), origin_line=20),
            ho(function_line=26, output_paths=("[1]",), origin_line=28),
        ),
        ("safe", "safe", "safe"),
    ),
    "ho_method": Case(
        "ho_method",
        (
            ho(
                function_name="forward",
                function_line=11,
                output_paths=("[1]",),
                origin_line=13,
            ),
            ho(function_name="backward", function_line=19, origin_line=20),
        ),
        ("safe", "safe"),
    ),
    "ho_typed_gap": Case(
        "ho_typed_gap",
        (ho(function_line=9, parameter="params", output_paths=("[0]",)),),
        ("safe",),
    ),
    "ho_fallback": Case(
        "ho_fallback",
        (ho(function_line=4, output_paths=("[1]",), origin_line=6),),
        ("unsafe",),
    ),
}


def run_case(case: Case, source: str) -> tuple[str, int, list[str], set[int]]:
    """(fixed text, passes, safety of each edit, lines of the before text the edits are on)."""
    module = cst.parse_module(source)
    fixed, passes = fix_to_fixpoint(case.fixture, module, case.jobs)
    safeties, lines = [], set()
    for command, target in case.jobs:
        codemod = command(CodemodContext(), target=target)
        codemod.transform_module(module)
        assert not codemod.problems, codemod.problems
        safeties.extend(edit.safety for edit in codemod.edits)
        lines.update(edit.line for edit in codemod.edits)
    return fixed.code, passes, safeties, lines


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture(name: str) -> None:
    case = CASES[name]
    before = (FIXTURES / f"{case.fixture}.before.py").read_text()
    expected = (FIXTURES / f"{case.fixture}.after.py").read_text()
    after, passes, safeties, _ = run_case(case, before)
    assert after == expected
    assert passes == 2, "the second pass must change nothing"
    assert tuple(safeties) == case.safety
    compile(after, f"{name}.after.py", "exec")


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixture_changes_only_edited_lines(name: str) -> None:
    """The diff touches only lines an edit reports, and adds at most one line per edit
    (a new statement or argument line) plus the imports it needs; blank lines (the one before
    a nested ``def`` a new statement lands above) do not count."""
    case = CASES[name]
    before = (FIXTURES / f"{case.fixture}.before.py").read_text()
    after, _, safeties, edit_lines = run_case(case, before)
    old, new = split_lines(before), split_lines(after)
    changed: set[int] = set()
    added = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            changed.update(range(i1 + 1, i2 + 1))
            added += sum(1 for line in new[j1:j2] if line.strip()) - sum(1 for line in old[i1:i2] if line.strip())
    assert changed or added, "a fixture that changes nothing tests nothing"
    assert changed <= edit_lines
    imports = sum(1 for line in new if re.match(r"(import|from) ", line)) - sum(
        1 for line in old if re.match(r"(import|from) ", line)
    )
    assert 0 <= added <= len(safeties) + imports
