"""The templates of the inventory's cloud groups (cluster.nodes[].power kind cloud): what
gpucluster-power creates a node from when Slurm needs one (stacks/burst/README.md)."""

from pathlib import Path

from gpucluster.cloud.program import run_burst

run_burst(Path(__file__).resolve().parent)
