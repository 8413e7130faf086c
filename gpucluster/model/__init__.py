"""The ground floor: the typed model of an inventory and the resolved cluster (README.md)."""
