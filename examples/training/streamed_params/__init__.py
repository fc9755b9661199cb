"""An MLP whose weights live in host memory and are streamed to the device layer by layer."""
