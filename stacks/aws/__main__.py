"""EKS + GPU node groups from the inventory named by the stack's `inventory` config."""

from pathlib import Path

from gpucluster.cloud.program import run

run("aws", Path(__file__).resolve().parent)
