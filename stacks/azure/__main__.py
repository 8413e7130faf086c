"""AKS with ND H100 v5 GPU agent pools from the inventory named by the stack's `inventory` config."""

from pathlib import Path

from gpucluster.cloud.program import run

run("azure", Path(__file__).resolve().parent)
