"""Packing a PEP 427 wheel: the members its plan lists (planning/selection.py chose them: the
Python packages, package data, licenses, the shared objects), METADATA, WHEEL and RECORD (with
hashes), with fixed timestamps and order so the same inputs give the same bytes."""

from __future__ import annotations

import hashlib
import os
import stat
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from wheelforge import __version__
from wheelforge.configuration import coremetadata
from wheelforge.foundation import fsutil, readers
from wheelforge.foundation.errors import BuildError, ConfigError

if TYPE_CHECKING:  # `inspect` and `check`, which read wheels, load no matrix and no planning
    from wheelforge.configuration.matrix.model import PackageConfig
    from wheelforge.planning.plan import VariantPlan
    from wheelforge.planning.selection import Member

# Timestamp of every member unless SOURCE_DATE_EPOCH says otherwise: the zip format's earliest.
_DEFAULT_EPOCH = 315532800


@dataclass(frozen=True, kw_only=True)
class WheelContents:
    filename: str
    files: tuple[tuple[str, Path], ...]  # (path in the wheel, file on disk)
    metadata: str
    wheel: str
    dist_info: str
    extra: tuple[tuple[str, str], ...] = ()  # (path under .dist-info, text): SBOM, build info

    def digest(self) -> str:
        """A hash of everything that goes into the wheel, to skip re-packing unchanged input."""
        h = hashlib.sha256()
        for arcname, path in self.files:
            h.update(arcname.encode())
            h.update(bytes.fromhex(fsutil.sha256(path)))
        h.update(self.metadata.encode())
        h.update(self.wheel.encode())
        for name, text in self.extra:
            h.update(name.encode())
            h.update(text.encode())
        return h.hexdigest()


def core_metadata(
    package: PackageConfig,
    requires_python: str,
    *,
    version: str,
    torch_requirement: str | None,
    metadata_version: str | None = None,
) -> str:
    """Core metadata (METADATA, PKG-INFO) from the matrix's package section, written as the
    specification says (configuration/coremetadata.py: no header folded, the readme in the
    body). A None torch requirement is marked Dynamic: an sdist of an unstable-ABI build learns
    it at build time."""
    pkg = package
    # The package's own version (pyproject fields may need 2.4), raised to what the caller needs
    # (an sdist's Dynamic field needs 2.2).
    versions = [pkg.metadata_version, *([metadata_version] if metadata_version else [])]
    headers = [
        ("Metadata-Version", max(versions, key=lambda v: tuple(int(x) for x in v.split(".")))),
        ("Name", pkg.name),
        ("Version", version),
    ]
    if torch_requirement is None:
        headers.append(("Dynamic", "Requires-Dist"))
    if pkg.summary:
        headers.append(("Summary", pkg.summary))
    if pkg.license:
        headers.append(("License", pkg.license))
    headers.append(("Requires-Python", requires_python))
    if torch_requirement is not None:
        headers.append(("Requires-Dist", torch_requirement))
    headers += [("Requires-Dist", dep) for dep in pkg.dependencies]
    headers += _matrix_metadata(pkg)
    # pyproject.toml's [project] fields, as pyproject-metadata wrote them (configuration/matrix/pyproject.py).
    headers += pkg.extra_metadata
    return coremetadata.render(headers, pkg.description)


def _matrix_metadata(pkg: PackageConfig) -> list[tuple[str, str]]:
    """The headers of matrix.yaml's authors, maintainers, urls (home-page, download-url), classifiers and
    keywords (core metadata 2.1).
    Author and Author-email are single fields: several authors are one comma-separated list
    each, as PEP 621's tools write them."""
    out: list[tuple[str, str]] = []
    # Maintainer's after Author's, as setuptools writes them (setuptools/_core_metadata.py's
    # write_pkg_file: each written as given, a maintainer equal to the author too)
    for field, people in (("Author", pkg.authors), ("Maintainer", pkg.maintainers)):
        names = [a for a in people if "@" not in a]
        emails = [a for a in people if "@" in a]
        if names:
            out.append((field, ", ".join(names)))
        if emails:
            out.append((f"{field}-email", ", ".join(emails)))
    if pkg.home_page:
        out.append(("Home-page", pkg.home_page))
    if pkg.download_url:
        out.append(("Download-URL", pkg.download_url))
    out += [("Project-URL", f"{label}, {url}") for label, url in pkg.urls]
    out += [("Classifier", c) for c in pkg.classifiers]
    if pkg.keywords:
        out.append(("Keywords", ",".join(pkg.keywords)))
    for extra, requirements in pkg.optional_dependencies:
        out.append(("Provides-Extra", extra))
        out += [("Requires-Dist", _for_extra(r, extra)) for r in requirements]
    return out


def _for_extra(requirement: str, extra: str) -> str:
    """A requirement of *extra* as setuptools writes it: its own marker kept, ``extra == ...``
    joined to it (setuptools/_core_metadata.py's _include_extra)."""
    # Here, not at the top: `inspect` loads this module and never packaging's requirements.
    from packaging.markers import Marker
    from packaging.requirements import Requirement

    req = Requirement(requirement)
    parts = [f"({req.marker})" if req.marker else None, f"extra == {extra!r}"]
    req.marker = Marker(" and ".join(p for p in parts if p))
    return str(req)


def metadata_text(plan: VariantPlan) -> str:
    return core_metadata(
        plan.wheel.package,
        plan.wheel.requires_python,
        version=plan.wheel.version,
        torch_requirement=plan.abi.torch_requirement,
    )


