"""Benchmarks of labformer against PyTorch's own modules and Hugging Face's GPT-2
(run with `make bench`)."""
