"""The local lab: a real Slurm cluster of podman systemd containers in private network namespaces."""
