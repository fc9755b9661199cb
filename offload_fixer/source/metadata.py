"""libcst's metadata wrapper, without the walk it makes for nothing.

:class:`libcst.metadata.MetadataWrapper` resolves providers in rounds, and each round visits
the whole tree for the batchable ones among them even when there are none: resolving
``PositionProvider`` alone (it is not batchable) walked the tree twice, once to record
positions and once for nothing. On JAX's ``memories_test.py``, whose test class is one
statement of 19,000 nodes, that empty visit was half the cost of locating a finding.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import libcst as cst
import libcst.metadata as metadata
from libcst import BatchableCSTVisitor, CSTNode


class MetadataWrapper(metadata.MetadataWrapper):
    """:class:`libcst.metadata.MetadataWrapper`, whose batched visit with no visitor and no
    callbacks returns the module untouched instead of walking it."""

    def visit_batched(
        self,
        visitors: Iterable[BatchableCSTVisitor],
        before_visit: Callable[[CSTNode], None] | None = None,
        after_leave: Callable[[CSTNode], None] | None = None,
    ) -> CSTNode:
        visitors = list(visitors)
        if not visitors and before_visit is None and after_leave is None:
            return self.module
        return super().visit_batched(visitors, before_visit, after_leave)


def node_positions(module: cst.Module) -> Mapping[CSTNode, metadata.CodeRange]:
    """The code range of every node of ``module`` (:class:`libcst.metadata.PositionProvider`),
    the module used as it is (no copy: its nodes are the caller's)."""
    return MetadataWrapper(module, unsafe_skip_copy=True).resolve(metadata.PositionProvider)
