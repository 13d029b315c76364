import classic_ops
import torch


def test_add_one_cpu():
    assert torch.equal(classic_ops.add_one(torch.arange(3.0)), torch.tensor([1.0, 2.0, 3.0]))


def test_built_with_the_cuda_major_of_its_torch():
    assert classic_ops.cuda_version() // 1000 == int(torch.version.cuda.split(".")[0])


def test_add_one_cuda():
    if not torch.cuda.is_available():
        import pytest

        pytest.skip("no GPU")
    x = torch.arange(1000.0, device="cuda")
    assert torch.equal(classic_ops.add_one(x).cpu(), torch.arange(1000.0) + 1)
