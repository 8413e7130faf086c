"""Nebius Managed Kubernetes with GPU node groups on GPU clusters from the inventory named by the stack's `inventory` config."""

from pathlib import Path

from gpucluster.cloud.program import run

run("nebius", Path(__file__).resolve().parent)
