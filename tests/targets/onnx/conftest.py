import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op thread (torch's, and so onnxruntime's sessions') avoids OpenMP spin contention on a busy 2-core
    machine; a module opts in with ``pytestmark = pytest.mark.usefixtures("one_thread")``."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
