"""Run, on an attached accelerator, the Pallas kernels that alias a host input into one of
their several outputs (OFL1216), a kernel that gets the value on device instead, and plain
convolutions over a host-resident kernel; record each one's outcome.

    python3 scripts/chip_alias_abort.py RECORD.json [NAME ...]

Each program runs in a process of its own (``--program NAME``): libtpu 0.0.42.1 aborts
compiling the aliasing kernels (``host_offload_utils.cc:98``), which ends the process, so the
record keeps each one's return code (a negative one: the signal), the tail of what it wrote to
stderr and stdout, and the time it took, with the JAX, jaxlib and libtpu versions, the device
kind and the date. It needs JAX alone (no flax, no network, not this package), and runs on a
CPU too, where JAX lowers no Pallas TPU kernel: the record then says what the CPU does.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

TAIL = 30
"""Lines of each program's stderr and stdout kept in the record."""
TIMEOUT_S = 300


def _kernel_outputs(cache, rows, aliased_into):
    """A kernel that keeps ``cache`` where it lies (aliased into output ``aliased_into``) and
    writes ``rows * 2`` into the other output."""
    import jax
    from jax.experimental import pallas as pl

    def scale_rows(cache_ref, rows_ref, *outputs):
        outputs[1 - aliased_into][...] = rows_ref[...] * 2.0

    anywhere = pl.BlockSpec(memory_space=pl.ANY)
    specs = [anywhere, pl.BlockSpec()] if aliased_into == 0 else [pl.BlockSpec(), anywhere]
    return pl.pallas_call(
        scale_rows,
        out_shape=(jax.ShapeDtypeStruct(cache.shape, cache.dtype),) * 2,
        in_specs=[anywhere, pl.BlockSpec()],
        out_specs=tuple(specs),
        input_output_aliases={0: aliased_into},
    )(cache, rows)


def _kernels():
    import jax

    return {
        "alias0_both_returned": lambda c, r: _kernel_outputs(c, r, 0),
        "alias1_both_returned": lambda c, r: _kernel_outputs(c, r, 1),
        "alias0_aliased_returned": lambda c, r: _kernel_outputs(c, r, 0)[0],
        "alias0_other_returned": lambda c, r: _kernel_outputs(c, r, 0)[1],
        "alias0_other_computed_on": lambda c, r: _kernel_outputs(c, r, 0)[1] * 2,
        "alias1_other_returned": lambda c, r: _kernel_outputs(c, r, 1)[0],
        "moved_to_device_first": lambda c, r: _kernel_outputs(jax.device_put(c, _space("device")), r, 0),
    }


def _space(kind):
    import jax

    return jax.sharding.SingleDeviceSharding(jax.devices()[0], memory_kind=kind)


def _conv(kernel, images):
    from jax import lax

    return lax.conv_general_dilated(images, kernel, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _conv_programs():
    import jax
    import jax.numpy as jnp

    def loss(kernel, images):
        return jnp.mean(_conv(kernel, images) ** 2)

    def sgd(kernel, images):
        return kernel - 0.1 * jax.grad(loss)(kernel, images)

    host, device = _space("pinned_host"), _space("device")

    def moved_in(step):
        return lambda kernel, images: step(jax.device_put(kernel, device), images)

    return {
        # The committed host kernel given to the convolution as it is (JAX >= 0.7.1 refuses
        # mixed memory spaces at trace time).
        "conv_host_kernel_forward": jax.jit(_conv),
        # The committed host kernel moved to device inside the step (the update moved back).
        "conv_moved_in_forward": jax.jit(moved_in(_conv)),
        "conv_moved_in_grad": jax.jit(moved_in(jax.value_and_grad(loss))),
        "conv_moved_in_sgd_to_host": jax.jit(
            lambda k, x: jax.device_put(moved_in(sgd)(k, x), host), out_shardings=host
        ),
    }


def run_program(name: str) -> None:
    """Compile and run one program on the first device; print where its outputs live."""
    import jax
    import jax.numpy as jnp

    host = _space("pinned_host")
    if name.startswith("conv_"):
        kernel = jax.device_put(jnp.full((3, 3, 8, 8), 0.01, jnp.float32), host)
        images = jnp.ones((2, 16, 16, 8), jnp.float32)
        out = _conv_programs()[name](kernel, images)
    else:
        cache = jax.device_put(jnp.zeros((8, 128), jnp.float32), host)
        out = jax.jit(_kernels()[name])(cache, jnp.ones((8, 128), jnp.float32))
    for leaf in jax.tree.leaves(jax.block_until_ready(out)):
        print(leaf.shape, leaf.sharding.memory_kind, float(jnp.sum(jax.device_put(leaf, _space("device")))))


NAMES = (
    "alias0_both_returned",
    "alias1_both_returned",
    "alias0_aliased_returned",
    "alias0_other_returned",
    "alias0_other_computed_on",
    "alias1_other_returned",
    "moved_to_device_first",
    "conv_host_kernel_forward",
    "conv_moved_in_forward",
    "conv_moved_in_grad",
    "conv_moved_in_sgd_to_host",
)


def _version(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _tail(text: str) -> list[str]:
    return text.strip().splitlines()[-TAIL:]


def _telling(lines: list[str]) -> str:
    """The line of a program's stderr that says what stopped it: the failed CHECK, else the error."""
    for marker in ("Check failed", "Error"):
        found = [line for line in lines if marker in line]
        if found:
            return found[-1]
    return lines[-1] if lines else ""


def main(argv: list[str]) -> int:
    if argv[:1] == ["--program"] and len(argv) == 2:
        run_program(argv[1])
        return 0
    unknown = [name for name in argv[1:] if name not in NAMES]
    if not argv or argv[0].startswith("-") or unknown:
        print(__doc__, file=sys.stderr)
        if unknown:
            print(f"unknown programs: {', '.join(unknown)}; known: {', '.join(NAMES)}", file=sys.stderr)
        return 2
    out = Path(argv[0])
    # The device is read in a process of its own: a process that opened the TPU holds it, and
    # the programs' processes would find it in use.
    probe = "import jax; d = jax.devices()[0]; print(jax.__version__, d.platform, d.device_kind, sep='\\n')"
    version, platform, device_kind = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()[-3:]
    record = {
        "date": datetime.date.today().isoformat(),
        "jax": version,
        "jaxlib": _version("jaxlib"),
        "libtpu": _version("libtpu", "libtpu-nightly"),
        "device_kind": device_kind,
        "platform": platform,
        "programs": {},
    }
    for name in argv[1:] or NAMES:
        start = time.perf_counter()
        command = [sys.executable, str(Path(__file__).resolve()), "--program", name]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
            outcome = {"returncode": done.returncode, "stdout": _tail(done.stdout), "stderr": _tail(done.stderr)}
        except subprocess.TimeoutExpired as exc:
            stderr = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr or ""
            outcome = {"returncode": None, "timed_out": TIMEOUT_S, "stderr": _tail(stderr)}
        outcome["seconds"] = round(time.perf_counter() - start, 3)
        record["programs"][name] = outcome
        out.write_text(json.dumps(record, indent=1) + "\n")
        print(name, outcome["returncode"], _telling(outcome["stderr"])[:200], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
