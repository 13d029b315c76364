"""The ABI rule registry: the rules come from binaries/rules/, the docs table and what the walk
reads come from them, and a rule registered there runs in ``check`` and ``build`` with nothing
else edited."""

from __future__ import annotations

import re
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from wheelforge.binaries import abicheck, bounded, registry, verify
from wheelforge.binaries.elf import ElfImage
from wheelforge.binaries.facts import BinaryFacts
from wheelforge.binaries.rule import Finding, Rule, RuleContext, Severity
from wheelforge.cli.app import main
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import VerificationError
from wheelforge.toolchain import shims

from .conftest import GOOD_MATRIX
from .fakes import make_wheel, plan_for, with_record

DOCS = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
RULES = Path(registry.__file__).parent / "rules"
FATBIN = Path(__file__).resolve().parents[1] / "data" / "fatbin"
ABI = Path(__file__).resolve().parents[1] / "data" / "abicheck"
WHEEL = "pkg-1.0-cp310-abi3-manylinux_2_17_x86_64.whl"


def test_the_docs_table_is_the_generated_one() -> None:
    """Regenerate with: python -m wheelforge.binaries.registry"""
    text = DOCS.read_text("utf-8")
    assert "<!-- /rules -->" in text
    assert registry.render_docs(text) == text


def test_every_rule_module_is_registered_once() -> None:
    modules = sorted(p.stem for p in RULES.glob("*.py") if p.stem != "__init__")
    ids = registry.rule_ids()
    assert sorted(i.replace("-", "_") for i in ids) == modules  # a module's name is its id
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", i) for i in ids)
    for rule in registry.all_rules():
        assert rule.doc and rule.source and rule.flavours and rule.roles, rule.id


def test_flavours_and_roles_filter_the_rules() -> None:
    """Written so that a new rule leaves it true: the rules of today, in their order, and what
    the registry's filters and readings make of them."""
    stable = registry.applicable("stable")
    unstable = registry.applicable("unstable")
    today = ["floor", "cxx-symbol", "shim-version", "python-api", "module-init", "tags", "layout"]
    assert [r.id for r in stable if r.id in today] == today
    # issue 20: a classic (unstable-ABI) wheel's tags are checked too (glibc, machine); issue
    # 33: and its Python symbols, against an abi3 tag when it has one (vLLM 0.10's cp38-abi3)
    assert [r.id for r in unstable if r.id in today] == [
        "python-api",
        "module-init",
        "tags",
        "layout",
    ]
    assert [r.id for r in registry.for_role(stable, "wheel") if r.id in today] == ["layout"]
    known = [r for r in stable if r.id in today]
    assert registry.for_role(known, "bundled") == ()  # a grafted dependency is not the wheel's
    # What the walk reads follows: nothing of a bundled library for check; for an unstable-ABI
    # build the symbols the tags rule reads (glibc versions) and the init export.
    assert not registry.reading(known).reads("bundled")
    assert registry.reading(known).of("library") == {"symbols"}
    unstable_known = [r for r in unstable if r.id in today]
    assert registry.reading(unstable_known).of("extension") == {"init-export", "symbols"}
    assert registry.reading(unstable_known).of("library") == {"symbols"}
    assert not registry.reading(known).metadata and registry.reading(known, metadata=True).metadata


def test_a_rule_cannot_ask_the_wheel_for_symbols() -> None:
    def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
        yield from ()

    with pytest.raises(ValueError, match="the wheel itself has no ELF facts"):
        Rule(
            id="x",
            doc="d",
            source="s",
            flavours=frozenset({"stable"}),
            roles=frozenset({"wheel"}),
            needs=frozenset({"symbols"}),
            order=1,
            check=check,
        )


def _register(monkeypatch: pytest.MonkeyPatch, rule: Rule) -> None:
    rules = (*registry.all_rules(), rule)
    monkeypatch.setattr(registry, "all_rules", lambda: rules)


def _no_helper_so(severity: Severity) -> Rule:
    def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
        if "helper" in binary.name:
            yield Finding(None, f"{binary.name} is a helper")

    return Rule(
        id="no-helper",
        doc="d",
        source="s",
        flavours=frozenset({"stable", "unstable"}),
        roles=frozenset({"library"}),
        severity=severity,
        order=99,
        check=check,
    )


def _wheel_with_helper(tmp_path: Path) -> Path:
    wheel = make_wheel(tmp_path, WHEEL, "ext.so")
    with zipfile.ZipFile(wheel, "a") as zf:
        # An op library (no PyInit): a file's role comes from what it exports, not its name.
        zf.writestr("pkg/libhelper.so", (ABI / "oplib.so").read_bytes())
    return with_record(wheel)


def test_a_registered_rule_runs_in_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _wheel_with_helper(tmp_path)
    assert main(["check", str(wheel)]) == 0
    _register(monkeypatch, _no_helper_so("error"))
    checks = abicheck.check_wheel(wheel, torch=None, guards={})
    found = [(v.rule, v.binary) for c in checks for v in c.violations]
    assert found == [("no-helper", f"{wheel}!pkg/libhelper.so")]
    capsys.readouterr()
    assert main(["check", str(wheel)]) == VerificationError.exit_code
    assert "libhelper.so is a helper" in capsys.readouterr().err


