"""The diagnostic codes, each spelled once (mypy's ``errorcodes``): code -> rule name, and who checks it.

Every module that makes, compares or groups diagnostics names a code through these constants;
what a code means (its severities, XLA's message, prose, examples, fixes) is its rule's page in
:mod:`offload_fixer.rules`. This module imports nothing, so the XLA model, the static check, the
oracle and the fix planner can all use it without importing the rule pages.
"""

from __future__ import annotations

from typing import Final

HOST_VALUE_DEVICE_OUTPUT: Final = "OFL1200"
DEVICE_COMPUTE_ON_HOST: Final = "OFL1201"
HOST_UPDATE_INTO_DEVICE_BUFFER: Final = "OFL1202"
UNPINNED_HOST_MEMORY: Final = "OFL1204"
HOST_VALUE_IN_WHILE_CONDITION: Final = "OFL1205"
HOST_SLICE_NOT_MOVED_TO_DEVICE: Final = "OFL1206"
BACKEND_CANNOT_BUILD_HOST_COMPUTE: Final = "OFL1207"
HOST_SLICE_IN_SEVERAL_DIMENSIONS: Final = "OFL1208"
DONATED_BUFFER_IN_OTHER_MEMORY: Final = "OFL1209"
HOST_COPY_LANE_SLICE: Final = "OFL1210"
OFFLOAD_DOES_NOTHING: Final = "OFL1211"
HOST_STACK_OF_INNER_LOOP: Final = "OFL1212"
HOST_STRIDED_SLICE_TO_DEVICE: Final = "OFL1213"
HOST_LANES_UPDATED_BY_LAYOUT: Final = "OFL1214"
MIXED_MEMORY_SPACES: Final = "OFL1215"
HOST_ALIASED_INTO_ONE_RESULT: Final = "OFL1216"

NAMES: Final[dict[str, str]] = {
    HOST_VALUE_DEVICE_OUTPUT: "host-value-device-output",
    DEVICE_COMPUTE_ON_HOST: "device-compute-on-host",
    HOST_UPDATE_INTO_DEVICE_BUFFER: "host-update-into-device-buffer",
    UNPINNED_HOST_MEMORY: "unpinned-host-memory",
    HOST_VALUE_IN_WHILE_CONDITION: "host-value-in-while-condition",
    HOST_SLICE_NOT_MOVED_TO_DEVICE: "host-slice-not-moved-to-device",
    BACKEND_CANNOT_BUILD_HOST_COMPUTE: "host-compute-the-backend-cannot-build",
    HOST_SLICE_IN_SEVERAL_DIMENSIONS: "host-slice-in-several-dimensions",
    DONATED_BUFFER_IN_OTHER_MEMORY: "donated-buffer-in-other-memory",
    HOST_COPY_LANE_SLICE: "host-copy-lane-slice",
    OFFLOAD_DOES_NOTHING: "offload-does-nothing",
    HOST_STACK_OF_INNER_LOOP: "host-stack-of-inner-loop",
    HOST_STRIDED_SLICE_TO_DEVICE: "host-strided-slice-to-device",
    HOST_LANES_UPDATED_BY_LAYOUT: "host-lanes-updated-by-layout",
    MIXED_MEMORY_SPACES: "mixed-memory-spaces",
    HOST_ALIASED_INTO_ONE_RESULT: "host-aliased-into-one-result",
}
"""Each code's rule name (``offload-fixer rules NAME``, SARIF's ``rules[].name``), in code order."""
ALL_CODES: Final[tuple[str, ...]] = tuple(NAMES)
"""OFL1203 (XLA aborting on a multi-operand starting instruction) was retired: no released
compiler fails that check. Its number is not reused."""

STATIC_CODES: Final[frozenset[str]] = frozenset(
    {HOST_VALUE_DEVICE_OUTPUT, DEVICE_COMPUTE_ON_HOST, UNPINNED_HOST_MEMORY, MIXED_MEMORY_SPACES, OFFLOAD_DOES_NOTHING}
)
"""The codes ``offload-fixer check`` (which never runs the program) reports; ``run`` and the
Python API, which lower the program, report every code (OFL1215, which JAX raises before
anything lowers, from JAX's error)."""
EAGER_STATIC_CODES: Final[frozenset[str]] = frozenset({HOST_STRIDED_SLICE_TO_DEVICE})
"""The codes ``check`` reports only in code outside any jit, where JAX compiles each operation
alone (an eager ``x[::2]`` of a host array)."""

IO_ERROR: Final = "OFL0902"
"""A path ``check`` was given or found that cannot be read (missing, unreadable, a FIFO): one
diagnostic among the others, as ruff's E902 ``io-error``. It is no rule of the analysis (no page
in :mod:`offload_fixer.rules`, no example for a compiler to judge): selected, ignored and counted
like the rules' codes."""
TOOL_NAMES: Final[dict[str, str]] = {IO_ERROR: "io-error"}
"""The codes of the tool itself, by name, as :data:`NAMES` names the rules'."""
SELECTABLE_CODES: Final[tuple[str, ...]] = (*TOOL_NAMES, *ALL_CODES)
"""Every code a finding can carry: what ``select``, ``ignore`` and ``# noqa`` may name."""

HOST_COMPUTE_CODES: Final[tuple[str, ...]] = (
    DEVICE_COMPUTE_ON_HOST,
    HOST_SLICE_NOT_MOVED_TO_DEVICE,
    BACKEND_CANNOT_BUILD_HOST_COMPUTE,
    HOST_STRIDED_SLICE_TO_DEVICE,
    MIXED_MEMORY_SPACES,
)
"""Codes of device compute on host values that XLA turns into host compute (or fails to build
as such), or that JAX refuses to trace: one computation reached by several host values is one
problem, and a move to device fixes each."""
HOST_COMPUTE_WARNING_CODES: Final[tuple[str, ...]] = (DEVICE_COMPUTE_ON_HOST, HOST_SLICE_NOT_MOVED_TO_DEVICE)
"""The host-compute codes a compiler only logs (it compiles the program): what its warnings confirm."""
