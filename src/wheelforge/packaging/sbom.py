"""The PEP 770 SBOM inside each wheel: a CycloneDX 1.6 document (through cyclonedx-python-lib)
of the wheel, the torch it needs, the CUDA runtime linked into it and every project source.
Loaded by provenance.py only when a wheel is packed (cyclonedx takes ~0.1 s to import)."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timezone

from cyclonedx.model import ExternalReference, ExternalReferenceType, HashAlgorithm, HashType, XsUri
from cyclonedx.model.bom import Bom
from cyclonedx.model.component import Component, ComponentType
from cyclonedx.model.tool import ToolRepository
from cyclonedx.output.json import JsonV1Dot6
from packageurl import PackageURL

from wheelforge import __version__
from wheelforge.planning import reproducible
from wheelforge.planning.plan import VariantPlan

# Inputs that are not the project's own files: the SBOM names them as components (torch, the
# toolkit) or not at all (system and Python headers); build info lists them all.
_NOT_PROJECT = tuple(
    f"{name}/"
    for name in (
        reproducible.SYSTEM,
        reproducible.TOOLKIT,
        reproducible.TOOLKIT_HOST,
        reproducible.TORCH,
        reproducible.PYTHON_INCLUDE,
    )
)
_NAMESPACE = uuid.UUID("6f1c1f0e-8a53-4c43-9f55-77686565c666")  # uuid5 namespace of our serials


def _component(name: str, version: str, purl: PackageURL | None, ctype: ComponentType) -> Component:
    return Component(name=name, version=version, type=ctype, purl=purl, bom_ref=f"{name}@{version}")


def sbom(plan: VariantPlan, info: dict[str, object], *, epoch: int, build_info_name: str) -> str:
    """The CycloneDX 1.6 document: the wheel, the torch it needs, the CUDA runtime linked into
    it, and every project source with its hash; the compilers as tools; *build_info_name* is the
    build info's file, referenced as the build's metadata."""
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
    inputs = info["inputs"]
    assert isinstance(inputs, dict)
    files = [
        Component(
            name=name,
            type=ComponentType.FILE,
            bom_ref=f"file:{name}",
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=digest)],
        )
        for name, digest in inputs.items()
        if not name.startswith(_NOT_PROJECT)
    ]
    bom = Bom(
        serial_number=uuid.uuid5(_NAMESPACE, json.dumps(info, sort_keys=True)),
        components=[torch, cudart, *files],
    )
    bom.metadata.component = main
    bom.metadata.timestamp = datetime.fromtimestamp(epoch, tz=timezone.utc)
    bom.metadata.tools = ToolRepository(
        components=[
            _component(
                "wheelforge",
                __version__,
                PackageURL(type="pypi", name="wheelforge", version=__version__),
                ComponentType.APPLICATION,
            ),
            _component(
                "nvcc", f"{toolkit.version} ({toolkit.build})", None, ComponentType.APPLICATION
            ),
            _component("c++", str(info["host_compiler"]), None, ComponentType.APPLICATION),
        ]
    )
    bom.register_dependency(main, [torch, cudart])
    bom.metadata.component.external_references.add(
        ExternalReference(type=ExternalReferenceType.BUILD_META, url=XsUri(build_info_name))
    )
    return str(JsonV1Dot6(bom).output_as_string(indent=1)) + "\n"
