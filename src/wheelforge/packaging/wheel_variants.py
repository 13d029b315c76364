"""PEP 825 variant wheels (experimental: PEP 825 is a draft, and so is its metadata format).

A variant wheel is the repaired wheel with a variant label in its file name and
``*.dist-info/variant.json`` mapping that label to variant properties. The properties come from
what was compiled, never from what was asked for: ``nvidia :: sm_arch`` lists the SASS
(``X_real``) and PTX (``X_virtual``) entries the fatbin reader finds in the wheel's binaries;
``nvidia :: cuda_version_lower_bound`` is the toolkit's release; an unstable-ABI build adds its
torch pin as ``abi_dependency :: torch :: X.Y``.

variantlib (the reference implementation named by PEP 825) validates every property and label,
writes variant.json and merges the index-level ``{name}-{version}-variants.json``. Its format
adds a ``providers`` table naming the plugin that detects each namespace: the format of PEP 850
(Wheel Variants: Providers, a draft extending PEP 825), schema 0.2.0, whose URL wheelforge
writes (SCHEMA_URL).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import EllipsisType
from typing import TYPE_CHECKING

from wheelforge.binaries import elf
from wheelforge.binaries.facts import BinaryContents
from wheelforge.foundation import writers
from wheelforge.foundation.errors import VerificationError
from wheelforge.packaging.wheel import member_info

if TYPE_CHECKING:
    from variantlib.models.variant_info import VariantInfo

    from wheelforge.planning.plan import VariantPlan  # `inspect` loads no planning

# variantlib takes ~0.07 s to import: the functions that use it import it, so a build that makes
# no variant wheel (and every no-op) never loads it.

NVIDIA = "nvidia"
SM_ARCH = "sm_arch"
CUDA_LOWER_BOUND = "cuda_version_lower_bound"
# variantlib's namespace for "built against this version of that package" (its resolver
# matches it against the installed torch).
ABI_DEPENDENCY = "abi_dependency"
NULL_LABEL = "null"
# The metadata format with a providers table is PEP 850's (Wheel Variants: Providers, a draft
# extending PEP 825), version 0.2.0. variantlib 0.2.2 writes the same structure under
# ".../v0.2.0.json", a URL uv (0.13.9, --preview-features wheel-variants) does not know: it
# then treats every such wheel as unsupported. It knows this one, and PEP 825's own.
SCHEMA_URL = "https://variants-schema.wheelnext.dev/peps/850/v0.2.0.json"

# The plugin that tells an installer which nvidia :: properties a machine supports; the
# requirement and entry point are the ones torch's own variant wheels name.
_NVIDIA_PROVIDER = {
    "requires": ["nvidia-variant-provider>=0.0.1,<1.0.0"],
    "plugin_api": "nvidia_variant_provider.plugin:NvidiaVariantPlugin",
}


@dataclass(frozen=True, kw_only=True)
class VariantFacts:
    """What a build is, as variant properties' raw material."""

    sm_arch: tuple[str, ...]  # "75_real", "90a_real", "120_virtual", sorted
    cuda: str  # the toolkit's release, "13.0"
    torch: str | None  # unstable ABI: the torch "major.minor" the binary is tied to


@dataclass(frozen=True, kw_only=True)
class VariantCheck:
    """A variant wheel's variant.json read back and compared with its binaries."""

    wheel: str
    label: str
    properties: tuple[str, ...]  # "nvidia :: sm_arch :: 75_real", ... as declared
    derived_sm_arch: tuple[str, ...]  # what the binaries carry
    problems: tuple[str, ...]  # disagreements and format errors; empty when consistent


def sm_arch_values(binaries: Sequence[BinaryContents]) -> tuple[str, ...]:
    """The ``nvidia :: sm_arch`` values of binaries: SASS ``sm_90a`` → ``90a_real``, PTX
    ``compute_120`` → ``120_virtual``. With several CUDA binaries, only the values all of them
    carry: a GPU runs the wheel only if every library has code for it."""
    found = [
        {f"{a.removeprefix('sm_')}_real" for a in b.sass_archs}
        | {f"{a.removeprefix('compute_')}_virtual" for a in b.ptx_archs}
        for b in binaries
        if b.entries
    ]
    return tuple(sorted(set.intersection(*found))) if found else ()


def namespaces(unstable_abi: bool) -> list[str]:
    """``default-priorities.namespace``: the same for every wheel of a release, so the
    variant.json files merge into one index file."""
    return [NVIDIA, ABI_DEPENDENCY] if unstable_abi else [NVIDIA]


