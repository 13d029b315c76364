import torch  # noqa: F401  (libtorch before the extension)

from ._C import add_one, cuda_version

__all__ = ["add_one", "cuda_version"]
