"""Donated host buffers on the chip: which programs PjRt aborts when they return an output.

A script run on the machine with the chip (``python3 tests/chip/donation_cases.py OUT.json
[PROGRAM.py ...]``): each case, and each program named, runs in a process of its own (an abort
ends only that one) on one device, and ``OUT.json`` records its exit status and last words.
``tests/chip/donation_record.json`` is what the TPU v5e did; ``tests/verify/test_donation.py``
holds the tool's reading of each case's lowering to it. The cases differ in one thing each:
the donation, and whether ``out_shardings`` leaves an output's memory kind to JAX (``None``),
which lets JAX give the donated host buffer to a device output of the same shape.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

HEAD = """
import functools
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

MESH = Mesh(np.array(jax.devices()[:1]), ("d",))
ROWS = NamedSharding(MESH, P("d"))
HOST = ROWS.with_memory_kind("pinned_host")
S = jax.ShapeDtypeStruct((16, 4), np.float32)
x = np.arange(64, dtype=np.float32).reshape(16, 4)
"""

_STEP = """
    m = jax.device_put(m, jax.memory.Space.Device)
    m = 0.9 * m + 0.1 * p
"""

CASES: dict[str, tuple[str, bool]] = {
    # name: (the jitted function, whether its lowering gives a donated host buffer to a device output)
    "donated_state_moved_to_device_output_left_to_jax": (
        "@functools.partial(jax.jit, in_shardings=(ROWS, HOST), out_shardings=(None, HOST), donate_argnums=1)\n"
        "def f(p, m):" + _STEP + "    return p - m, m\n",
        True,
    ),
    "state_not_donated": (
        "@functools.partial(jax.jit, in_shardings=(ROWS, HOST), out_shardings=(None, HOST))\n"
        "def f(p, m):" + _STEP + "    return p - m, m\n",
        False,
    ),
    "donated_state_every_output_declared": (
        "@functools.partial(jax.jit, in_shardings=(ROWS, HOST), out_shardings=(ROWS, HOST), donate_argnums=1)\n"
        "def f(p, m):" + _STEP + "    return p - m, m\n",
        False,
    ),
    "donated_state_moved_back_to_host_explicitly": (
        "@functools.partial(jax.jit, in_shardings=(ROWS, HOST), out_shardings=(None, HOST), donate_argnums=1)\n"
        "def f(p, m):" + _STEP + "    return p - m, jax.device_put(m, jax.memory.Space.Host)\n",
        True,
    ),
    "donated_state_only_output": (
        "@functools.partial(jax.jit, in_shardings=(ROWS, HOST), out_shardings=HOST, donate_argnums=1)\n"
        "def f(p, m):" + _STEP + "    return m\n",
        False,
    ),
}
NOISE = re.compile(r"cudart_stub|absl::InitializeLog|Transparent hugepages|warnings.warn")
RUNS = 3
VERSIONS = """
import importlib.metadata, json, time
import jax
def version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None
device = jax.devices()[0]
print(json.dumps({"jax": jax.__version__, "libtpu": version("libtpu"), "platform": device.platform,
                  "device_kind": device.device_kind, "date": time.strftime("%Y-%m-%d")}))
"""
ARGS = "(S, S)"
VALUES = "(jax.device_put(x, ROWS), jax.device_put(x, HOST))"


def program(name: str) -> str:
    """Case ``name`` as a whole program: lowered by shapes, compiled, called, outputs printed."""
    return (
        HEAD
        + CASES[name][0]
        + f"out = f.lower(*{ARGS}).compile()(*{VALUES})\n"
        + "print('OK', [(o.sharding.memory_kind, float(np.asarray(o).sum())) for o in jax.tree.leaves(out)])\n"
    )


def main(out: str, programs: list[str]) -> None:
    # asked in a process of its own: one that opens the chip holds it until it ends
    asked = subprocess.run([sys.executable, "-c", VERSIONS], capture_output=True, text=True, timeout=300)
    record: dict = {"versions": json.loads(asked.stdout.splitlines()[-1]), "runs": {}}
    texts = {name: program(name) for name in CASES}
    texts.update({os.path.basename(p): Path(p).read_text() for p in programs})
    for name, text in texts.items():
        codes, said = [], []
        for _ in range(RUNS):  # PjRt does not abort every run of such a program: until it does
            done = subprocess.run(
                [sys.executable, "-c", text],
                capture_output=True,
                text=True,
                timeout=300,
                cwd=os.path.dirname(os.path.abspath(programs[0])) if programs else None,
            )
            codes.append(done.returncode)
            if done.returncode < 0 or not said:  # the words of an abort, where there was one
                lines = (done.stderr + done.stdout).splitlines()
                said = [line for line in lines if line.strip() and not NOISE.search(line)]
            if done.returncode < 0:
                break
        record["runs"][name] = {"returncodes": codes, "last_lines": said[-3:]}
        print(name, codes, said[-1:], flush=True)
        with open(out, "w") as f:
            json.dump(record, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
