from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

GOOD_MATRIX = """\
package:
  name: demo-ops
  version: 1.2.0
  summary: demo
  packages: [demo_ops]
extension:
  name: demo_ops._C
  sources: [csrc/*.cpp, csrc/*.cu]
  include-dirs: [csrc]
torch: ">=2.10"
arch-sets:
  default: "8.0 9.0+PTX"
"""


@pytest.fixture
def project(tmp_path: Path) -> Callable[[str], Path]:
    """A minimal extension project; returns a function writing matrix.yaml and giving its path."""
    (tmp_path / "demo_ops").mkdir()
    (tmp_path / "demo_ops" / "__init__.py").write_text("from . import _C\n")
    (tmp_path / "csrc").mkdir()
    (tmp_path / "csrc" / "ops.cpp").write_text("// ops\n")
    (tmp_path / "csrc" / "kernel.cu").write_text("// kernel\n")
    (tmp_path / "csrc" / "ops.h").write_text("#pragma once\n")

    def write(text: str = GOOD_MATRIX) -> Path:
        path = tmp_path / "matrix.yaml"
        path.write_text(textwrap.dedent(text))
        return path

    return write
