"""wheelforge: build matrices of stable-ABI abi3 wheels for CUDA PyTorch extensions."""

__version__ = "0.1.0"
# The distribution on PyPI (``pip install wheelforge-cuda``; the name ``wheelforge`` there is
# another project's). The command and the import package stay ``wheelforge``.
DISTRIBUTION = "wheelforge-cuda"
