"""Activation offloading: remat policies that offload residuals, and pipeline stages that
keep activations in host memory between a forward and a backward program."""
