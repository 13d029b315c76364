"""What a build that changed nothing reads back instead of making again, from the variant's
build folder: the SBOM and build info (while the freshness stamp is the same), and what
verifying the published wheel found (while its bytes are). The reuse stamp that says which
wheel is still the build's is packaging/stamp.py's."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from wheelforge import __version__
from wheelforge.binaries.verify import WheelVerification
from wheelforge.build import freshness, ninja
from wheelforge.foundation import fsutil, readers, writers
from wheelforge.foundation.document import from_document, to_document
from wheelforge.packaging import buildinfo, provenance, wheel
from wheelforge.planning.plan import VariantPlan

# The SBOM, build info and inputs list of the last build, and the freshness stamp they were
# made under.
PROVENANCE = "provenance.json"

# wheelforge's version, the build info's schema_version (a change of its document makes it
# again, within one version: an entry of another key shape is refused too), SOURCE_DATE_EPOCH,
# the freshness stamp's sha256
Key = tuple[str, int, int, str | None]


@dataclass(frozen=True, kw_only=True)
class StoredProvenance:
    """provenance.json: the .dist-info files and inputs list made under *key*."""

    key: Key
    files: tuple[tuple[str, str], ...]  # Provenance.dist_info
    inputs: str


def dist_info_files(plan: VariantPlan) -> tuple[tuple[str, str], ...]:
    """provenance.provenance, stored beside the freshness stamp: while the stamp is the same
    (no input, output or command changed) it is read back, so a no-op starts no process
    (``ninja -t deps``, ``c++ --version``) for it. The inputs list is written into the build
    folder either way (provenance.INPUTS_NAME); the .dist-info files are returned."""
    text = freshness.stamp_text(plan)
    key: Key = (
        __version__,
        buildinfo.VERSION,
        wheel.source_date_epoch(),
        text and hashlib.sha256(text.encode()).hexdigest(),
    )
    stored = plan.build_dir / PROVENANCE
    made = _stored(stored, key) if text is not None else None
    if made is None:
        made = provenance.provenance(
            plan, lambda: freshness.recorded_inputs(plan) or ninja.inputs(plan)
        )
        if text is not None:
            document = StoredProvenance(key=key, files=made.dist_info, inputs=made.inputs)
            writers.write_if_changed(stored, json.dumps(to_document(document)) + "\n")
    writers.write_if_changed(plan.build_dir / provenance.INPUTS_NAME, made.inputs)
    return made.dist_info


def _stored(path: Path, key: Key) -> provenance.Provenance | None:
    try:
        text = readers.read_text(path, cap=readers.STATE_CAP)
        data = from_document(StoredProvenance, json.loads(text))
    except (OSError, ValueError, RecursionError, readers.FileRefused):  # DocumentError too
        return None
    if data.key != key:
        return None
    return provenance.Provenance(dist_info=data.files, inputs=data.inputs)


# What verify_wheel found in the wheel the reuse stamp names, so an unchanged wheel is not read
# again: the same bytes give the same findings. A document of its model, never code: a build
# folder is restored from CI caches and shipped in sdists, and what it holds is only read.
VERIFIED = "wheel-verified.json"


@dataclass(frozen=True, kw_only=True)
class StoredVerification:
    """wheel-verified.json: what verifying the wheel at *wheel* (of *sha256*) found, by
    wheelforge *version* (and the import check's verdict: None when it did not run). The
    findings name the wheel by its path: one copied elsewhere is verified again."""

    version: str
    wheel: str
    sha256: str
    found: WheelVerification
    imported: tuple[str, ...] | None


def remember_verification(
    published: Path, plan: VariantPlan, found: WheelVerification, imported: tuple[str, ...] | None
) -> None:
    document = StoredVerification(
        version=__version__,
        wheel=str(published),
        sha256=fsutil.sha256(published),
        found=found,
        imported=imported,
    )
    writers.write_atomic(plan.build_dir / VERIFIED, json.dumps(to_document(document)) + "\n")


def verified_before(
    published: Path, plan: VariantPlan
) -> tuple[WheelVerification, tuple[str, ...] | None] | None:
    """The findings (and the import check's verdict) stored when this very wheel was published
    by this wheelforge; None (verify again) when there are none, or they are of another wheel,
    another wheelforge or another shape."""
    try:
        text = readers.read_text(plan.build_dir / VERIFIED, cap=readers.STATE_CAP)
        data = from_document(StoredVerification, json.loads(text))
    except (OSError, ValueError, RecursionError, readers.FileRefused):  # DocumentError too
        return None
    if data.version != __version__ or data.wheel != str(published):
        return None
    if data.sha256 != fsutil.sha256(published):
        return None
    # Each violation is stored under its binary's check, without the binary's name.
    checks = tuple(
        dataclasses.replace(
            c, violations=tuple(dataclasses.replace(v, binary=c.path) for v in c.violations)
        )
        for c in data.found.abi_checks
    )
    return dataclasses.replace(data.found, abi_checks=checks), data.imported
