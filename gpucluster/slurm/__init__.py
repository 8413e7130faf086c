"""The Slurm layer: release facts, Slurm's checks and renderers, the REST API and accounts."""
