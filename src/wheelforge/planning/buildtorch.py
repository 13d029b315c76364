"""Which torch each variant compiles against, and which variants are built with it: an
installed torch (--torch-from, `torch: installed`: no pip) or an environment's (envs.py), a CUDA
build of torch for an unstable-ABI extension with .cu sources, and the pairs of torch and CUDA
release of one major (a classic extension shares torch's CUDA runtime and types)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

from wheelforge.configuration.matrix.model import Matrix
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation import log, numbers
from wheelforge.foundation.errors import EnvironmentProblem
from wheelforge.planning.variants import Variant
from wheelforge.toolchain import envs, torchprobe
from wheelforge.toolchain.torchprobe import TorchEnv

TorchKey = tuple[str | None, Path | None]  # a variant's torch: version, and the interpreter lent


def has_cuda_sources(matrix: Matrix) -> bool:
    """Whether the extension compiles any ``.cu`` source: then an unstable-ABI build needs a
    CUDA build of torch (its CUDA headers, libc10_cuda)."""
    # A generated source (its pattern names the build folder's) counts by its pattern's suffix.
    return any(
        spec.pattern.endswith(".cu")
        or any(p.suffix == ".cu" for p in matrix.root.glob(spec.pattern))
        for ext in matrix.extensions
        for spec in ext.sources
    )


def build_torch(variant: Variant, settings: BuildSettings, *, early: bool) -> TorchEnv:
    """The torch *variant* compiles against: an installed one (--torch-from, `torch:
    installed`: no pip), else an environment's (environment_torch); for the unstable ABI and .cu sources, a CUDA
    build of torch, checked."""
    tests = settings.matrix.tests
    cuda = variant.torch is not None and has_cuda_sources(settings.matrix)
    if variant.torch_from is not None:
        torch = torchprobe.probe_torch(variant.torch_from, cache=settings.cache_dir, early=early)
        if cuda and torch.cuda is None:
            raise EnvironmentProblem(
                f"the torch of {variant.torch_from} is {torch.label}, a CPU build, but the extension has "
                ".cu sources and compiles against a CUDA build of torch; name a Python whose torch is one"
            )
        return torch
    return environment_torch(
        variant.torch,
        python=settings.python,
        requires=tests.requires if tests else (),
        cache=settings.cache_dir,
        cuda=cuda,
        offline=settings.offline,
        early=early,
    )


# How to build without pip: the flag and the matrix spelling that name an installed torch.
INSTALLED_HINT = (
    "build against an installed torch: --torch-from PY, or torch: installed in matrix.yaml"
)


def environment_torch(
    torch: str | None,
    *,
    python: Path,
    requires: Sequence[str],
    cache: Path,
    cuda: bool = False,
    offline: bool = False,
    early: bool = False,
) -> TorchEnv:
    """An environment's torch: *python*'s for the stable ABI (*torch* None); for the unstable
    ABI, an isolated environment with exactly that torch (built on first use, shared with
    ``wheelforge test``, so *requires* are the tests' requirements), a CUDA build when *cuda*.
    *offline*: no pip: only an environment already made serves. *early*: see
    torchprobe.probe_torch."""
    if torch is not None:
        spec = envs.EnvSpec(torch=torch, requires=tuple(requires), cuda=cuda)
        if offline and envs.find(spec, cache) is None:
            raise EnvironmentProblem(
                f"torch {torch}{' (a CUDA build)' if cuda else ''} is not in the cache ({cache / envs.ENVS}), "
                f"and --offline runs no pip; {INSTALLED_HINT}"
            )
        try:
            offline_spec = dataclasses.replace(spec, requires=() if offline else spec.requires)
            python = envs.ensure_env(offline_spec, cache).python
        except envs.TorchUnavailable as exc:
            raise EnvironmentProblem(
                f"{exc.message} (is a package index reachable?); {INSTALLED_HINT}"
            ) from None
    return torchprobe.probe_torch(python, cache=cache, early=early)


def torch_key(variant: Variant) -> TorchKey:
    return variant.torch, variant.torch_from


def _cuda_major(torch: TorchEnv) -> int | None:
    return numbers.whole(torch.cuda.split(".")[0], high=numbers.MAX_MINOR) if torch.cuda else None


def pairs(chosen: Sequence[Variant], probed: Mapping[TorchKey, TorchEnv]) -> list[Variant]:
    """The unstable-ABI variants whose toolkit is of their torch's CUDA major. A classic
    extension shares torch's CUDA types and runtime (libc10_cuda, cudart), so a major mismatch
    is refused, as torch's own cpp_extension refuses it (_check_cuda_version); a variant the
    matrix also builds with a release of that major is left out instead (cuda: ["12.4", "13.0"]
    with torch 2.10 (CUDA 12.8) and 2.14 (CUDA 13.0): each torch gets the release of its own).
    The stable ABI is exempt: its binary carries its own cudart and meets torch only through
    the C shims (docs/toolkits.md). Decided by the variants' releases, so before a toolkit is
    provisioned where the torch is known (an installed one) as well as after."""

    def matches(v: Variant) -> bool:
        major = _cuda_major(probed[torch_key(v)])
        return major is None or str(major) == v.choice.release.split(".")[0]

    kept = []
    for v in chosen:
        torch = probed[torch_key(v)]
        if matches(v):
            kept.append(v)
            continue
        other = next(
            (
                o
                for o in chosen
                if matches(o) and o.arch_set == v.arch_set and torch_key(o) == torch_key(v)
            ),
            None,
        )
        if other is not None:
            log.info(
                f"variant {v.id} left out: torch {torch.label} is CUDA {torch.cuda}'s, its nvcc "
                f"CUDA {v.choice.release}'s; {other.id} builds it with CUDA {other.choice.release}"
            )
            continue
        raise EnvironmentProblem(
            f"variant {v.id}: torch {torch.label} was built with CUDA {torch.cuda}, but its nvcc is "
            f"CUDA {v.choice.release} (another major): a classic extension shares torch's CUDA runtime "
            f'and types, so build it with CUDA {_cuda_major(torch)}.x (add "{torch.cuda}" or another '
            f"{_cuda_major(torch)}.x release to cuda: in matrix.yaml), or use a torch of CUDA {v.choice.release.split('.')[0]}"
        )
    return kept
