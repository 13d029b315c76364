"""A wheel shaped like vLLM's: modules imported by name, and a library of operators loaded with
torch.ops.load_library (tests/integration/test_multi_extension.py builds it from the bundled
kernels' sources)."""

from pathlib import Path

import torch

from . import _C  # noqa: F401  the ops' schemas and their CPU activation kernels
from .moe import _moe_C  # noqa: F401  the CPU norm kernels

# the CUDA activation kernels, an operator library with no module init
torch.ops.load_library(str(Path(__file__).with_name("_ops.so")))
