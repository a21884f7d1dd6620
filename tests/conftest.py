"""Shared test settings."""

import os

import pytest
import torch
from hypothesis import settings

# In CI every property test draws the same examples on every run, so a result can be
# reproduced; locally hypothesis explores new examples each time.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """One intra-op thread: the test models are tiny, and on a busy machine threads spin."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
