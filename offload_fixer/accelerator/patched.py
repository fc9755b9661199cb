"""A failing compilation patched: compiled without its offload, called as the program called
the one that failed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from offload_fixer.model import MemoryFigures


class Patched:
    """A compilation that failed, compiled again without its offload, called as the program
    called the one that failed: its arguments moved to device first, its results moved back
    to the memory kinds the program declares. Anything else is the patched ``Compiled``'s."""

    def __init__(self, compiled: Any, kinds: Sequence[str | None], memory: MemoryFigures | None) -> None:
        self.compiled = compiled
        self.kinds = list(kinds)
        self.memory = memory

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import jax

        from offload_fixer.jax_compat import stages

        args, kwargs = jax.tree_util.tree_map(stages.device_twin, (args, kwargs))
        results = self.compiled(*args, **kwargs)
        leaves, tree = jax.tree_util.tree_flatten(results)
        return jax.tree_util.tree_unflatten(tree, self._declared(leaves))

    def call_flat(self, args_flat: Sequence[Any]) -> list[Any]:
        """The flat results for the flat arguments of an eager operation (as JAX's dispatch
        holds them), left in device memory: moved back to host, the program's next eager
        operation on them would copy out of a host buffer again (on a TPU v5e, iterating over
        such a result, ``jit_unstack``, halts the chip's core while it runs)."""
        import jax

        from offload_fixer.jax_compat import stages

        args, kwargs = self.compiled.in_tree.unflatten([stages.device_twin(a) for a in args_flat])
        return jax.tree_util.tree_leaves(self.compiled(*args, **kwargs))

    def _declared(self, leaves: list[Any]) -> list[Any]:
        from offload_fixer.jax_compat import stages

        return [stages.in_memory(value, kind) for value, kind in zip(leaves, self.kinds)] + leaves[len(self.kinds) :]

    def __getattr__(self, name: str) -> Any:
        return getattr(vars(self)["compiled"], name)
