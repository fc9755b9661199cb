"""From MLIR locations and JAX attributes back to the user's Python: spans and pytree paths."""
