"""Source distributions: pyproject.toml, the matrix, and every file the matrix names (extension
sources, include folders, Python packages, tests: planning/selection.sdist_files, the same walk
and rules as the wheel's members), plus PKG-INFO, in a ``.tar.gz`` named per PEP 625.
Reproducible: members sorted, one timestamp (SOURCE_DATE_EPOCH, else 1980-01-01), owner
root:root, modes 0644/0755, and a gzip header without a time or a file name."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import tempfile
from pathlib import Path

from wheelforge.configuration import abi
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.foundation import readers, writers
from wheelforge.packaging.wheel import core_metadata, source_date_epoch
from wheelforge.planning import selection


def sdist_name(matrix: Matrix) -> str:
    """``{name}-{version}`` with the name normalized as in wheel names (PEP 625)."""
    return f"{matrix.package.wheel_name}-{matrix.package.version}"


def _member(name: str, size: int, executable: bool, mtime: int) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    info.mtime = mtime
    info.mode = 0o755 if executable else 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def write_sdist(matrix: Matrix, root: Path, dest_dir: Path) -> Path:
    """Write the sdist into *dest_dir* (atomically) and return it."""
    base = sdist_name(matrix)
    pkg_info = core_metadata(
        matrix.package,
        matrix.requires_python,
        version=matrix.package.version,
        torch_requirement=abi.of(matrix.abi).requirement(matrix),
        metadata_version="2.2",
    ).encode()
    members = [(f"{base}/{name}", path) for name, path in selection.sdist_files(matrix, root)]
    epoch = source_date_epoch()
    with tempfile.TemporaryDirectory(
        prefix=".sdist-", dir=dest_dir if dest_dir.is_dir() else None
    ) as tmp:
        target = Path(tmp) / f"{base}.tar.gz"
        with (
            target.open("wb") as raw,
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz,
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
        ):
            entries = [(f"{base}/PKG-INFO", None), *members]
            for name, path in sorted(entries, key=lambda e: e[0]):
                data = (
                    pkg_info if path is None else readers.read_bytes(path, cap=readers.PACKED_CAP)
                )
                executable = path is not None and os.access(path, os.X_OK)
                tar.addfile(_member(name, len(data), executable, epoch), io.BytesIO(data))
        return writers.publish(target, dest_dir)
