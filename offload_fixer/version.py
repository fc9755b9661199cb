"""offload-fixer's own version, written once, here: ``pyproject.toml`` reads it and releases are
tagged ``v<version>``. A module of its own, below everything, so the command line, the reports
and the language server name it without importing the package's public API (the JAX versions
the rules model are :mod:`offload_fixer.jax_compat`'s)."""

__version__ = "0.2.0"