def _variant_info(unstable_abi: bool) -> VariantInfo:
    from variantlib.models.variant_info import ProviderInfo, VariantInfo

    providers = {NVIDIA: ProviderInfo(**_NVIDIA_PROVIDER)}
    if unstable_abi:
        # No plugin: variantlib's resolver fills this namespace from the installed packages.
        providers[ABI_DEPENDENCY] = ProviderInfo(builtin=ABI_DEPENDENCY)
    return VariantInfo(namespace_priorities=namespaces(unstable_abi), providers=providers)


def properties(facts: VariantFacts) -> list[str]:
    """The variant properties of *facts*, as ``namespace :: feature :: value`` strings."""
    props = [f"{NVIDIA} :: {SM_ARCH} :: {v}" for v in facts.sm_arch]
    props.append(f"{NVIDIA} :: {CUDA_LOWER_BOUND} :: {facts.cuda}")
    if facts.torch is not None:
        props.append(f"{ABI_DEPENDENCY} :: torch :: {facts.torch}")
    return props


def variant_json(label: str, props: Sequence[str], *, unstable_abi: bool) -> str:
    """variant.json for one wheel; *props* empty for the null variant. variantlib checks the
    label and every property against PEP 825's alphabets."""
    from variantlib.api import make_variant_dist_info
    from variantlib.errors import ValidationError
    from variantlib.models.variant import VariantDescription, VariantProperty
    from variantlib.variant_dist_info import VariantDistInfo

    try:
        vdesc = VariantDescription(
            properties=[VariantProperty.from_str(p) for p in props], label=label
        )
        text = _with_schema(str(make_variant_dist_info(vdesc, _variant_info(unstable_abi))))
        VariantDistInfo(text, label)  # what is written must read back
    except ValidationError as error:
        raise VerificationError(f"variant {label}: not a valid PEP 825 variant: {error}") from error
    return text


def _with_schema(text: str) -> str:
    """variantlib's JSON with PEP 850's schema URL (see SCHEMA_URL), in variantlib's layout."""
    data = json.loads(text)
    data["$schema"] = SCHEMA_URL
    return json.dumps(data, indent=4, sort_keys=True) + "\n"


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_variant_wheel(plain: Path, label: str, metadata: str, dest_dir: Path) -> Path:
    """A copy of *plain* named ``…-{label}.whl`` with ``variant.json`` added (and in RECORD).
    Every other member keeps its bytes, timestamp and mode, so the result is as reproducible as
    the input."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / f"{plain.name.removesuffix('.whl')}-{label}.whl"
    data = metadata.encode()
    with zipfile.ZipFile(plain) as src, zipfile.ZipFile(target, "w") as out:
        infos = [
            i
            for i in src.infolist()
            if not i.filename.endswith(f"/{elf.VARIANT_DIST_INFO_FILENAME}")
        ]
        record = next(i for i in infos if i.filename.endswith(".dist-info/RECORD"))
        member = f"{record.filename.rsplit('/', 1)[0]}/{elf.VARIANT_DIST_INFO_FILENAME}"
        for info in infos:
            if info is record:
                out.writestr(member_info(member, executable=False), data)
                out.writestr(info, _with_record_line(src.read(info), member, data))
            else:
                out.writestr(info, src.read(info))
    return target


def _with_record_line(record: bytes, member: str, data: bytes) -> bytes:
    rows = [r for r in csv.reader(io.StringIO(record.decode())) if r and r[0] != member]
    rows.insert(len(rows) - 1, [member, _record_hash(data), str(len(data))])
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue().encode()


def variant_label(wheel: Path) -> str | None:
    """The variant label in a wheel's file name, None for a non-variant wheel."""
    from variantlib.constants import VALIDATION_WHEEL_NAME_REGEX

    match = VALIDATION_WHEEL_NAME_REGEX.fullmatch(wheel.name)
    return match.group("variant_label") if match else None


def plain_name(wheel: Path, label: str | EllipsisType | None = ...) -> str:
    """The wheel's file name without its variant label: what packaging and pip can parse. A
    caller that knows the *label* (None: the wheel has none) spares reading it from the name,
    and so loading variantlib."""
    if label is ...:
        label = variant_label(wheel)
    return wheel.name if label is None else wheel.name.removesuffix(f"-{label}.whl") + ".whl"


def read_variant_json(wheel: Path) -> str | None:
    """The text of a wheel's ``*.dist-info/variant.json``, read within bounded.py's caps."""
    with elf.open_wheel(wheel) as reader:
        name = reader.dist_info_member(elf.VARIANT_DIST_INFO_FILENAME)
        return None if name is None else reader.read_text(name)