def test_a_warning_is_shown_and_fails_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    wheel = _wheel_with_helper(tmp_path)
    _register(monkeypatch, _no_helper_so("warning"))
    assert main(["check", str(wheel)]) == 0
    assert "libhelper.so is a helper" in capsys.readouterr().err


def _fatbin_wheel(tmp_path: Path, *, metadata: bool = True, bundled: bool = False) -> Path:
    path = tmp_path / "demo_ops-1.2.0-cp310-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("demo_ops/_C.abi3.so", (FATBIN / "sm80_sm90a_ptx90.so").read_bytes())
        if bundled:
            zf.writestr("demo_ops.libs/libdep.so", (FATBIN / "sm75_lz4.so").read_bytes())
        if metadata:
            zf.writestr(
                "demo_ops-1.2.0.dist-info/METADATA",
                "Metadata-Version: 2.1\nName: demo-ops\nVersion: 1.2.0\nRequires-Dist: torch>=2.10\n",
            )
    return with_record(path) if metadata else path


@pytest.fixture
def no_init_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fatbin sample is no Python module (no PyInit__C); that rule has its own tests."""
    others = tuple(r for r in registry.all_rules() if r.id != "module-init")
    monkeypatch.setattr(registry, "all_rules", lambda: others)
    monkeypatch.setattr(shims, "header_guards", lambda _include: {})


@pytest.mark.parametrize("abi", ["stable", "unstable"])
def test_the_wheel_level_rules_run_in_build(
    project: Callable[..., Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_init_rule: None,
    abi: str,
) -> None:
    """The layout rule ran in ``check`` only; the build's walk now applies it too."""
    monkeypatch.setattr(verify, "verify_binaries", lambda _binaries, _plan: [])
    matrix = GOOD_MATRIX
    if abi == "unstable":
        matrix = matrix.replace('torch: ">=2.10"', "abi: unstable\ntorch: ['2.13.0']")
    plan = plan_for(load_matrix(project(matrix)), tmp_path, archs="8.0 9.0a")
    with pytest.raises(VerificationError, match=r"has no NAME-VERSION\.dist-info/METADATA"):
        verify.verify_wheel(_fatbin_wheel(tmp_path, metadata=False), plan)


def test_check_does_not_inflate_a_bundled_library_and_build_reads_it_once(
    project: Callable[..., Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_init_rule: None,
) -> None:
    counts: Counter[str] = Counter()
    real_read = bounded.read_member

    def read(zf: zipfile.ZipFile, info: zipfile.ZipInfo, display: str) -> bytearray:
        counts[info.filename] += 1
        return real_read(zf, info, display)

    real_chunks = bounded.member_chunks

    def chunks(zf: zipfile.ZipFile, info: zipfile.ZipInfo, display: str) -> Iterator[bytes]:
        counts[info.filename] += 1  # a streamed inflation counts as the one too (stream.py)
        return real_chunks(zf, info, display)

    monkeypatch.setattr(bounded, "read_member", read)
    monkeypatch.setattr(bounded, "member_chunks", chunks)
    wheel = _fatbin_wheel(tmp_path, bundled=True)
    [check] = abicheck.check_wheel(wheel, torch=None, guards={})
    assert check.path.endswith("!demo_ops/_C.abi3.so")
    assert counts["demo_ops.libs/libdep.so"] == 0 and counts["demo_ops/_C.abi3.so"] == 1
    counts.clear()
    plan = plan_for(load_matrix(project()), tmp_path, archs="8.0 9.0a")
    found = verify.verify_wheel(wheel, plan)
    assert counts["demo_ops.libs/libdep.so"] == 1 and counts["demo_ops/_C.abi3.so"] == 1
    assert [b.path.rsplit("!", 1)[1] for b in found.binaries] == [
        "demo_ops.libs/libdep.so",
        "demo_ops/_C.abi3.so",
    ]
    assert [c.path.rsplit("!", 1)[1] for c in found.abi_checks] == ["demo_ops/_C.abi3.so"]


def test_a_rule_reads_a_fact_of_its_own_in_the_one_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fact no other rule needs (here: the ELF type) is read by the rule's own reader, from
    the walk's one parse, with nothing else edited."""
    parsed: list[str] = []

    def elf_type(image: ElfImage) -> object:
        parsed.append(image.name)
        return image.elf["e_type"]

    def check(binary: BinaryFacts, context: RuleContext) -> Iterator[Finding]:
        if binary.own("elf-type") != "ET_DYN":
            yield Finding(None, f"{binary.name} is no shared object")

    rule = Rule(
        id="elf-type",
        doc="d",
        source="s",
        flavours=frozenset({"stable"}),
        roles=frozenset({"extension", "library"}),
        order=99,
        check=check,
        read=elf_type,
    )
    _register(monkeypatch, rule)
    wheel = _wheel_with_helper(tmp_path)
    checks = abicheck.check_wheel(wheel, torch=None, guards={})
    assert [v for c in checks for v in c.violations] == []
    assert parsed == [f"{wheel}!pkg/_C.abi3.so", f"{wheel}!pkg/libhelper.so"]
