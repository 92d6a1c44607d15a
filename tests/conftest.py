"""Shared test setup."""

import pytest


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Lab-sized models run fastest on one thread, and do not stall on a busy 2-core machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
