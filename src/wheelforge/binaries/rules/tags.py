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
        if glibc_tag:
            yield from _libstdcxx_above(facts.versions, platform, wheel, member)
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


# The symbol-version families of libstdc++ and libgcc_s a manylinux tag also bounds (auditwheel's
# policy lists the newest of each per tag); GLIBC is judged above, as an error.
_CXX_FAMILIES = ("GLIBCXX", "CXXABI", "GCC")


def _libstdcxx_above(
    versions: Sequence[str], platform: str, wheel: str, member: str
) -> Iterator[Finding]:
    """The newest GLIBCXX_/CXXABI_/GCC_ version a binary needs above what *platform*'s policy
    guarantees: a warning, not an error. A system of that tag whose libstdc++ is the tag's
    oldest lacks it ("version `GLIBCXX_3.4.21' not found"), but libstdc++ is newer on nearly
    every system (a conda environment brings its own), where it loads: what was seen here."""
    from wheelforge.binaries import systemlibs  # auditwheel's policy, read only when judged

    policy = systemlibs.tag_policy(frozenset({platform}))
    if policy is None:
        return
    newest: dict[str, tuple[tuple[int, ...], str]] = {}
    for version in versions:
        key = systemlibs.version_key(version)
        if key is None or key[0] not in _CXX_FAMILIES or key[0] not in policy.newest:
            continue
        if policy.guarantees(version):
            continue
        if key[0] not in newest or key[1] > newest[key[0]][0]:
            newest[key[0]] = (key[1], version)
    for _, version in sorted(newest.values()):
        yield Finding(
            version,
            f"{wheel} is tagged {platform}, but {member} needs {version}, newer than the "
            f"libstdc++/libgcc_s that tag promises ({policy.newest_of(version)}): it loads only "
            "where those are newer; link them statically (-static-libstdc++ -static-libgcc), "
            "build with an older GCC, or let auditwheel repair compute the tag",
            severity="warning",
            kind=f"libstdcxx-above-{platform}",
        )


def summary(container: str, found: Sequence[Violation], wheel: WheelSummary | None) -> str:
    """The binaries whose glibc is above one platform tag, in one line (vLLM 0.10.1.1's five
    modules under its manylinux1 tag)."""
    kind = found[0].kind or ""
    cxx = kind.startswith("libstdcxx-above-")
    platform = kind.removeprefix("libstdcxx-above-" if cxx else "glibc-above-")
    need: dict[str, str] = {}
    for v in found:
        member = split_member(v.binary)[1] or v.binary
        need[member] = max(need.get(member, ""), v.symbol or "", key=_version_order)
    newest = max(need.values(), key=_version_order)
    members = ", ".join(f"{m} ({g})" for m, g in need.items())
    if cxx:
        return (
            f"{Path(container).name} is tagged {platform}, but {len(need)} of its binaries need "
            f"a newer libstdc++/libgcc_s than that tag promises, up to {newest}: {members}; they "
            "load only where those are newer; link them statically (-static-libstdc++ "
            "-static-libgcc), or let auditwheel repair compute the tag"
        )
    return (
        f"{Path(container).name} is tagged {platform}, but {len(need)} of its binaries need a "
        f"newer glibc, up to {newest}: {members}; let auditwheel repair compute the tag, or "
        "build on an older glibc"
    )


def _version_order(version: str) -> tuple[str, tuple[int, ...]]:
    """GLIBCXX_3.4.21 < GLIBCXX_3.4.30, by family then number."""
    return (version.split("_", 1)[0], tuple(int(p) for p in re.findall(r"[0-9]+", version)))


RULE = Rule(
    id="tags",
    doc="tags agree with binaries: glibc symbol versions vs the `manylinux_X_Y` tag (libstdc++'s "
    "and libgcc_s' above it: a warning), ELF machine "
    "vs the platform tag, extension modules named `*.cpython-3XX-*.so` inside an abi3 wheel",
    source="the binary, the wheel name",
    flavours=frozenset(abi.NAMES),  # an unstable wheel's tags are no abi3 ones
    roles=frozenset({"extension", "library", "program"}),
    needs=frozenset({"symbols"}),
    order=60,
    check=check,
    summary=summary,
)
