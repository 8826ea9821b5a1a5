"""The Lambda package: the layer's hash lock, the layer and function asset, the aarch64 CPython, the probe."""
