"""A rollout buffer kept in pinned_host memory and touched eagerly, as RL code does.

No jit of the program's own: ``shard.reshape(-1)`` and ``shard * 2`` compile JAX's own jits
on host operands. Where JAX declares their results device memory (0.4.29 - 0.7.0) both are
error 1200 on TPU. From 0.7.1 the results are host memory: the multiply is host compute, and
the reshape compiles without a word (a reshape is a bitcast to the released compilers).
Needs a backend with ``pinned_host`` memory.
"""

import jax
import jax.numpy as jnp

device = jax.devices()[0]
on_host = jax.sharding.SingleDeviceSharding(device, memory_kind="pinned_host")

buffer = jax.device_put(jnp.arange(8.0).reshape(2, 4), on_host)
flat = buffer.reshape(-1)  # expect: eager reshape (before 0.7.1)
scaled = buffer * 2  # expect: eager multiply
on_device = jnp.ones(4) + 1  # device arrays only: not checked
print(flat.shape, scaled.sharding.memory_kind, float(on_device.sum()))
