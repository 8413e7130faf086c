"""GKE with A3 GPU node pools from the inventory named by the stack's `inventory` config."""

from pathlib import Path

from gpucluster.cloud.program import run

run("gcp", Path(__file__).resolve().parent)
