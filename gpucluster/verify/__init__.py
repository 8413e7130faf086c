"""`gpucluster verify`: the acceptance check of a live Slurm cluster against its inventory.

plan (what to observe and which jobs to run, from the model) -> collect (verify.yml
through the same Ansible inventory; it only observes) -> checks (pure verdicts) -> report.
"""
