"""`gpucluster import`: an existing cluster's Slurm files -> an inventory (README.md)."""
