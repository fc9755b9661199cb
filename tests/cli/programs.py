"""Programs the command-line tests check: a host argument returned as a device output."""

import textwrap

BROKEN = textwrap.dedent(
    """\
    import functools

    import jax
    from jax.sharding import SingleDeviceSharding

    HOST = SingleDeviceSharding(jax.devices()[0], memory_kind="pinned_host")


    @functools.partial(jax.jit, in_shardings=HOST)
    def double(x):
        return x * 2  # keep this comment
    """
)
"""Error 1200 on line 9, column 29 (the ``in_shardings`` of ``double``)."""
