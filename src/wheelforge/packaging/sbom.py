"""The PEP 770 SBOM inside each wheel: a CycloneDX 1.6 document (through cyclonedx-python-lib)
of the wheel, the torch it needs, the CUDA runtime linked into it, the header libraries compiled
into it (their version or commit) and every project source.
Loaded by provenance.py only when a wheel is packed (cyclonedx takes ~0.1 s to import)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from datetime import datetime, timezone

from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, XsUri
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.tool import ToolRepository
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

from wheelforge import DISTRIBUTION, __version__
from wheelforge.foundation.document import to_document
from wheelforge.packaging.buildinfo import BuildInfo
from wheelforge.planning import reproducible
from wheelforge.planning.plan import VariantPlan
from wheelforge.toolchain.headerlibs import HeaderLibrary

# Inputs that are not the project's own files: the SBOM names them as components (torch, the
# toolkit) or not at all (system and Python headers); build info lists them all.
_NOT_PROJECT = tuple(
    f"{name}/"
    for name in (
        reproducible.SYSTEM,
        reproducible.TOOLKIT,
        reproducible.TOOLKIT_HOST,
        reproducible.TORCH,
        reproducible.TORCH_CUDA,
        reproducible.PYTHON_INCLUDE,
        reproducible.HEADER_LIBRARIES,
    )
)
_NAMESPACE = uuid.UUID("6f1c1f0e-8a53-4c43-9f55-77686565c666")  # uuid5 namespace of our serials


def _component(name: str, version: str, purl: PackageURL | None, ctype: ComponentType) -> Component:
    return Component(name=name, version=version, type=ctype, purl=purl, bom_ref=f"{name}@{version}")


def _header_library(lib: HeaderLibrary) -> Component:
    """A header library compiled into the binaries: its version (or commit), where it came
    from, and the sha256 of its include folders' content."""
    version = lib.version or (lib.digest[:12] if lib.digest else "unknown")
    component = _component(
        lib.name,
        version,
        PackageURL.from_string(lib.purl) if lib.purl else None,
        ComponentType.LIBRARY,
    )
    what = {"git": "a git checkout", "folder": "a folder", "pypi": "a PyPI wheel"}[lib.origin]
    commit = f" at commit {lib.commit}" if lib.commit else ""
    component.description = (
        f"header library from {what}{commit}, compiled into the binaries; its hash: sha256 of "
        "its include folders' content (each file's path and sha256)"
    )
    if lib.digest:
        component.hashes.add(HashType(alg=HashAlgorithm.SHA_256, content=lib.digest))
    if lib.url:
        kind = (
            ExternalReferenceType.VCS if lib.origin == "git" else ExternalReferenceType.DISTRIBUTION
        )
        component.external_references.add(ExternalReference(type=kind, url=XsUri(lib.url)))
    return component


def _project_files(inputs: Mapping[str, str]) -> list[Component]:
    """The project's own files among *inputs* (name → sha256), each with its hash."""
    return [
        Component(
            name=name,
            type=ComponentType.FILE,
            bom_ref=f"file:{name}",
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=digest)],
        )
        for name, digest in inputs.items()
        if not name.startswith(_NOT_PROJECT)
    ]


def sbom(
    plan: VariantPlan,
    info: BuildInfo,
    inputs: Mapping[str, str],
    *,
    epoch: int,
    build_info_name: str,
) -> str:
    """The CycloneDX 1.6 document: the wheel, the torch it needs, the CUDA runtime linked into
    it, and every project source of *inputs* (name → sha256) with its hash; the compilers as
    tools; *build_info_name* is the build info's file, referenced as the build's metadata."""
    pkg = plan.wheel.package
    main = _component(
        pkg.name,
        plan.wheel.version,
        PackageURL(type="pypi", name=pkg.wheel_name, version=plan.wheel.version),
        ComponentType.LIBRARY,
    )
    toolkit = plan.variant.toolkit
    torch = _component(
        "torch",
        str(plan.torch.version),
        PackageURL(type="pypi", name="torch", version=str(plan.torch.version)),
        ComponentType.LIBRARY,
    )
    torch.description = f"headers compiled against; at run time: {plan.abi.torch_requirement}"
    cudart = _component("cudart_static", str(toolkit.version), None, ComponentType.LIBRARY)
    cudart.description = "the CUDA runtime, linked statically into the extension module"
    headers = [_header_library(lib) for lib in plan.compile.header_libraries]
    files = _project_files(inputs)
    bom = Bom(
        serial_number=uuid.uuid5(_NAMESPACE, json.dumps(to_document(info), sort_keys=True)),
        components=[torch, cudart, *headers, *files],
    )
    bom.metadata.component = main
    bom.metadata.timestamp = datetime.fromtimestamp(epoch, tz=timezone.utc)
    bom.metadata.tools = ToolRepository(
        components=[
            _component(
                "wheelforge",
                __version__,
                PackageURL(type="pypi", name=DISTRIBUTION, version=__version__),
                ComponentType.APPLICATION,
            ),
            _component(
                "nvcc", f"{toolkit.version} ({toolkit.build})", None, ComponentType.APPLICATION
            ),
            _component("c++", info.host_compiler, None, ComponentType.APPLICATION),
        ]
    )
    bom.register_dependency(main, [torch, cudart, *headers])
    bom.metadata.component.external_references.add(
        ExternalReference(type=ExternalReferenceType.BUILD_META, url=XsUri(build_info_name))
    )
    return str(JsonV1Dot6(bom).output_as_string(indent=1)) + "\n"
