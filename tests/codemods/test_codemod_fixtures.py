"""Before/after fixtures for the codemods: every return shape, out_shardings shape, jit
spelling and version spelling the fixes support.

Each ``NAME.before.py`` carries its case in a header, as LibCST's ``assertCodemod`` keeps the
input beside what is expected of it: one ``# fix: CODEMOD {target fields as JSON}`` line per
edit, the fields of that codemod's own target (``TARGET``; ``jax_version`` picks the
spelling), ``# safety:`` with the expected safety of each edit made in the first pass, in
order, optionally ``# style: {"line_length": 80, "quote": "'"}`` (the project's code style,
as ``offload_fixer.code_style`` reads it: the lines the fix makes are wrapped to it, the
strings it adds take its quotes), and ``# ---``. Line numbers count the lines below the
header. Each case applies its targets the way ``offload_fixer.fixes.apply`` does: to a
fixpoint, so the second pass proving nothing changes is part of every case. The
``NAME.after.py`` files are the exact expected output.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
import pytest
from libcst.codemod import CodemodContext

from offload_fixer import jax_compat
from offload_fixer.code_style import CodeStyle
from offload_fixer.codemods.eager_to_device import EagerToDeviceCommand
from offload_fixer.codemods.fix_command import FixCommand
from offload_fixer.codemods.host_output import HostOutputCommand
from offload_fixer.codemods.move_to_device import MoveToDeviceCommand
from offload_fixer.codemods.pin_host_memory import PinHostMemoryCommand
from offload_fixer.codemods.rename_checkpoint_name import RenameCheckpointNameCommand
from offload_fixer.codemods.targets import FunctionTarget
from offload_fixer.fixes.apply import fix_to_fixpoint, split_lines

FIXTURES = Path(__file__).parent / "fixtures"
COMMANDS: dict[str, type[FixCommand]] = {
    command.__module__.rsplit(".", 1)[-1]: command
    for command in (
        MoveToDeviceCommand,
        HostOutputCommand,
        PinHostMemoryCommand,
        RenameCheckpointNameCommand,
        EagerToDeviceCommand,
    )
}
HEADER_END = "# ---\n"


@dataclass(frozen=True)
class Case:
    fixture: str
    jobs: tuple[tuple[type[FixCommand], FunctionTarget], ...]
    safety: tuple[str, ...]
    """Expected safety of each edit made in the first pass, in order."""
    style: CodeStyle | None
    source: str
    """The before text below the header."""


def read_case(name: str) -> Case:
    """The case a fixture's header holds, and the text below it."""
    header, sep, source = (FIXTURES / f"{name}.before.py").read_text().partition(HEADER_END)
    assert sep, f"{name}.before.py has no header ending in {HEADER_END!r}"
    jobs, safety, style = [], (), None
    for line in header.splitlines():
        if line.startswith("# fix: "):
            command, _, fields = line.removeprefix("# fix: ").partition(" ")
            codemod, target = COMMANDS[command], json.loads(fields)
            if "jax_version" in target:
                target["spelling"] = jax_compat.spelling(target.pop("jax_version"))
            target = {k: tuple(v) if isinstance(v, list) else v for k, v in target.items()}
            jobs.append((codemod, codemod.TARGET(**target)))
        elif line.startswith("# safety: "):
            safety = tuple(line.removeprefix("# safety: ").split())
        elif line.startswith("# style: "):
            style = CodeStyle(**json.loads(line.removeprefix("# style: ")))
    assert jobs, f"{name}.before.py names no fix"
    return Case(name, tuple(jobs), safety, style, source)


CASES = sorted(p.name.removesuffix(".before.py") for p in FIXTURES.glob("*.before.py"))


def run_case(case: Case, source: str) -> tuple[str, int, list[str], set[int]]:
    """(fixed text, passes, safety of each edit, lines of the before text the edits are on)."""
    module = cst.parse_module(source)
    fixed, passes = fix_to_fixpoint(case.fixture, module, case.jobs, style=case.style)
    safeties, lines = [], set()
    for command, target in case.jobs:
        codemod = command(CodemodContext(), target=target)
        codemod.transform_module(module)
        assert not codemod.problems, codemod.problems
        safeties.extend(edit.safety for edit in codemod.edits)
        lines.update(edit.line for edit in codemod.edits)
    return fixed.code, passes, safeties, lines


@pytest.mark.parametrize("name", CASES)
def test_fixture(name: str) -> None:
    case = read_case(name)
    before = case.source
    expected = (FIXTURES / f"{case.fixture}.after.py").read_text()
    after, passes, safeties, _ = run_case(case, before)
    assert after == expected
    assert passes == 2, "the second pass must change nothing"
    assert tuple(safeties) == case.safety
    compile(after, f"{name}.after.py", "exec")


@pytest.mark.parametrize("name", CASES)
def test_fixture_changes_only_edited_lines(name: str) -> None:
    """The diff touches only lines an edit reports, and adds at most one line per edit
    (a new statement or argument line) plus the imports it needs; blank lines (the one before
    a nested ``def`` a new statement lands above) do not count. Under a style, a line an edit
    makes keeps to its length, and the edits unwrapped keep to the rest."""
    case = read_case(name)
    before = case.source
    if case.style is not None:  # its lines wrapped: within the limit, else as unwrapped
        wrapped, _, _, edit_lines = run_case(case, before)
        old, new = split_lines(before), split_lines(wrapped)
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            assert tag == "equal" or set(range(i1 + 1, i2 + 1)) <= edit_lines
            assert tag == "equal" or all(len(line.rstrip("\n")) <= case.style.line_length for line in new[j1:j2])
        case = dataclasses.replace(case, style=None)
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
