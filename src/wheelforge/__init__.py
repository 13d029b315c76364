"""wheelforge: build matrices of stable-ABI abi3 wheels for CUDA PyTorch extensions."""

__version__ = "0.1.0"
