import torch  # noqa: F401

from . import libtinyna  # noqa: F401
