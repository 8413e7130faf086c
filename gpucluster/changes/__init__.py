"""What a change between two inventories does to a live cluster: `gpucluster plan` (README.md)."""
