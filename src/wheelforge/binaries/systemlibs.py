"""The system libraries a manylinux wheel links (glibc's, libgcc_s, libatomic, libstdc++): what
each exports and since which symbol version (data/system-exports.json, read from the real
libraries by tools/gen_system_exports.py), and what a wheel's platform tag guarantees of them
(auditwheel's manylinux policy: the newest GLIBC_, GLIBCXX_, CXXABI_, GCC_ version each tag
promises). The unresolved-symbol rule asks whether an unversioned reference binds there on every
system the tag admits."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

# What an unversioned reference to a symbol finds in a system library on the oldest system a tag
# admits: it binds ("yes"); the library has it only from a newer version on ("newer"); glibc
# before 2.34 kept it in libdl/libpthread/librt/libutil/libanl, not libc.so.6 ("moved"); the
# library does not have it, as far as the data knows ("no").
Availability = Literal["yes", "newer", "moved", "no"]
_VERSION_RE = re.compile(r"^([A-Z]+)_([0-9]{1,4}(?:\.[0-9]{1,4}){0,3})$")
_TAG_RE = re.compile(r"^(manylinux_[0-9]{1,4}_[0-9]{1,4}|manylinux1|manylinux2010|manylinux2014)_")


def version_key(version: str) -> tuple[str, tuple[int, ...]] | None:
    """("GLIBC", (2, 34)) of GLIBC_2.34; None for a name that is no numbered version."""
    m = _VERSION_RE.match(version)
    return (m[1], tuple(int(p) for p in m[2].split("."))) if m else None


@dataclass(frozen=True)
class SystemExports:
    """data/system-exports.json as read: per library soname, per symbol its oldest and its
    default version."""

    libraries: dict[str, dict[str, tuple[str, str]]]
    merged_into_libc: str  # GLIBC_2.34
    merged_from: tuple[str, ...]  # the libraries whose functions moved into libc.so.6 then
    machine: str  # the machine the libraries were read on (x86_64)

    def knows(self, soname: str) -> bool:
        return soname in self.libraries

    def availability(self, soname: str, symbol: str, tag: TagPolicy | None) -> Availability:
        """Whether an unversioned *symbol* binds in *soname* on the oldest system *tag* admits
        (no tag, or another machine's: whether the library has it at all)."""
        found = self.libraries.get(soname, {}).get(symbol)
        if found is None:
            return "no"
        oldest, default = found
        if tag is None or tag.machine != self.machine:
            return "yes"
        if tag.guarantees(default):
            return "yes"
        if soname == "libc.so.6" and default == self.merged_into_libc and oldest != default:
            return "moved"
        return "yes" if tag.guarantees(oldest) else "newer"


@cache
def system_exports() -> SystemExports:
    text = resources.files("wheelforge").joinpath("data/system-exports.json").read_text("utf-8")
    raw = json.loads(text)
    libraries = {
        soname: {
            name: (v, v) if isinstance(v, str) else (v[0], v[1]) for name, v in symbols.items()
        }
        for soname, symbols in raw["libraries"].items()
    }
    merged = raw["merged_into_libc"]
    return SystemExports(
        libraries=libraries,
        merged_into_libc=merged["version"],
        merged_from=tuple(merged["from"]),
        machine=raw["machine"],
    )


@dataclass(frozen=True)
class TagPolicy:
    """What a manylinux tag guarantees: its name, machine and the newest version of each
    symbol-version family (GLIBC 2.28, GLIBCXX 3.4.24, ...), from auditwheel's policy."""

    name: str
    machine: str
    newest: dict[str, tuple[int, ...]]

    def guarantees(self, version: str) -> bool:
        key = version_key(version)
        if key is None:
            return False
        family, number = key
        top = self.newest.get(family)
        return top is not None and number <= top

    def newest_of(self, version: str) -> str:
        """The newest version of *version*'s family the tag guarantees (GLIBC_2.17)."""
        key = version_key(version)
        top = self.newest.get(key[0]) if key else None
        return f"{key[0]}_{'.'.join(str(p) for p in top)}" if key and top else "none of them"

    @property
    def glibc(self) -> str:
        return ".".join(str(p) for p in self.newest.get("GLIBC", ()))


@cache
def _policies() -> tuple[dict[str, object], ...]:
    text = (
        resources.files("auditwheel.policy")
        .joinpath("manylinux-policy.json")
        .read_text(encoding="utf-8")
    )
    return tuple(json.loads(text))


def tag_policy(tags: frozenset[str]) -> TagPolicy | None:
    """The policy of the oldest manylinux tag among a wheel's platform tags (what it promises to
    load on); None when it has none (a linux_x86_64 wheel promises nothing)."""
    found: list[TagPolicy] = []
    for tag in tags:
        platform = tag.rsplit("-", 1)[-1]
        m = _TAG_RE.match(platform)
        if not m:
            continue
        name, machine = m[1], platform[len(m[0]) :]
        for policy in _policies():
            aliases = policy.get("aliases") or []
            if policy.get("name") != name and name not in aliases:  # type: ignore[operator]
                continue
            versions = policy.get("symbol_versions") or {}
            per_machine = versions.get(machine) if isinstance(versions, dict) else None
            if not isinstance(per_machine, dict):
                continue
            newest = {}
            for family, listed in per_machine.items():
                keys = [k for v in listed if (k := version_key(f"{family}_{v}")) is not None]
                if keys:
                    newest[family] = max(keys)[1]
            found.append(TagPolicy(name=str(policy["name"]), machine=machine, newest=newest))
    return min(found, key=lambda p: p.newest.get("GLIBC", ()), default=None)
