"""Where a remat offload policy names its destination memory kind in source, for the static
check (OFL1204 on ``"unpinned_host"``) and the codemod that spells it ``"pinned_host"``."""

from __future__ import annotations

import libcst as cst

from offload_fixer.model import DEVICE, UNPINNED_HOST
from offload_fixer.source.bindings import last_name

POLICY_DESTINATION_KEYWORDS = ("offload_dst", "dst")
POLICY_DESTINATION_POSITIONS = {"offload_dot_with_no_batch_dims": 1, "Offloadable": 1}
"""Offload policies (and ``Offloadable``) whose destination is a positional argument, and its index."""


NO_OFFLOAD_DESTINATIONS = (UNPINNED_HOST, DEVICE)
"""Destinations through which a policy offloads nothing: JAX types ``unpinned_host`` as device
memory (OFL1204), and ``device`` is where the residuals already are (OFL1211)."""


def policy_destinations(call: cst.Call) -> list[cst.BaseExpression]:
    """The destinations a remat offload policy call names: ``offload_dst=``/``dst=``, or the
    positional destination of ``offload_dot_with_no_batch_dims``/``Offloadable``."""
    position = POLICY_DESTINATION_POSITIONS.get(last_name(call.func) or "")
    found = []
    for index, arg in enumerate(call.args):
        named = arg.keyword is not None and arg.keyword.value in POLICY_DESTINATION_KEYWORDS
        if named or (arg.keyword is None and not arg.star and index == position):
            found.append(arg.value)
    return found
