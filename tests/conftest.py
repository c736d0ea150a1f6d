"""Suite-wide test settings."""
import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """The suite runs many tiny tensor ops: torch's intra-op thread pool only adds OpenMP synchronisation
    to them (measured 5-50x slower with two threads on a busy 2-core machine). Restored afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
