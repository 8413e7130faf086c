"""GPU node software: the driver stack of each node type (model, checks, renderers)."""