def require_valid_metadata(plan: VariantPlan, matrix: Path) -> None:
    """Before anything compiles: the METADATA the wheel of *plan* will carry is one PyPI takes
    (configuration/coremetadata.py), else a ConfigError naming the field. The matrix reader
    refuses each bad value where it is written; this holds the whole document to it."""
    try:
        text = metadata_text(plan)
    except ValueError as exc:
        raise ConfigError(f"{matrix}: package: {exc}; fix the value") from None
    for problem in coremetadata.problems(text):
        raise ConfigError(
            f"{matrix}: package: the wheel's METADATA {problem.field} would be refused by "
            f"PyPI: {problem.message}; fix it in the package section (or pyproject.toml "
            "[project])"
        )


def wheel_text(tag: str, *, purelib: bool = False) -> str:
    return (
        "Wheel-Version: 1.0\n"
        f"Generator: wheelforge {__version__}\n"
        f"Root-Is-Purelib: {'true' if purelib else 'false'}\n"
        f"Tag: {tag}\n"
    )


def contents(
    plan: VariantPlan, platform: str, extra: tuple[tuple[str, str], ...] = ()
) -> WheelContents:
    """The wheel of *plan* as the packer writes it: the plan's members (WheelPlan.members, chosen
    when the build was planned; no folder is read here), each file checked to be there, and
    *extra*, the build's provenance files, which must be those the plan lists."""
    pkg = plan.wheel.package
    tag = f"{plan.python_tag}-{platform}"
    members = plan.wheel.members
    for member in members:
        if member.source is not None and not member.source.is_file():
            raise BuildError(_missing(plan, member))
    planned = {m.path for m in members if m.kind == "metadata"}
    given = {f"{plan.wheel.dist_info}/{name}" for name, _ in extra}
    written = {f"{plan.wheel.dist_info}/{n}" for n in ("METADATA", "WHEEL", "RECORD")}
    if given | written != planned:
        unplanned = sorted(given - planned) or sorted(planned - given - written)
        raise BuildError(
            f"variant {plan.variant.id}: the wheel's .dist-info files differ from the plan's "
            f"({', '.join(unplanned)}); this is a bug in wheelforge: please report it"
        )
    return WheelContents(
        filename=f"{pkg.wheel_name}-{plan.wheel.version}-{tag}.whl",
        files=tuple(sorted((m.path, m.source) for m in members if m.source is not None)),
        metadata=metadata_text(plan),
        wheel=wheel_text(tag),
        dist_info=plan.wheel.dist_info,
        extra=tuple(sorted(extra)),
    )


def _missing(plan: VariantPlan, member: Member) -> str:
    """The one line of a planned member whose file is not there when the wheel is packed."""
    head = f"variant {plan.variant.id}: {member.path}, planned into the wheel, is missing"
    if member.kind == "binary":
        return (
            f"{head}: the build made no {member.source} (the link's output); run the build "
            "again, and report it if it persists"
        )
    return (
        f"{head}: {member.source} was removed after the build was planned; put it back (or "
        "leave it out of matrix.yaml) and run the build again"
    )


def source_date_epoch() -> int:
    """SOURCE_DATE_EPOCH when set, else 1980-01-01: member timestamps never depend on when
    the build ran."""
    from wheelforge.configuration import settings

    value = settings.source_date_epoch(os.environ.get("SOURCE_DATE_EPOCH"))
    return _DEFAULT_EPOCH if value is None else max(value, _DEFAULT_EPOCH)


def member_info(arcname: str, *, executable: bool, compress: bool = True) -> zipfile.ZipInfo:
    """The ZipInfo every member of a wheelforge wheel gets: fixed time, mode, compression."""
    info = zipfile.ZipInfo(arcname, date_time=time.gmtime(source_date_epoch())[:6])
    mode = 0o755 if executable else 0o644
    info.external_attr = (mode | stat.S_IFREG) << 16
    info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    return info


def pack(wheel: WheelContents, dest_dir: Path, *, compress: bool = True) -> Path:
    """Write the wheel into *dest_dir*; wheel's WheelFile computes RECORD. Without *compress*
    the members are stored: for a wheel that auditwheel repairs, which unpacks it and deflates
    every member again (deflating a multi-MB library twice cost ~0.3 s)."""
    from wheel.wheelfile import WheelFile  # ~0.1 s to import: only when a wheel is packed

    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / wheel.filename
    previous = os.environ.get("SOURCE_DATE_EPOCH")
    # WheelFile stamps RECORD itself, from SOURCE_DATE_EPOCH; pin it to the same time as the rest.
    os.environ["SOURCE_DATE_EPOCH"] = str(source_date_epoch())
    try:
        with WheelFile(target, "w") as wf:
            for arcname, path in wheel.files:
                info = member_info(arcname, executable=arcname.endswith(".so"), compress=compress)
                wf.writestr(info, readers.read_bytes(path, cap=readers.PACKED_CAP))
            for name, text in (("METADATA", wheel.metadata), ("WHEEL", wheel.wheel), *wheel.extra):
                info = member_info(f"{wheel.dist_info}/{name}", executable=False, compress=compress)
                wf.writestr(info, text)
    finally:
        if previous is None:
            del os.environ["SOURCE_DATE_EPOCH"]
        else:
            os.environ["SOURCE_DATE_EPOCH"] = previous
    return target
