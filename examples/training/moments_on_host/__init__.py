"""Adam with its moments kept in host memory between steps (a training package)."""
