"""Prove rendered Slurm files against the real daemons before they reach a cluster."""
