"""Analysis time against module size, and against JAX's own lowering time for the same function.

An unrolled transformer-like stack whose every layer offloads its activation to host memory
and brings it back before the next layer (the activation-offloading pattern), with a final
host-memory parameter (``in_shardings``, traced abstractly: the JAX >= 0.7.1 gap) returned
through a device output, so at least one walk reaches the root with error 1200. Each size is
lowered for TPU once; the analysis is then timed (median of ``--repeat`` runs) on the
lowered module. Prints one row per size and the growth ratio, which should stay near the
size ratio (linear growth).

    .venv/bin/python benchmarks/analysis_scaling.py --layers 10 100 1000
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding

from offload_fixer.analysis import analyze
from offload_fixer.ir.module import load


def make_stack(layers: int):
    device = jax.devices()[0]
    host = SingleDeviceSharding(device, memory_kind="pinned_host")
    on_device = SingleDeviceSharding(device, memory_kind="device")

    def layer(x, w):
        h = jnp.tanh(x @ w)
        h = (h - h.mean(-1, keepdims=True)) / (h.std(-1, keepdims=True) + 1e-6)
        return x + jax.nn.gelu(h)

    def stack(x, ws, bias):
        saved = []
        for i in range(layers):
            x = layer(x, ws[i % ws.shape[0]])
            offloaded = jax.device_put(x, host)
            saved.append(offloaded)
            x = jax.device_put(offloaded, on_device)
        return x, saved[-1], bias * 2.0

    return stack, host


def lower(layers: int):
    stack, host = make_stack(layers)
    x = jax.ShapeDtypeStruct((8, 16), jnp.float32)
    ws = jax.ShapeDtypeStruct((4, 16, 16), jnp.float32)
    bias = jax.ShapeDtypeStruct((16,), jnp.float32)
    start = time.perf_counter()
    jitted = jax.jit(stack, in_shardings=(None, None, host))
    lowered = jitted.trace(x, ws, bias).lower(lowering_platforms=("tpu",))
    lowering_s = time.perf_counter() - start
    return lowered, lowering_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"jax {jax.__version__}")
    print(f"{'layers':>7} {'ops':>8} {'lower s':>8} {'analyze s':>10} {'us/op':>7} {'analyze/lower':>14}")
    rows = []
    for layers in args.layers:
        lowered, lowering_s = lower(layers)
        module = lowered.compiler_ir("stablehlo")
        ops = load(module).op_count
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            report = analyze(module, "tpu")
            times.append(time.perf_counter() - start)
        analyze_s = statistics.median(times)
        assert report.by_code("OFL1200"), "the benchmark module must exercise a full walk to the root"
        rows.append((layers, ops, analyze_s))
        print(
            f"{layers:>7} {ops:>8} {lowering_s:>8.2f} {analyze_s:>10.3f} {analyze_s / ops * 1e6:>7.1f} {analyze_s / lowering_s:>13.1%}"
        )
    if len(rows) > 1:
        (_, ops0, t0), (_, ops1, t1) = rows[0], rows[-1]
        print(f"size x{ops1 / ops0:.1f} -> analysis time x{t1 / t0:.1f}")


if __name__ == "__main__":
    main()
