"""Compile and run, on an attached accelerator, the remat policies whose destination is device
memory (``tests/runner_programs/silent_offloads/destination_device_*.py``, OFL1211) and the same
programs with the destination spelled ``"pinned_host"`` (the one-literal edit ``check --fix``
and ``run --fix`` write): each jitted gradient's memory analysis (host bytes: 0 where the policy
offloads nothing) and its result, with the versions, the device kind and the date.

    python3 scripts/chip_policy_destinations.py RECORD.json
"""

from __future__ import annotations

import datetime
import json
import runpy
import sys
import tempfile
from importlib import metadata
from pathlib import Path

FOLDER = Path(__file__).resolve().parents[1] / "tests" / "runner_programs" / "silent_offloads"
CASES = {
    # program: (its jitted gradient, the arguments it is called with in its __main__)
    "destination_device_dots": (
        "grads",
        lambda jnp: (jnp.ones((128, 256)) * 0.01, jnp.ones((256, 128)) * 0.01, jnp.ones((8, 128))),
    ),
    "destination_device_names": ("grad", lambda jnp: (jnp.ones((128, 128)) * 0.01, jnp.ones((8, 128)))),
}


def respelled(source: str) -> str:
    """The program as the fix writes it: its policy's last ``"device"`` (the destination) spelled ``"pinned_host"``."""
    head, _, tail = source.rpartition('"device"')
    return head + '"pinned_host"' + tail


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    import jax
    import jax.numpy as jnp

    record: dict = {
        "date": datetime.date.today().isoformat(),
        "jax": jax.__version__,
        "libtpu": next((metadata.version(n) for n in ("libtpu", "libtpu-nightly") if _installed(n)), None),
        "device_kind": jax.devices()[0].device_kind,
        "programs": {},
    }
    with tempfile.TemporaryDirectory() as scratch:
        for name, (function, arguments) in CASES.items():
            source = (FOLDER / f"{name}.py").read_text()
            for variant, text in (("", source), ("_fixed", respelled(source))):
                path = Path(scratch) / f"{name}{variant}.py"
                path.write_text(text)
                jitted = runpy.run_path(str(path), run_name="measured")[function]
                args = arguments(jnp)
                memory = jitted.lower(*args).compile().memory_analysis()
                result = jax.tree.map(lambda x: float(x.sum()), jitted(*args))
                record["programs"][name + variant] = {
                    "host_temp": memory.host_temp_size_in_bytes,
                    "host_output": memory.host_output_size_in_bytes,
                    "temp": memory.temp_size_in_bytes,
                    "result": result,
                }
                print(name + variant, json.dumps(record["programs"][name + variant]), flush=True)
    Path(argv[0]).write_text(json.dumps(record, indent=1) + "\n")
    return 0


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
