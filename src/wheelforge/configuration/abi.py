"""The ABIs a matrix can build for (``abi: stable`` or ``abi: unstable``): one Abi value each,
owning all the ABI decides. Before torch is probed: whether torch versions multiply the
variants, whether the wheel is abi3, whether it has a torch target version, what it requires of
torch; its name is what each binary rule declares it applies to (binaries/registry.py). Given a
probed torch (``for_torch``, the facts as plain data: TorchFacts): how sources see torch and
Python, what the link adds, how the module and wheel are named and pinned (AbiForTorch, the
``abi`` of a plan). Nothing else asks which ABI a matrix names: it asks the value (``of``).

The value lives in configuration, below toolchain where torch is probed: a probed torch
(toolchain/torchprobe.TorchEnv) is handed in as the TorchFacts it satisfies, so nothing here
imports a layer above; what differs between the extensions of one wheel (their include
folders, TORCH_EXTENSION_NAME) is the planner's."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from packaging.version import Version

from wheelforge.configuration.matrix.torchspec import TorchSpec, target_macro

# The one spelling of the ABIs' names: matrix.yaml's `abi`, the rules' `flavours`, the reports.
AbiName = Literal["stable", "unstable"]

Rel = Callable[[Path], str]  # a path as the compile commands name it (VariantPlan.command_path)


class MatrixFacts(Protocol):
    """What the ABI reads of the matrix (configuration/matrix/model.Matrix, which names its ABI
    by AbiName: the model imports this module, so this one reads the matrix by shape)."""

    @property
    def torch(self) -> TorchSpec: ...
    @property
    def python_abi(self) -> str: ...  # cp310
    @property
    def limited_api_macro(self) -> str: ...
    @property
    def uses_torch(self) -> bool: ...  # whether any binary uses torch (Matrix.uses_torch)


class TorchFacts(Protocol):
    """What the ABI reads of a probed torch (toolchain/torchprobe.TorchEnv holds them)."""

    @property
    def version(self) -> Version: ...
    @property
    def cuda(self) -> str | None: ...
    @property
    def include_dir(self) -> Path: ...  # torch/include: the stable headers
    @property
    def include_dirs(self) -> tuple[Path, ...]: ...  # every folder cpp_extension names
    @property
    def python_include(self) -> Path: ...
    @property
    def python_version(self) -> str: ...
    @property
    def ext_suffix(self) -> str: ...
    @property
    def cxx11_abi(self) -> int: ...
    @property
    def cxx_std(self) -> int: ...
    @property
    def cuda_include_dirs(self) -> tuple[Path, ...]: ...


@dataclass(frozen=True, kw_only=True)
class AbiForTorch:
    """What the ABI decides about a build against one probed torch: how sources see torch and
    Python, what the link adds, and how the module and wheel are named and pinned; *kind* is the
    Abi that decided it (and what it decides before torch is probed)."""

    kind: Abi
    # The wheel's torch floor: the highest of its extensions' target versions (TorchSpec.floor)
    target: tuple[int, int]
    # for every extension (TORCH_EXTENSION_NAME and the target version are each one's own)
    defines: tuple[str, ...]
    includes: tuple[str, ...]  # torch's and Python's, after each extension's own
    force_include: tuple[str, ...]  # -include of the weak-shims header (Abi.weak_shims)
    extra_ldflags: tuple[str, ...]
    abi_tag: str  # cp310-abi3, or cp311-cp311
    module_suffix: str  # .abi3.so, or CPython's extension suffix
    torch_requirement: str
    # No binary of the wheel uses torch (every extension `kind: plain`): torch_requirement is
    # the matrix's torch as written (the project's own), no floor or pin (torch_free_requirement)
    torch_free: bool = False
    # The C++ standard the sources compile with (-std=c++17): the unstable ABI's is the one the
    # torch it compiles against passes in its cpp_extension (c++20 from torch 2.12)
    cxx_std: int = 17
    # Searched after the toolkit's own headers (-isystem): the CUDA headers pip installed beside
    # a CUDA build of torch (cusparse.h, which ATen/cuda/CUDAContextLight.h includes)
    system_includes: tuple[str, ...] = ()

    @property
    def name(self) -> AbiName:
        """The ABI's name, as matrix.yaml writes it (binaries/ filters its rules by it)."""
        return self.kind.name

    def defines_for(self, target: tuple[int, int]) -> tuple[str, ...]:
        """The defines of a shared object compiled for the torch *target* (Matrix.torch_target_of):
        a stable-ABI one's target version, major << 56 | minor << 48 (torch/csrc/stable/version.h),
        then the ABI's own."""
        own = (f"-DTORCH_TARGET_VERSION={target_macro(target)}",) if self.kind.torch_target else ()
        return (*own, *self.defines)


# How an ABI decides, given a probed torch: (the ABI, the matrix, torch, the weak-shims
# header, how the compile commands spell a path) -> its decisions.
Decide = Callable[["Abi", MatrixFacts, TorchFacts, Path, Rel], AbiForTorch]


