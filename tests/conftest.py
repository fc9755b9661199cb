"""Test-wide environment: JAX runs on the CPU, whatever accelerator plugins are installed.

The oracle layer installs libtpu and the CUDA plugin into the test environments; without
``JAX_PLATFORMS=cpu`` every JAX process (the tests' and the programs they run) would try to
start those backends on a machine that has no accelerator. Set before JAX is imported, and
inherited by every subprocess a test starts.
"""

import os

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
