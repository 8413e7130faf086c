"""Kubernetes layer: the `kubernetes:` model, its checks, and the kubernetes/ and helm/ renderers."""
