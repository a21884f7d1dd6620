"""Benchmarks of labformer against PyTorch's own modules (run with `make bench`)."""
