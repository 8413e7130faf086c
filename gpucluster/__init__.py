"""gpucluster: one inventory -> a validated GPU cluster model -> Slurm, Kubernetes and cloud resources."""

__version__ = "0.1.0"
