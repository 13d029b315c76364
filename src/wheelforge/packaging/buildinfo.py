"""The build info inside each wheel (``.dist-info/wheelforge-build.json``) as its model: what the
wheel was made with, written by foundation/document.to_document (packaging/provenance.build_info
fills it) and read back by document.from_document (read: the out-folder guard, the SBOM), its
JSON Schema generated from the same fields (``wheelforge/data/build-info.schema.json``).

The fields are in the order the document writes them, so the text is the one json.dumps wrote
for the dict this model replaced; optional keys are left out while None (``omit_if_none``)."""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wheelforge.binaries import bounded
from wheelforge.configuration.abi import AbiName
from wheelforge.foundation import readers
from wheelforge.foundation.document import from_document, schema_version, to_document
from wheelforge.foundation.errors import WheelforgeError
from wheelforge.planning.selection import BUILD_INFO_NAME

VERSION = 1  # the build info's schema_version


def _doc(text: str, **more: Any) -> dict[str, Any]:
    return {"doc": text, **more}


_OMIT = {"omit_if_none": True}


@dataclass(frozen=True, kw_only=True)
class Archs:
    """The archs a binary (or the wheel's binaries together) holds code for."""

    sass: tuple[str, ...] = field(metadata=_doc("SASS archs, as nvcc names them (sm_80)"))
    ptx: tuple[str, ...] = field(metadata=_doc("PTX archs (compute_80)"))


@dataclass(frozen=True, kw_only=True)
class ExtensionFlags:
    """One shared object's compile and link flags, path-free (its folders by their names)."""

    cxx: str
    cc: str
    nvcc: str
    ldflags: str


@dataclass(frozen=True, kw_only=True)
class Flags:
    """The wheel's flags: its one shared object's (and the -gencode flags), or, with several,
    the -gencode flags alone (each one's own under ``extensions``)."""

    cxx: str | None = field(default=None, metadata=_OMIT)
    cc: str | None = field(default=None, metadata=_OMIT)
    nvcc: str | None = field(default=None, metadata=_OMIT)
    ldflags: str | None = field(default=None, metadata=_OMIT)
    gencode: str = field(metadata=_doc("the arch set's -gencode flags"))


@dataclass(frozen=True, kw_only=True)
class ExtensionInfo:
    """One shared object of the wheel."""

    name: str
    role: str = field(metadata=_doc("extension (a module) or library (torch.ops.load_library)"))
    path: str = field(metadata=_doc("its path in the wheel"))
    archs: Archs
    flags: ExtensionFlags | None = field(default=None, metadata=_OMIT)


@dataclass(frozen=True, kw_only=True)
class ToolkitInfo:
    release: str
    build: str = field(metadata=_doc("nvcc's own build identity"))


@dataclass(frozen=True, kw_only=True)
class TorchInfo:
    headers_of: str = field(metadata=_doc("the torch whose headers it compiled against"))
    requirement: str = field(metadata=_doc("the wheel's torch requirement"))


@dataclass(frozen=True, kw_only=True)
class InputsInfo:
    """Every file the compiles read, as one digest: the list is beside the build."""

    files: int
    sha256: str = field(metadata=_doc("sha256 of the inputs list"))
    list: str = field(metadata=_doc("the inputs list's file name in the variant's build folder"))


@dataclass(frozen=True, kw_only=True)
class HeaderLibraryInfo:
    """A header library the compiles included (the SBOM names it from this)."""

    name: str
    origin: str = field(metadata=_doc("folder, git or pypi"))
    version: str | None
    commit: str | None = field(default=None, metadata=_OMIT)
    pinned: str | None = field(default=None, metadata=_OMIT)
    url: str | None = field(default=None, metadata=_OMIT)
    requirement: str | None = field(default=None, metadata=_OMIT)
    purl: str | None = field(default=None, metadata=_OMIT)
    sha256: str | None = field(default=None, metadata=_OMIT)


@dataclass(frozen=True, kw_only=True)
class GenerateInfo:
    """A generate step, as matrix.yaml writes it."""

    name: str
    run: tuple[str, ...]
    outputs: tuple[str, ...] = field(metadata=_doc("relative to the step's output folder"))


@dataclass(frozen=True, kw_only=True)
class BuildInfo:
    """What a wheelforge wheel was made with: wheelforge-build.json in its .dist-info."""

    schema_version: int = schema_version(VERSION)
    wheelforge: str = field(metadata=_doc("the wheelforge version that built it"))
    source_date_epoch: int
    variant: str = field(metadata=_doc("the variant's id"))
    arch_set: str = field(metadata=_doc("the arch set, as its arch list is written"))
    archs: Archs = field(metadata=_doc("the archs of every shared object, each once"))
    toolkit: ToolkitInfo
    host_compiler: str = field(metadata=_doc("the first line of its --version"))
    nvcc_host_compiler: str
    torch: TorchInfo
    abi: AbiName
    target_version: tuple[int, int] = field(metadata=_doc("the torch target version"))
    python_abi: str = field(metadata=_doc("the wheel's Python ABI tag"))
    prefix_maps: tuple[str, ...] = field(metadata=_doc("the folders' names the paths map to"))
    flags: Flags
    extensions: tuple[ExtensionInfo, ...]
    inputs: InputsInfo
    header_libraries: tuple[HeaderLibraryInfo, ...] | None = field(default=None, metadata=_OMIT)
    generate: tuple[GenerateInfo, ...] | None = field(default=None, metadata=_OMIT)


def text(info: BuildInfo) -> str:
    """The build info as the wheel holds it."""
    return json.dumps(to_document(info), indent=1) + "\n"


def read(wheel: Path) -> BuildInfo | None:
    """The build info of *wheel*; None for a wheel without one, or one not of this model (another
    tool's wheel, an unreadable one, or an older wheelforge's build info)."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            member = next(
                (i for i in zf.infolist() if i.filename.endswith(f".dist-info/{BUILD_INFO_NAME}")),
                None,
            )
            if member is None or member.file_size > readers.STATE_CAP:
                return None
            data = json.loads(bytes(bounded.read_member(zf, member, str(wheel))))
        return from_document(BuildInfo, data)
    except (OSError, ValueError, RecursionError, zipfile.BadZipFile, WheelforgeError):
        return None  # DocumentError is a ValueError