@dataclass(frozen=True, kw_only=True)
class Abi:
    """One ABI's behaviour, as data: a new ABI is one more value of this."""

    # As matrix.yaml writes it; each ABI rule declares the ABIs it applies to by this name
    # (binaries/registry.applicable): which checks apply is the rules' own data.
    name: AbiName
    # One build per torch version, each wheel pinned to the torch it was built against (else
    # one binary for every torch from the target up).
    per_torch: bool
    # Python's limited API: tagged abi3 for every CPython from python-abi up.
    abi3: bool
    # Compiled for a torch target version (-DTORCH_TARGET_VERSION): the build torch must be at
    # least the target, and torch's stable headers hide what is newer (TORCH_FEATURE_VERSION).
    torch_target: bool
    # Every source force-includes the weak-shims header (torch's CUDA-only shims declared weak,
    # so the binary also loads on a CPU-only torch); the plan generates it.
    weak_shims: bool
    _decide: Decide = field(repr=False, compare=False)

    def torches(self, spec: TorchSpec) -> tuple[str | None, ...]:
        """The torch versions that multiply the variants (None: one variant for every torch)."""
        return tuple(str(v) for v in spec.versions) if self.per_torch else (None,)

    def requirement(self, matrix: MatrixFacts) -> str | None:
        """The wheel's Requires-Dist on torch as known before a build; None when the build's
        torch decides it (an sdist marks it Dynamic)."""
        if (own := torch_free_requirement(matrix)) is not None:
            return own
        return None if self.per_torch else matrix.torch.requirement

    def build_requirement(self, spec: TorchSpec) -> str:
        """The torch a build environment without one installs (the PEP 517 backend)."""
        if spec.installed:  # `torch: installed`: whichever torch the environment holds
            return "torch"
        return f"torch=={spec.versions[0]}" if self.per_torch else spec.requirement

    def for_torch(
        self, matrix: MatrixFacts, torch: TorchFacts, *, weak: Path, rel: Rel
    ) -> AbiForTorch:
        """What this ABI decides for a build of *matrix* against *torch*; *weak* is the
        weak-shims header's path (force-included where weak_shims), *rel* spells paths."""
        decided = self._decide(self, matrix, torch, weak, rel)
        if (own := torch_free_requirement(matrix)) is not None:
            return dataclasses.replace(decided, torch_requirement=own, torch_free=True)
        return decided


def torch_free_requirement(matrix: MatrixFacts) -> str | None:
    """The one place a wheel's torch requirement stops following its ABI: when none of its
    binaries uses torch (every extension ``kind: plain``, loaded with ctypes: no torch header,
    no libtorch link), it requires the torch the matrix names as written, the project's own
    range (bitsandbytes: torch<3,>=2.4), not a stable-ABI floor or a pinned torch; None when a
    binary uses torch."""
    return None if matrix.uses_torch else matrix.torch.as_written


def _stable(abi: Abi, matrix: MatrixFacts, torch: TorchFacts, weak: Path, rel: Rel) -> AbiForTorch:
    """One binary for every torch from the target up: torch's stable headers hide what is newer
    than the target, Python's limited API keeps the abi3 tag true."""
    return AbiForTorch(
        kind=abi,
        target=matrix.torch.floor,
        # Each shared object's -DTORCH_TARGET_VERSION comes first (AbiForTorch.defines_for).
        defines=(f"-DPy_LIMITED_API={matrix.limited_api_macro}",),
        # Python's headers too: a source may include <Python.h> (Py_LIMITED_API still holds).
        includes=tuple(f"-I{rel(d)}" for d in (torch.include_dir, torch.python_include)),
        force_include=("-include", rel(weak)),
        extra_ldflags=(),
        abi_tag=f"{matrix.python_abi}-abi3",
        module_suffix=".abi3.so",
        torch_requirement=matrix.torch.requirement,
    )


def _unstable(
    abi: Abi, matrix: MatrixFacts, torch: TorchFacts, _weak: Path, rel: Rel
) -> AbiForTorch:
    """torch's full C++ API, as torch.utils.cpp_extension compiles it: every include folder,
    Python's headers (pybind11), the C++ ABI libtorch was built with; one torch, one CPython."""
    cp = "cp" + torch.python_version.replace(".", "")
    # as torch.utils.cpp_extension.CUDAExtension links them (classic extensions use c10::cuda)
    cuda_libs = ("-lc10_cuda", "-ltorch_cuda") if torch.cuda else ()
    return AbiForTorch(
        kind=abi,
        target=matrix.torch.target,
        defines=(
            "-DTORCH_API_INCLUDE_EXTENSION_H",
            f"-D_GLIBCXX_USE_CXX11_ABI={torch.cxx11_abi}",
        ),
        includes=tuple(f"-I{rel(d)}" for d in (*torch.include_dirs, torch.python_include)),
        force_include=(),
        extra_ldflags=(
            "-ltorch_python",
            *cuda_libs,
        ),  # -ltorch_python: pybind11 bindings of torch's types
        abi_tag=f"{cp}-{cp}",  # the full Python C API: one CPython only
        module_suffix=torch.ext_suffix,
        torch_requirement=f"torch=={torch.version.major}.{torch.version.minor}.*",
        # as torch.utils.cpp_extension of that torch compiles (torch 2.14's headers #error below C++20)
        cxx_std=torch.cxx_std,
        # A provisioned toolkit holds the compiler, not cusparse.h and its kind: those of the
        # torch environment's CUDA, after the toolkit's own (its cuda_runtime.h wins).
        system_includes=tuple(w for d in torch.cuda_include_dirs for w in ("-isystem", rel(d))),
    )


STABLE = Abi(
    name="stable",
    per_torch=False,
    abi3=True,
    torch_target=True,
    weak_shims=True,
    _decide=_stable,
)
UNSTABLE = Abi(
    name="unstable",
    per_torch=True,
    abi3=False,
    torch_target=False,
    weak_shims=False,
    _decide=_unstable,
)
ABIS: dict[str, Abi] = {a.name: a for a in (STABLE, UNSTABLE)}
NAMES: tuple[AbiName, ...] = tuple(a.name for a in ABIS.values())  # in the order docs list them


def of(name: str) -> Abi:
    """The ABI matrix.yaml's ``abi`` names (the reader has checked the name)."""
    return ABIS[name]
