"""Kubernetes layer: the `kubernetes:` model, its checks, and the kubernetes/ and helm/ renderers."""

# The cluster model imports our model part-way through its own definition; importing it first
# keeps that order whichever module a caller imports first.
import gpucluster.model  # noqa: F401
