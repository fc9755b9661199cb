"""Shared knowledge about ``examples/``: where they are, which JAX they need, how to load them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType

import jax

from offload_fixer import jax_compat

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_PATHS = sorted(EXAMPLES_DIR.glob("*.py"))
EXAMPLE_NAMES = [path.stem for path in EXAMPLE_PATHS]

NEWEST_JAX_NEEDED = (0, 10, 1)
"""The examples use ``jax.memory.Space`` (0.10), the function form of ``compute_on`` (0.10.1)
and ``pinned_host`` arrays on CPU, which JAX 0.4.35 and 0.6.2 do not offer."""


def jax_runs_examples() -> bool:
    return jax_compat.parse_version(jax_compat.installed_version()) >= NEWEST_JAX_NEEDED


SKIP_REASON = "the examples target JAX >= 0.10.1 (the CPU backend of 0.4.35 and 0.6.2 has no pinned_host memory)"


def expected_path(name: str) -> Path:
    return EXAMPLES_DIR / f"{name}.expected.json"


def load_expected(name: str) -> list[dict]:
    return json.loads(expected_path(name).read_text())


def import_example(name: str) -> ModuleType:
    """Import an example as a module (not as ``__main__``), the way a tool would load it."""
    spec = importlib.util.spec_from_file_location(f"offload_example_{name}", EXAMPLES_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def is_jitted(obj: object) -> bool:
    return callable(obj) and hasattr(obj, "lower") and hasattr(obj, "trace")


def _backward_args(m):
    params = m.init_params()
    _, pullback = m.forward(params, m.make_batch(0))
    return params, pullback


def _pod_step_args(m):
    mesh = m.create_device_mesh(m.Config())
    return m.get_abstract_state(m.Config(), mesh), m.get_shaped_batch(m.Config(), mesh)


# The arguments each module-level jitted function is called with, the way main() builds them.
ARGUMENTS = {
    "activation_offload": {"train_step": lambda m: (m.init_params(), m.make_batch(0))},
    "activation_offload_residuals": {
        "forward": lambda m: (m.init_params(), m.make_batch(0)),
        "backward": _backward_args,
    },
    "compute_on_host_ema": {
        "train_step": lambda m: (m.init_params(), jax.device_put(m.init_params(), m.ON_HOST), m.make_batch(0)),
        "eval_loss": lambda m: (m.init_params(), m.make_batch(0)),
    },
    "kv_cache_host": {
        "decode_step": lambda m: (m.init_params(), m.init_cache(), m.PROMPT[0], 0),
        "full_recompute_logits": lambda m: (m.init_params(), jax.numpy.asarray(m.PROMPT)),
    },
    "optimizer_offload": {"train_step": lambda m: m.abstract_inputs()},
    "optimizer_offload_broken": {"train_step": lambda m: m.abstract_inputs()},
    "param_streaming": {"train_step": lambda m: m.abstract_inputs()},
    "param_streaming_broken": {"train_step": lambda m: m.abstract_inputs()},
    "pod_train": {"train_step": _pod_step_args},
    "scan_stream_to_host": {"simulate": lambda m: m.initial_state()},
    "unpinned_host_trap": {"train_step": lambda m: (m.init_params(), m.make_batch(0))},
}
