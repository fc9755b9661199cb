"""JAX versions past what the rules model, derived from :data:`jax_compat.NEWEST_MODELLED`, so a
new modelled release moves every "too new" case of the tests with it."""

from __future__ import annotations

from offload_fixer.jax_compat import NEWEST_MODELLED, parse_version

_MAJOR, _MINOR, _ = parse_version(NEWEST_MODELLED)
NEXT_MINOR = f"{_MAJOR}.{_MINOR + 1}"
"""The first minor release past the rules (``0.13`` while 0.12.0.1 is the newest modelled)."""
TOO_NEW = (NEXT_MINOR, f"{NEXT_MINOR}.0", f"{_MAJOR + 1}.0", "99.0")
NEWEST_NAMED = f"the newest is {NEWEST_MODELLED}"
"""How a refusal names the newest modelled release."""
