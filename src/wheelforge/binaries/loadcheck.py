"""``check --torch-from PYTHON``: the static verdict confirmed by loading. Each wheel's own
binaries are dlopen'ed (RTLD_NOW, as import does) in a child process of PYTHON, torch imported
first when the wheel needs torch, from the wheel unpacked beside that environment's packages (so
``$ORIGIN/../nvidia/...`` run paths find them as an install would). What the loader says is the
truth: a failure to load is an error (or, where it depends on what the host loads, the warning
the static rule gave, now confirmed); a binary that loads has its static unresolved-symbol
errors turned into warnings that say it loaded."""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from wheelforge.binaries import scope, torchcuda
from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.binaries.elf import split_member
from wheelforge.binaries.rule import Violation
from wheelforge.binaries.rules.unresolved_symbol import NEWER_THAN_TAG
from wheelforge.foundation import proc
from wheelforge.toolchain.torchprobe import TorchEnv

RULE = "load"  # the id its violations carry
_CHILD = r"""
import ctypes, json, os, sys
site, members, first = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3] == "1"
sys.path.insert(0, site)
out = {}
if first:
    try:
        import torch  # noqa: F401
    except BaseException as exc:
        print(json.dumps({"": f"import torch: {type(exc).__name__}: {exc}"}))
        sys.exit(0)
# A member that needs another of its wheel's libraries by soname, with no run path to it, loads
# once that one is loaded (its loader's order): try again while a pass loads something.
pending = list(members)
while pending:
    failed = []
    for m in pending:
        try:
            ctypes.CDLL(os.path.join(site, m), mode=ctypes.RTLD_LOCAL)
            out[m] = None
        except OSError as exc:
            out[m] = str(exc)
            failed.append(m)
    if len(failed) == len(pending):
        break
    pending = failed
print(json.dumps(out))
"""
_HOST_WORDS = ("from the host process",)
_MISSING_RE = re.compile(r"([^\s/:]+): cannot open shared object file")


def _site_packages(torch: TorchEnv) -> Path:
    return torch.include_dir.parent.parent  # site-packages/torch/include


def _admitted(requirement: str | None, torch: TorchEnv) -> bool:
    if not requirement:
        return True
    try:
        return SpecifierSet(requirement.removeprefix("torch").strip()).contains(
            torch.version, prereleases=True
        )
    except InvalidSpecifier:
        return True


def load(
    wheel: Path, members: Sequence[str], torch: TorchEnv, *, first: bool
) -> dict[str, str | None]:
    """member → dlerror's words, or None where it loaded; "" → why none was tried."""
    site_packages = _site_packages(torch)
    with tempfile.TemporaryDirectory(prefix="wheelforge-load-") as tmp:
        site = Path(tmp) / "site"
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(site)
        for entry in site_packages.iterdir() if site_packages.is_dir() else ():
            if not (site / entry.name).exists():
                (site / entry.name).symlink_to(entry)
        result = proc.run(
            [
                torch.python,
                "-c",
                _CHILD,
                str(site),
                json.dumps(list(members)),
                "1" if first else "0",
            ],
            hint="point --torch-from at an interpreter with torch installed",
            timeout=proc.TOOL_S,
            check=False,
            what="the load check",
        )
    lines = result.stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if lines else None
    except ValueError:
        found = None
    if not isinstance(found, dict):
        tail = proc.tail(result.stderr) or "no output"
        return {"": f"the child process exited with code {result.returncode}: {tail}"}
    return {str(k): (None if v is None else str(v)) for k, v in found.items()}


def confirm(checks: Sequence[BinaryCheck], torch: TorchEnv) -> list[BinaryCheck]:
    """*checks* with each wheel's own binaries loaded under *torch* and the verdict following
    what the loader said."""
    by_wheel: dict[str, list[BinaryCheck]] = {}
    for c in checks:
        container, member = split_member(c.path)
        if container and member and c.role in ("extension", "library"):
            by_wheel.setdefault(container, []).append(c)
    changed: dict[str, BinaryCheck] = {}
    where = f"torch {torch.label} ({torch.python})"
    for container, members in by_wheel.items():
        summary = members[0].wheel
        requirement = summary.declared.torch if summary else None
        if not _admitted(requirement, torch):
            for c in members:
                changed[c.path] = dataclasses.replace(
                    c, load=f"not loaded: {where} is not one its requirement ({requirement}) admits"
                )
            continue
        first = bool(requirement) or any(c.torch_abi != "no-torch" for c in members)
        said = load(
            Path(container), [split_member(c.path)[1] or "" for c in members], torch, first=first
        )
        for c in members:
            changed[c.path] = _judged(c, said, where, relies_on_torch=first)
    return [changed.get(c.path, c) for c in checks]


def _judged(
    c: BinaryCheck, said: dict[str, str | None], where: str, *, relies_on_torch: bool
) -> BinaryCheck:
    member = split_member(c.path)[1] or ""
    if "" in said:  # nothing was loaded: torch itself did not import
        return dataclasses.replace(c, load=f"not loaded under {where}: {said['']}")
    if member not in said:
        return c
    error = said[member]
    if error is None:
        # It loaded: what the static rules could not find bound there.
        kept = tuple(
            dataclasses.replace(
                v,
                severity="warning",
                message=f"{v.message} (yet it loads under {where}: the loader bound it there)",
            )
            if v.rule == "unresolved-symbol" and v.blocking and v.kind != NEWER_THAN_TAG
            else v
            for v in c.violations
        )
        return dataclasses.replace(c, violations=kept, load=f"loads under {where}")
    head, _, rest = error.partition(": ")
    reason = rest if rest and "/" in head else error  # the temporary path dlerror starts with
    note = _excuse(c, error, relies_on_torch=relies_on_torch)
    violation = Violation(
        binary=c.path,
        rule=RULE,
        symbol=None,
        message=f"{member} fails to load under {where}: {reason}{note or ''}; the loader's "
        "word overrides the static verdict",
        severity="error" if note is None else "warning",
    )
    return dataclasses.replace(
        c, violations=(*c.violations, violation), load=f"fails to load under {where}"
    )


def _excuse(c: BinaryCheck, error: str, *, relies_on_torch: bool) -> str | None:
    """Why a load failure is not the wheel's fault (said after it), None when it is."""
    if c.role == "library" and any(
        v.rule == "unresolved-symbol" and any(w in v.message for w in _HOST_WORDS)
        for v in c.violations
    ):
        return " (it depends on what the host loads: the static warning, confirmed)"
    missing = _MISSING_RE.search(error)
    if missing is None:
        return None
    major = torchcuda.runtime_major(missing[1])
    # One of several CUDA builds its wheel ships (bitsandbytes' _cuda121 beside _cuda130): the
    # package loads the one for torch's CUDA; the others are not for this torch.
    if major is not None and c.wheel and (c.wheel.torch_cuda or "").count("with CUDA") > 1:
        return " (one of the CUDA builds its wheel ships: its package loads the one for torch's)"
    # A library torch (or its CUDA build) brings, missing beside the torch the wheel admits, is
    # the wheel's fault; another (FFmpeg's, TensorRT's, the driver's, CUDA's for a wheel that
    # does not rely on torch for it) is this environment's to install.
    if relies_on_torch and (scope.TORCH_RE.match(missing[1]) or major is not None):
        return None
    return " (a library this environment lacks: installed beside it, it may load)"
