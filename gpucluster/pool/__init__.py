"""Shared pools' moves (cluster.shared_pools): the steps of lending and returning a node (steps.py)
and the balancer's policy (policy.py). Standard library only, like gpucluster/programs: shipped to
the controllers beside the programs that run them."""
