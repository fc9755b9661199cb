"""Respell a name a remat offload policy offloads as the ``checkpoint_name`` tag it misspells
(OFL1211: ``names_which_can_be_offloaded=["hiden"]`` where the model tags ``"hidden"``).

Such a policy offloads nothing: no value carries the name. The command finds the name's
literal in the policy call at ``--origin-line`` (and ``--origin-col``), reads every tag the
file's ``checkpoint_name`` calls give, and respells the literal as the one tag close to it.
It edits nothing where the file computes a tag (which names are tagged, it cannot tell), where
several tags are as close (which was meant, only the author knows), or where the name is
tagged already. A policy may sit at module level: no function is needed.

    python -m libcst.tool codemod --no-format rename_checkpoint_name.RenameCheckpointNameCommand train.py --origin-line 10
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import libcst as cst

from offload_fixer.codemods.fix_command import FixCommand
from offload_fixer.codemods.source_facts import FunctionInfo
from offload_fixer.codemods.targets import FunctionTarget, Placement
from offload_fixer.codes import OFFLOAD_DOES_NOTHING
from offload_fixer.source.checkpoint_names import TAGGING, close_tags, offloaded_names, tag_of


@dataclass(frozen=True)
class RenameTarget(FunctionTarget):
    """The offloaded name's literal that is respelled."""

    origin_line: int | None = None
    origin_col: int | None = None
    file_words: ClassVar[tuple[str, ...]] = (TAGGING,)
    """Every ``checkpoint_name`` of the file: the tags the name is compared with."""


class RenameCheckpointNameCommand(FixCommand):
    DESCRIPTION = "Respell a name a remat offload policy offloads as the checkpoint_name tag it misspells."
    STRATEGY = "host"
    FIXES: ClassVar[Mapping[Placement, frozenset[str]]] = {"rename_name": frozenset({OFFLOAD_DOES_NOTHING})}
    NEEDS_FUNCTION = False
    TARGET: ClassVar[type[FunctionTarget]] = RenameTarget
    target: RenameTarget

    def plan(self, function: FunctionInfo | None) -> None:
        target = self.target
        if target.origin_line is None:
            self.report_problem("no offloaded name given (--origin-line)")
            return
        names: list[cst.SimpleString] = []
        tags: list[cst.BaseExpression] = []

        class Finder(cst.CSTVisitor):
            def visit_Call(self, node: cst.Call) -> None:
                names.extend(offloaded_names(node) or ())
                tag = tag_of(node)
                if tag is not None:
                    tags.append(tag)

        self.facts.module.visit(Finder())
        here = [
            node
            for node in names
            if self.facts.line(node) == target.origin_line
            and (target.origin_col is None or self._column(node) == target.origin_col)
        ]
        if len(here) != 1 or not isinstance(name := here[0].evaluated_value, str):
            self.report_problem(f"no one name an offload policy offloads on line {target.origin_line}")
            return
        spelled = [tag.evaluated_value for tag in tags if isinstance(tag, cst.SimpleString)]
        if len(spelled) != len(tags):
            self.report_problem("a checkpoint_name of the file computes its name: which names are tagged is unknown")
            return
        if name in spelled:
            self.already(f"{name!r} on line {target.origin_line} is tagged")
            return
        close = close_tags(name, [tag for tag in spelled if isinstance(tag, str)])
        if not close:
            self.report_problem(f"{name!r} is close to no tag of the file")
            return
        if len(close) > 1:
            found = ", ".join(repr(tag) for tag in close)
            self.report_problem(f"{name!r} is close to several tags ({found}): which was meant, only the author knows")
            return
        (tag,) = close
        node = here[0]
        if self.claim(node, lambda old: _respelled(old, tag)):
            self.record(node, f"offloaded name {name!r} -> {tag!r}, the name checkpoint_name tags", [], repr(tag))

    def _column(self, node: cst.CSTNode) -> int:
        """The 1-based column a diagnostic's span gives for ``node``."""
        return self.facts.positions[node].start.column + 1


def _respelled(node: cst.CSTNode, tag: str) -> cst.CSTNode:
    """The literal with ``tag`` for its text, in its own quotes and prefix."""
    assert isinstance(node, cst.SimpleString)
    quote = node.quote
    return node.with_changes(value=f"{node.prefix}{quote}{tag}{quote}")
