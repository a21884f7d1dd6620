"""setup_notebook makes a chapter reproducible: seeds, threads, printing."""

import random

import numpy as np
import pytest
import torch

from labformer import setup_notebook


@pytest.fixture
def restore_threads():
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


def test_same_seed_same_numbers(restore_threads):
    setup_notebook(seed=3)
    first = (random.random(), np.random.rand(), torch.rand(2))
    setup_notebook(seed=3)
    again = (random.random(), np.random.rand(), torch.rand(2))
    assert first[0] == again[0] and first[1] == again[1] and torch.equal(first[2], again[2])
    setup_notebook(seed=4)
    assert random.random() != first[0]


def test_threads_default_one_and_none_keeps(restore_threads):
    torch.set_num_threads(2)
    setup_notebook(seed=0, threads=None)
    assert torch.get_num_threads() == 2
    setup_notebook(seed=0)
    assert torch.get_num_threads() == 1
    with pytest.raises(ValueError, match="threads"):
        setup_notebook(threads=0)
