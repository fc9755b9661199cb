"""Where an older released compiler decides otherwise than the analysis, and why it is left so.

Keyed by program id and the compiler that differs. The analysis models the compilers of the
JAX it runs with (``jax_compat.XLA_GENERATIONS``); these are the cases of the oldest
generation judged here (libtpu 0.0.17.1, the TPU compiler of JAX 0.6.2) that its model does
not reproduce. The fidelity tests expect exactly these to disagree (strict), so a change
on either side shows.
"""

KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {
    ("xla_cases/Conditional", "libtpu 0.0.17.1"): (
        "libtpu 0.0.17.1 does not end the walk at a move to device applied to a conditional's "
        "result (its trace passes a copy there) and rejects output 2; later compilers do"
    ),
    ("probes/mesh4_shard_map_two_outputs", "libtpu 0.0.17.1"): (
        "libtpu 0.0.17.1 inlines the shard_map body and its error 1200 trace ends at output 1 "
        "(INVALID_ARGUMENT: Tensor which is moved to host (starting from param) is returned from "
        "the entry computation but the layout for this output is not set to host memory.; host "
        "compute add.1 before subtract.1): the analysis follows the users in build order (output "
        "0), as later compilers, which keep the body as a call, do"
    ),
    ("xla_cases/OutputStreamingInScanLoop", "libtpu 0.0.17.1"): (
        "libtpu 0.0.17.1's backend fails on the streamed loop output (INTERNAL: async-start "
        "expects the shape of operand 0 ...); later compilers build it"
    ),
}


def known_difference(program_id: str, compiler: str) -> str | None:
    """Why ``compiler`` is expected to disagree with the analysis on ``program_id``, if it is."""
    for (known_id, prefix), why in KNOWN_DIFFERENCES.items():
        if known_id == program_id and compiler.startswith(prefix):
            return why
    return None
