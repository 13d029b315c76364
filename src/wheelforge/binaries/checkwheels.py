"""``wheelforge check``: the rules of their ABI (stable, or a classic extension's unstable one)
on wheels and shared objects given by the user, and the verdict (a violation fails the
command after the results are shown)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from wheelforge.binaries import abicheck, floors, symbols
from wheelforge.binaries.abicheck import TORCH_ABIS, BinaryCheck, TorchAbi, Verdict
from wheelforge.binaries.rule import WheelSummary
from wheelforge.configuration.abi import AbiName
from wheelforge.configuration.settings import python_abi_flag, torch_floor_flag
from wheelforge.toolchain import shims
from wheelforge.toolchain.shims import Version2


@dataclass(frozen=True, kw_only=True)
class CheckedWheel:
    """A wheel's checks together, and what they come to: what check's table and its --json
    document both say of the wheel."""

    summary: WheelSummary
    members: tuple[BinaryCheck, ...]  # its binaries' checks, and the wheel's own
    verdict: Verdict  # over all its members
    torch_abi: TorchAbi  # its own binaries' worst (bundled ones and the wheel's own left out)
    min_torch: Version2 | None  # the newest torch floor among its own binaries
    unstable: int  # how many of its binaries use libtorch's C++ API
    built_for: tuple[str, str] | None  # the torch they were built against, as the wheel says


@dataclass(frozen=True, kw_only=True)
class CheckResult:
    """What `wheelforge check` found: every binary's check (each carrying its verdict and its
    counts), and each wheel's."""

    binaries: tuple[BinaryCheck, ...]
    wheels: tuple[CheckedWheel, ...]

    def wheel(self, path: str) -> CheckedWheel | None:
        return next((w for w in self.wheels if w.summary.path == path), None)


def result_of(checks: Sequence[BinaryCheck]) -> CheckResult:
    """The checks, with each wheel's (its members in the order checked) rolled up."""
    wheels: dict[str, tuple[WheelSummary, list[BinaryCheck]]] = {}
    for c in checks:
        if c.wheel is not None:
            wheels.setdefault(c.wheel.path, (c.wheel, []))[1].append(c)
    return CheckResult(
        binaries=tuple(checks),
        wheels=tuple(_wheel(summary, members) for summary, members in wheels.values()),
    )


def _wheel(summary: WheelSummary, members: Sequence[BinaryCheck]) -> CheckedWheel:
    own = [c for c in members if c.role not in ("wheel", "bundled")]
    abis = {c.torch_abi for c in own}
    return CheckedWheel(
        summary=summary,
        members=tuple(members),
        verdict=abicheck.verdict_of([v for c in members for v in c.violations]),
        torch_abi=next((a for a in TORCH_ABIS if a in abis), "no-torch"),
        min_torch=max((c.newest_shim for c in own if c.newest_shim), default=None),
        unstable=sum(1 for c in members if c.torch_abi == "torch-unstable"),
        built_for=floors.built_for(summary.declared),
    )


def run_check(
    paths: Sequence[Path],
    *,
    target: str | None,
    python_abi: str | None,
    abi: AbiName | None = None,
    torch_from: Path | None = None,
) -> CheckResult:
    """Check *paths* by the rules of *abi* (else what a wheel's tags say) against the lowest
    torch *target* (else a wheel's Requires-Dist) and the abi3 floor *python_abi* (else a
    wheel's tag), with the installed torch's shim guards and its shim_function_versions.txt
    (when it ships one)."""
    torch = torch_floor_flag(target, "--target")
    python = python_abi_flag(python_abi, "--python-abi")
    if torch_from is not None:
        return _loaded(paths, torch_from, torch=torch, python=python, abi=abi)
    return result_of(
        abicheck.check_paths(
            list(paths),
            torch=torch,
            python=python,
            guards=shims.installed_torch_guards(),
            versions=shims.installed_torch_versions(),
            flavour=abi,
            torch_exports=symbols.LibraryExports(
                shims.installed_torch_libraries(), version=shims.installed_torch_release()
            ),
        )
    )


def require_clean(result: CheckResult) -> None:
    """A rule's error fails the command, naming every one; a warning is logged."""
    abicheck.require_clean(result.binaries)


def _loaded(
    paths: Sequence[Path],
    torch_from: Path,
    *,
    torch: Version2 | None,
    python: Version2 | None,
    abi: AbiName | None,
) -> CheckResult:
    """The static check against the torch of *torch_from* (its headers' guards, its libraries'
    exports), confirmed by loading each binary there (binaries/loadcheck.py)."""
    from wheelforge.binaries import loadcheck
    from wheelforge.toolchain import torchprobe

    env = torchprobe.probe_torch(torch_from)
    root = env.include_dir.parent
    checks = abicheck.check_paths(
        list(paths),
        torch=torch,
        python=python,
        guards=shims.header_guards(env.include_dir),
        versions=shims.versions_file(root),
        flavour=abi,
        torch_exports=symbols.LibraryExports(env.library_dirs, version=env.label),
    )
    return result_of(loadcheck.confirm(checks, env))
