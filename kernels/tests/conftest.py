import pytest
import torch


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: needs a CUDA device")


def pytest_collection_modifyitems(config, items):
    # CUDA cases are reported as skipped, never as passed, where no GPU is present.
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "cuda" in item.keywords or "[cuda" in item.nodeid or "-cuda" in item.nodeid:
            item.add_marker(skip)
