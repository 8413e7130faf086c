"""The core checks, one module per subject (README.md); gpucluster.layers.CHECKS runs them."""
