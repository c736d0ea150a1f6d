"""The NIR tests run many tiny per-step convolutions: torch's thread pool only slows them down (badly on a
busy machine), so each test module here runs single-threaded and restores the setting afterwards."""
import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
