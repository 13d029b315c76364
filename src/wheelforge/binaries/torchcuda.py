"""Which CUDA runtime a wheel's binaries need from torch, and which torch releases bring it.

A binary that needs ``libcudart.so.12`` (or ``libcublas.so.12``, ``libnvrtc.so.12``: CUDA's
libraries whose soname major is the CUDA major) finds it only where something installed it: the
wheel itself (a member, or a requirement on nvidia-cuda-runtime-cu12 / cuda-toolkit[cudart]==12.*)
or the torch beside it, whose PyPI wheel brings the runtime of the CUDA it was built with
(data/torch-cuda.toml, read from each release's METADATA). pip picks torch by the wheel's
requirement alone, so a requirement that admits no release whose PyPI build has that CUDA major
installs it beside a torch without the library: import fails with "cannot open shared object
file".
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from email.parser import HeaderParser
from functools import cache
from importlib import resources

from packaging.requirements import InvalidRequirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from wheelforge.binaries.facts import WheelFacts
from wheelforge.binaries.symbols import Linkage
from wheelforge.foundation import numbers

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

# The rule whose reading of each binary (its Linkage: DT_NEEDED) this module weighs.
LINKAGE = "unresolved-symbol"
# CUDA's libraries whose soname's major is the CUDA major they belong to.
_RUNTIME_RE = re.compile(r"^lib(?:cudart|cublas|cublasLt|nvrtc)\.so\.([0-9]{1,3})(?:\.|$)")
# The PyPI package that installs each runtime library, and its cuda-toolkit extra: CUDA N's
# nvidia-<package>-cuN (CUDA 11, 12), nvidia-<package>==N.* and cuda-toolkit[<extra>]==N.*
# (CUDA 13 on; NVIDIA's cuda-toolkit metapackage names these extras).
_PROVIDERS = {
    "cudart": ("nvidia-cuda-runtime", "cudart"),
    "cublas": ("nvidia-cublas", "cublas"),
    "cublasLt": ("nvidia-cublas", "cublas"),
    "nvrtc": ("nvidia-cuda-nvrtc", "nvrtc"),
}


def _provider(library: str) -> tuple[str, str]:
    """(package, cuda-toolkit extra) of a runtime library (libnvrtc.so.12: nvidia-cuda-nvrtc)."""
    stem = library.removeprefix("lib").split(".so", 1)[0]
    return _PROVIDERS.get(stem, _PROVIDERS["cudart"])


def runtime_requirement(library: str, major: int) -> str:
    """The requirement that installs *library* of CUDA *major*, as a fix names it."""
    package, extra = _provider(library)
    if major <= 12:
        return f"{package}-cu{major}"
    return f"{package}=={major}.* (or cuda-toolkit[{extra}]=={major}.*)"


def runtime_major(soname: str) -> int | None:
    """The CUDA major of one of CUDA's runtime libraries (libcudart.so.12: 12), else None."""
    m = _RUNTIME_RE.match(soname)
    return int(m[1]) if m else None


@cache
def pypi_builds() -> dict[Version, Version]:
    """torch release → the CUDA release of its PyPI wheel (Linux x86_64)."""
    text = resources.files("wheelforge").joinpath("data/torch-cuda.toml").read_text("utf-8")
    return {Version(k): Version(v) for k, v in tomllib.loads(text)["pypi"].items()}


def requires_runtime(metadata: str | None, major: int, library: str = "libcudart.so") -> bool:
    """Whether a wheel's METADATA requires (unconditionally, not under an extra) the package that
    installs *library* of CUDA *major* (libcublas.so.12: nvidia-cublas-cu12)."""
    if not metadata:
        return False
    package, extra = _provider(library)
    for value in HeaderParser().parsestr(metadata).get_all("Requires-Dist") or []:
        try:
            req = numbers.requirement(value)
        except InvalidRequirement:
            continue
        if req.marker is not None and "extra" in str(req.marker):
            continue
        name = canonicalize_name(req.name)
        if name == f"{package}-cu{major}":
            return True
        runtime = name == package or (name == "cuda-toolkit" and extra in req.extras)
        if runtime and _admits_major(req.specifier, major):
            return True
    return False


def _admits_major(spec: SpecifierSet, major: int) -> bool:
    return any(spec.contains(f"{major}.{minor}.99", prereleases=True) for minor in range(10))


@dataclass(frozen=True)
class TorchFit:
    """What a torch requirement admits, weighed against a CUDA major: the releases admitted
    whose PyPI build has it, and those whose build has another."""

    major: int
    matching: tuple[Version, ...]
    other: tuple[tuple[Version, Version], ...]  # (release, its PyPI build's CUDA)

    @property
    def loads_on(self) -> str:
        """The "loads on" words: which CUDA builds of torch bring what it needs."""
        pypi = ""
        if self.matching:
            first, last = self.matching[0], self.matching[-1]
            span = f"torch {first}" if first == last else f"torch {first} to {last}"
            pypi = f"; on PyPI: {span}"
        return f"with CUDA {self.major} (a cu{self.major}x build of torch{pypi})"


def weigh(requirement: str | None, major: int) -> TorchFit:
    """The torch releases *requirement* (``torch>=2.10``; None: any) admits, by whether their
    PyPI build is of CUDA *major*."""
    spec = SpecifierSet()
    if requirement:
        try:
            spec = numbers.specifier(requirement.removeprefix("torch").strip())
        except InvalidSpecifier:
            spec = SpecifierSet()
    admitted = [(r, c) for r, c in sorted(pypi_builds().items()) if spec.contains(r)]
    return TorchFit(
        major=major,
        matching=tuple(r for r, c in admitted if c.major == major),
        other=tuple((r, c) for r, c in admitted if c.major != major),
    )


def needed_from_torch(
    needed: Iterable[str], members: set[str], metadata: str | None, *, torch: bool
) -> dict[int, str]:
    """CUDA major → the runtime library (libcudart.so.12) a binary needs that its wheel neither
    ships (*members*: the wheel's file names) nor requires: what torch must bring. *torch*:
    whether torch is there at all (the wheel requires it, or the binary links its libraries);
    without it the system's CUDA brings what it needs (cupy, onnxruntime), not torch."""
    out: dict[int, str] = {}
    if not torch:
        return out
    for name in needed:
        major = runtime_major(name)
        if major is None or name in members or requires_runtime(metadata, major, name):
            continue
        out.setdefault(major, name)
    return out


def wheel_majors(wheel: WheelFacts, requirement: str | None) -> set[int]:
    """The CUDA majors a wheel's own binaries need of torch, together (their DT_NEEDED as the
    unresolved-symbol rule read it), given its torch *requirement*."""
    from wheelforge.binaries import scope  # scope reads the system data: only when judged

    members = {scope.base(n) for n in wheel.names}
    majors: set[int] = set()
    for b in wheel.binaries:
        try:
            linkage = b.own(LINKAGE)
        except LookupError:
            continue
        if b.role != "bundled" and isinstance(linkage, Linkage):
            torch = bool(requirement) or any(scope.TORCH_RE.match(n) for n in linkage.needed)
            majors |= set(needed_from_torch(linkage.needed, members, wheel.metadata, torch=torch))
    return majors


def loads_on(wheel: WheelFacts, requirement: str | None) -> str | None:
    """Which CUDA builds of torch bring the CUDA runtime a wheel's binaries need of torch."""
    if wheel.is_torch:
        return None
    majors = sorted(wheel_majors(wheel, requirement))
    return "; ".join(weigh(requirement, m).loads_on for m in majors) or None
