"""The XLA model: replay the host offloader over StableHLO and report what it would do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from offload_fixer.analysis.backend import backend_failures
from offload_fixer.analysis.diagnose import Diagnoser
from offload_fixer.analysis.offloader import HostOffloadWalk
from offload_fixer.ir.module import ModuleReadError, load
from offload_fixer.model import UNPINNED_HOST, FunctionRef, RematPolicy, Report, normalize_target

__all__ = ["ModuleReadError", "analyze"]


def analyze(
    source: Any,
    target: str = "tpu",
    *,
    function: FunctionRef | None = None,
    host_compute_offload: bool = True,
    remat_policies: Sequence[RematPolicy] = (),
) -> Report:
    """Predict XLA's host-offloader verdicts for a lowered module.

    ``source``: a ``jax.stages.Lowered`` (lower it for ``tpu``/``cuda``: CPU lowering drops
    memory moves), an MLIR module, StableHLO text or bytecode. ``target``: ``tpu`` or ``gpu``;
    both released compilers fail on a host value reaching a device output (error 1200), and
    their backends differ in what host compute they can build. ``host_compute_offload=False``
    models ``--xla_disable_automatic_host_compute_offload``. ``remat_policies``: the remat
    offload policies of the traced program the module was lowered from
    (``jax_compat.lower_with_policies``), which the rules judge beside the module.
    """
    from offload_fixer import jax_compat

    target = normalize_target(target)
    view = load(source)
    generation = jax_compat.xla_generation()
    if target == "tpu" and generation.tpu_unpinned_host_is_host_memory:
        view.lay_out_in_host_memory(UNPINNED_HOST)
    walker = HostOffloadWalk(view, target, generation)
    walk = walker.run()
    failures = backend_failures(walker, walk, target)
    from offload_fixer.jax_compat.compiler_bugs import compiler_release

    diagnoser = Diagnoser(view, target, function, host_compute_offload, generation, compiler_release(target))
    return Report(
        diagnostics=(*diagnoser.diagnostics(walk, failures), *diagnoser.policy_diagnostics(remat_policies)),
        target=target,
        jax_version=jax_compat.installed_version(),
        module_name=view.name,
        function=diagnoser.function,
        outputs=diagnoser.outputs(walk),
        predicted=diagnoser.prediction(walk, failures),
        xla_generation=generation.name,
    )
