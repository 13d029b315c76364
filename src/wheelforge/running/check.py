"""``wheelforge check``: the rules of their ABI (stable, or a classic extension's unstable one)
on wheels and shared objects given by the user, and the verdict (a violation fails the
command after the results are shown)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from wheelforge.binaries import abicheck, symbols
from wheelforge.configuration.abi import AbiName
from wheelforge.configuration.settings import python_abi_flag, torch_floor_flag
from wheelforge.toolchain import shims


def run_check(
    paths: Sequence[Path],
    *,
    target: str | None,
    python_abi: str | None,
    abi: AbiName | None = None,
) -> list[abicheck.BinaryCheck]:
    """Check *paths* by the rules of *abi* (else what a wheel's tags say) against the lowest
    torch *target* (else a wheel's Requires-Dist) and the abi3 floor *python_abi* (else a
    wheel's tag), with the installed torch's shim guards and its shim_function_versions.txt
    (when it ships one)."""
    torch = torch_floor_flag(target, "--target")
    python = python_abi_flag(python_abi, "--python-abi")
    return abicheck.check_paths(
        list(paths),
        torch=torch,
        python=python,
        guards=shims.installed_torch_guards(),
        versions=shims.installed_torch_versions(),
        flavour=abi,
        torch_exports=symbols.LibraryExports(shims.installed_torch_libraries()),
    )


def require_clean(results: Sequence[abicheck.BinaryCheck]) -> None:
    """A rule's error fails the command, naming every one; a warning is logged."""
    abicheck.require_clean(results)
