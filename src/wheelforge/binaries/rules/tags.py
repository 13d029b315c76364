"""A wheel's tags agree with its binaries: the glibc symbol versions they need are within the
manylinux tag, their machine is the platform tag's, and an abi3 wheel names its modules
``*.abi3.so``. (Wheels of both ABIs: an unstable-ABI wheel's one-CPython tag has no abi3 floor.)"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from wheelforge.binaries.elf import split_member
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext, Violation, WheelSummary
from wheelforge.configuration import abi

_MANYLINUX_RE = re.compile(r"^manylinux_([0-9]{1,4})_([0-9]{1,4})_(\w+)$")
_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}
_ONE_CPYTHON_RE = re.compile(r"\.cpython-\d+[^/]*\.so$")


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    if context.wheel is None:  # a file given on its own has no tags
        return
    facts, wheel, member = binary.need_symbols(), context.wheel_name, binary.display
    for platform in sorted({t.split("-")[-1] for t in context.tags}):
        legacy = next(
            (v for k, v in _LEGACY_MANYLINUX.items() if platform.startswith(k + "_")), None
        )
        m = _MANYLINUX_RE.match(platform)
        glibc_tag = (int(m[1]), int(m[2])) if m else legacy
        arch = m[3] if m else platform.split("_", 1)[-1]
        if glibc_tag and facts.glibc and facts.glibc > glibc_tag:
            glibc = f"GLIBC_{facts.glibc[0]}.{facts.glibc[1]}"
            yield Finding(
                glibc,
                f"{wheel} is tagged {platform}, but {member} needs {glibc}; "
                "let auditwheel repair compute the tag, or build on an older glibc",
                kind=f"glibc-above-{platform}",
            )
        if platform.startswith(("manylinux", "linux")) and arch != facts.machine:
            yield Finding(
                None, f"{wheel} is tagged {platform}, but {member} is built for {facts.machine}"
            )
    # Only what Python imports is looked up by that name; a library may be named anything.
    if binary.role == "extension" and context.target.python and _ONE_CPYTHON_RE.search(member):
        yield Finding(
            None,
            f"{wheel} is an abi3 wheel, but {member} is named for one CPython; name it *.abi3.so",
        )


def summary(container: str, found: Sequence[Violation], wheel: WheelSummary | None) -> str:
    """The binaries whose glibc is above one platform tag, in one line (vLLM 0.10.1.1's five
    modules under its manylinux1 tag)."""
    platform = (found[0].kind or "").removeprefix("glibc-above-")
    need = {split_member(v.binary)[1] or v.binary: v.symbol or "" for v in found}
    newest = max(need.values(), key=lambda s: tuple(int(p) for p in re.findall(r"[0-9]+", s)))
    members = ", ".join(f"{m} ({g})" for m, g in need.items())
    return (
        f"{Path(container).name} is tagged {platform}, but {len(need)} of its binaries need a "
        f"newer glibc, up to {newest}: {members}; let auditwheel repair compute the tag, or "
        "build on an older glibc"
    )


RULE = Rule(
    id="tags",
    doc="tags agree with binaries: glibc symbol versions vs the `manylinux_X_Y` tag, ELF machine "
    "vs the platform tag, extension modules named `*.cpython-3XX-*.so` inside an abi3 wheel",
    source="the binary, the wheel name",
    flavours=frozenset(abi.NAMES),  # an unstable wheel's tags are no abi3 ones
    roles=frozenset({"extension", "library", "program"}),
    needs=frozenset({"symbols"}),
    order=60,
    check=check,
    summary=summary,
)
