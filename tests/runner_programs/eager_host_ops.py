"""A rollout buffer kept in pinned_host memory and touched eagerly, as RL code does.

No jit of the program's own: ``shard.reshape(-1)`` and ``shard * 2`` compile JAX's own jits
on host operands. On TPU they are host compute, and error 1200 where JAX declares their
results device memory (JAX 0.4.29 - 0.7.0). Needs a backend with ``pinned_host`` memory.
"""

import jax
import jax.numpy as jnp

device = jax.devices()[0]
on_host = jax.sharding.SingleDeviceSharding(device, memory_kind="pinned_host")

buffer = jax.device_put(jnp.arange(8.0).reshape(2, 4), on_host)
flat = buffer.reshape(-1)  # expect: eager reshape
scaled = buffer * 2  # expect: eager multiply
on_device = jnp.ones(4) + 1  # device arrays only: not checked
print(flat.shape, scaled.sharding.memory_kind, float(on_device.sum()))
