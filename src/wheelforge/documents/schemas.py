"""Every JSON document wheelforge writes, and the command that regenerates their shipped
schemas (``wheelforge/data/<name>.schema.json``) from their models::

    python -m wheelforge.documents.schemas

tests/unit/test_documents.py fails while a shipped schema differs from its model."""

from __future__ import annotations

import sys
from pathlib import Path

from wheelforge.documents import build_report_schema as build
from wheelforge.documents import cache_schema as cache
from wheelforge.documents import check_schema as check
from wheelforge.documents import inspect_schema as inspect
from wheelforge.documents import test_schema as test
from wheelforge.documents import variants_schema as matrix
from wheelforge.documents.kinds import DocumentKind
from wheelforge.foundation import writers
from wheelforge.packaging import buildinfo

KINDS: tuple[DocumentKind, ...] = (
    build.KIND,
    inspect.KIND,
    check.KIND,
    matrix.KIND,
    test.KIND,
    cache.LIST_KIND,
    cache.PRUNE_KIND,
    # Not printed but shipped inside every wheel: .dist-info/wheelforge-build.json.
    DocumentKind("build-info", buildinfo.BuildInfo, buildinfo.VERSION, "wheelforge build info"),
)


def main() -> int:
    data = Path(__file__).parents[1] / "data"
    for kind in KINDS:
        target = data / kind.schema_file
        writers.write_atomic(target, kind.schema_text())
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
