"""Reading the matrix's ``wheel-variants`` mapping (PEP 825 variant wheels, experimental); the
reader of the other keys is configuration/matrix/reader.py."""

from __future__ import annotations

import yaml

from wheelforge.configuration.matrix import yamlio
from wheelforge.configuration.matrix.model import WheelVariantsConfig


def read(reader: yamlio.ModelReader, node: yaml.Node, where: str) -> WheelVariantsConfig | None:
    readers: dict[str, yamlio.KeyReader] = {
        "enabled": lambda n, w: yamlio.boolean(n, reader.problems, w),
        "null": reader.scalar,
    }
    return reader.build(
        WheelVariantsConfig, reader.section(node, WheelVariantsConfig, where, readers)
    )
