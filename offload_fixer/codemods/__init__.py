"""libcst codemod commands that fix host-offload outputs XLA rejects (error 1200).

* :class:`offload_fixer.codemods.move_to_device.MoveToDeviceCommand` — move the value back to device;
* :class:`offload_fixer.codemods.host_output.HostOutputCommand` — declare the output host memory in
  ``out_shardings``;
* :class:`offload_fixer.codemods.pin_host_memory.PinHostMemoryCommand` — spell a move to host
  (or an offload policy's destination) ``"pinned_host"``.

Each takes its own small, plain target (``TARGET``: lines, pytree paths, spelling; see
:mod:`offload_fixer.codemods.targets`) and imports neither JAX nor MLIR, so they run anywhere
libcst does, including
``python -m libcst.tool codemod`` (list ``offload_fixer.codemods`` under ``modules:`` in the
project's ``.libcst.codemod.yaml``, or name a command in full with ``-x``).
"""