def check_variant(wheel: Path, binaries: Sequence[BinaryContents]) -> VariantCheck | None:
    """Read a variant wheel's variant.json (None for a non-variant wheel) and compare its
    ``nvidia :: sm_arch`` values with what *binaries* (this wheel's) carry."""
    from variantlib.errors import ValidationError
    from variantlib.variant_dist_info import VariantDistInfo

    label = variant_label(wheel)
    if label is None:
        return None
    derived = sm_arch_values(binaries)
    text = read_variant_json(wheel)
    if text is None:
        return VariantCheck(
            wheel=str(wheel),
            label=label,
            properties=(),
            derived_sm_arch=derived,
            problems=(f"variant wheel without *.dist-info/{elf.VARIANT_DIST_INFO_FILENAME}",),
        )
    try:
        desc = VariantDistInfo(text, label).variant_desc
    except (ValidationError, ValueError) as error:
        return VariantCheck(
            wheel=str(wheel),
            label=label,
            properties=(),
            derived_sm_arch=derived,
            problems=(f"{elf.VARIANT_DIST_INFO_FILENAME} is not valid: {error}",),
        )
    declared = {p.value for p in desc.properties if (p.namespace, p.feature) == (NVIDIA, SM_ARCH)}
    problems = []
    if not desc.is_null_variant():
        problems += [
            f"declares {NVIDIA} :: {SM_ARCH} :: {v}, but no binary carries that code"
            for v in sorted(declared - set(derived))
        ]
        problems += [
            f"the binaries carry {v}, which {elf.VARIANT_DIST_INFO_FILENAME} does not declare"
            for v in sorted(set(derived) - declared)
        ]
    return VariantCheck(
        wheel=str(wheel),
        label=label,
        properties=tuple(p.to_str() for p in desc.properties),
        derived_sm_arch=derived,
        problems=tuple(problems),
    )


def check_wheels(paths: Sequence[Path], reports: Sequence[BinaryContents]) -> list[VariantCheck]:
    """check_variant for every variant wheel among *paths* and the wheels *reports* come from
    (``x.whl!member``), each against its own binaries."""
    wheels = {str(p) for p in paths if p.suffix == ".whl" and p.is_file()}
    wheels |= {elf.split_member(r.path)[0] for r in reports} - {""}
    checks = []
    for wheel in sorted(wheels):
        own = [r for r in reports if elf.split_member(r.path)[0] == wheel]
        check = check_variant(Path(wheel), own)
        if check is not None:
            checks.append(check)
    return checks


def require_agree(checks: Sequence[VariantCheck]) -> None:
    """Raise VerificationError naming the first disagreement of any variant wheel."""
    bad = [(c, p) for c in checks for p in c.problems]
    if bad:
        check, problem = bad[0]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise VerificationError(f"{check.wheel}: variant {check.label}: {problem}{more}")


def write_index_json(out_dir: Path, wheel_name: str, version: str) -> Path | None:
    """``{name}-{version}-variants.json`` for every variant wheel of that release in *out_dir*
    (None if there is none), merged by variantlib, which refuses labels that disagree."""
    from variantlib.errors import ValidationError
    from variantlib.variant_dist_info import VariantDistInfo
    from variantlib.variants_json import VariantsJson

    merged: VariantsJson | None = None
    for wheel in sorted(out_dir.glob(f"{wheel_name}-{version}-*.whl")):
        label = variant_label(wheel)
        text = read_variant_json(wheel) if label else None
        if label is None or text is None:
            continue
        try:
            info = VariantDistInfo(text, label)
            if merged is None:
                merged = VariantsJson(info)  # the shared keys, no variant yet
            merged.merge(info)
        except ValidationError as error:
            raise VerificationError(
                f"{wheel.name}: its {elf.VARIANT_DIST_INFO_FILENAME} does not merge with the other "
                f"variants: {error}"
            ) from error
    if merged is None:
        return None
    path = out_dir / f"{wheel_name}-{version}-variants.json"
    writers.write_if_changed(path, _with_schema(merged.to_str()))
    return path


def for_plan(
    plan: VariantPlan,
    repaired: Path,
    binaries: Sequence[BinaryContents],
    stage: Path,
    *,
    null: bool,
) -> tuple[list[Path], tuple[str, ...]]:
    """The PEP 825 variant wheel of a checked wheel (and the null variant, if this build is
    it), with properties read from the binaries that were checked."""
    label = plan.variant.variant_label
    assert label is not None
    unstable = plan.abi.kind.per_torch  # the wheel pins its torch: a property of it
    torch = plan.torch.version
    facts = VariantFacts(
        sm_arch=sm_arch_values(binaries),
        cuda=plan.variant.toolkit.release,
        torch=f"{torch.major}.{torch.minor}" if unstable else None,
    )
    props = properties(facts)
    text = variant_json(label, props, unstable_abi=unstable)
    made = [make_variant_wheel(repaired, label, text, stage / "variant")]
    if null:
        empty = variant_json(NULL_LABEL, [], unstable_abi=unstable)
        made.append(make_variant_wheel(repaired, NULL_LABEL, empty, stage / "null"))
    return made, tuple(props)
