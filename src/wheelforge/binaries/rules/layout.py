"""A wheel installs inside its folder: no member an installer would write outside it (an
absolute path or ``..``), and a ``NAME-VERSION.dist-info/METADATA``, without which no installer
accepts it; and its RECORD says what it holds (PEP 376, PEP 427): every member listed once, with
the sha256 and size it has, and nothing listed that is not there. pip and ``wheel unpack``
check the hashes; a wheel whose RECORD lies passed ``check`` before (issue 21)."""

from __future__ import annotations

import csv
from collections.abc import Iterator

from wheelforge.binaries import bounded
from wheelforge.binaries.facts import BinaryFacts, RecordFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext
from wheelforge.configuration import abi

# RECORD findings shown one by one; the rest are counted (a RECORD copied from another wheel).
_SHOWN = 10
# Digests too weak for RECORD (PEP 427 asks for sha256 or stronger).
_WEAK = ("md5", "sha1", "sha224")


def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
    if context.wheel is None:
        return
    names, wheel = list(context.wheel.names), context.wheel_name
    for name in bounded.unsafe_member_names(names):
        yield Finding(
            None,
            f"{wheel} has the member {name!r}, which an installer would write outside its "
            "folder (an absolute path or '..'); rebuild the wheel with relative member names",
        )
    if not any(n.endswith(".dist-info/METADATA") and n.count("/") == 1 for n in names):
        yield Finding(
            None,
            f"{wheel} has no NAME-VERSION.dist-info/METADATA, so no installer accepts it; "
            "build it with a wheel builder",
        )
    dist_infos = sorted({n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")})
    if len(dist_infos) > 1:
        yield Finding(
            None,
            f"{wheel} has {len(dist_infos)} .dist-info folders ({', '.join(dist_infos[:3])}), "
            "and installers refuse a wheel of more than one; build it with a wheel builder",
        )
    record = context.wheel.record
    if record is not None:
        problems = list(_record_problems(record))
        for message in problems[:_SHOWN]:
            yield Finding(
                None, f"{wheel}: {message}; build the wheel again (RECORD is written last)"
            )
        if len(problems) > _SHOWN:
            yield Finding(None, f"{wheel}: {len(problems) - _SHOWN} more RECORD problems")


def _record_problems(record: RecordFacts) -> Iterator[str]:
    for name in record.duplicates:
        yield f"the member {name!r} appears more than once (installers keep one of them)"
    if record.member is None or record.text is None:
        yield "has no NAME-VERSION.dist-info/RECORD, so no installer can check what it holds"
        return
    listed: dict[str, tuple[str, str]] = {}
    try:
        for row in csv.reader(record.text.splitlines()):
            if row and row[0]:
                listed[row[0]] = (row[1] if len(row) > 1 else "", row[2] if len(row) > 2 else "")
    except csv.Error as exc:  # a field beyond csv's limit (128 KiB): no installer reads it
        yield f"its RECORD is not CSV an installer reads ({exc})"
        return
    for name, digest, size in record.digests:
        if name == record.member:
            continue  # RECORD cannot hold its own hash
        if name not in listed:
            yield f"the member {name!r} is not in RECORD"
            continue
        given, given_size = listed.pop(name)
        algorithm = given.partition("=")[0]
        if not given:
            yield f"RECORD gives {name!r} no hash (only RECORD itself may go without one)"
        elif algorithm in _WEAK:
            yield f"RECORD gives {name!r} a {algorithm} hash; PEP 427 asks for sha256 or stronger"
        elif algorithm == "sha256" and given != digest:
            yield f"the member {name!r} does not have the sha256 RECORD gives it"
        elif given_size and given_size != str(size):
            yield f"the member {name!r} is {size} bytes, not the {given_size} RECORD gives"
    listed.pop(record.member, None)
    for name in listed:
        yield f"RECORD lists {name!r}, which the wheel does not hold"


RULE = Rule(
    id="layout",
    doc="the wheel installs inside its folder: no member named with an absolute path or `..`, "
    "a `NAME-VERSION.dist-info/METADATA`, and a RECORD that lists every member once with its "
    "sha256 and size",
    source="the wheel's member names, its RECORD and its members' bytes (PEP 376, PEP 427)",
    wheel_needs=frozenset({"record"}),
    flavours=frozenset(abi.NAMES),
    roles=frozenset({"wheel"}),
    order=70,
    check=check,
)
