from __future__ import annotations

import ast
import shlex
from pathlib import Path

import pytest

from wheelforge.configuration.archs import Arch, ArchSet, parse_arch_list
from wheelforge.foundation.errors import ConfigError


def flags(text: str) -> set[str]:
    return set(shlex.split(ArchSet("t", parse_arch_list(text, source="test")).gencode()))


def torch_flags(monkeypatch: pytest.MonkeyPatch, text: str) -> set[str]:
    from torch.utils import cpp_extension

    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", text)
    return set(cpp_extension._get_cuda_arch_flags())


@pytest.mark.parametrize(
    "text",
    [
        "7.5",
        "7.5 8.0 9.0+PTX",
        "7.5;8.0;9.0+PTX",
        "8.0 8.6;8.9",
        "Ampere",
        "Ampere;Hopper",
        "Turing Ada",
        "Blackwell",
        "9.0a",
        "9.0a 10.0a+PTX",
        "Kepler+Tesla;Maxwell+Tegra",
        "6.1 7.0+PTX 7.0",
    ],
)
def test_same_flags_as_torch(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    """Every list torch accepts gives the gencode flags torch's cpp_extension gives."""
    assert flags(text) == torch_flags(monkeypatch, text)


def test_order_dedup_and_ptx_merge() -> None:
    specs = parse_arch_list("9.0 8.0+PTX, 7.5 8.0 9.0+PTX 9.0a", source="x")
    assert [str(s) for s in specs] == ["7.5", "8.0+PTX", "9.0+PTX", "9.0a"]


def test_f_suffix_and_commas() -> None:
    arch_set = ArchSet("t", parse_arch_list("10.0f,12.0f+PTX", source="x"))
    assert arch_set.sass == ("sm_100f", "sm_120f")
    assert arch_set.ptx == ("compute_120f",)
    assert "-gencode=arch=compute_100f,code=sm_100f" in shlex.split(arch_set.gencode())


def test_named_arches_case_insensitive_and_with_ptx() -> None:
    assert [str(s) for s in parse_arch_list("hopper", source="x")] == ["9.0+PTX"]
    assert [str(s) for s in parse_arch_list("Ampere+PTX", source="x")] == ["8.0", "8.6+PTX"]


def test_arch_properties() -> None:
    arch = Arch(9, 0, "a")
    assert (arch.sass, arch.ptx, arch.number, str(arch)) == ("sm_90a", "compute_90a", "90a", "9.0a")
    assert arch.base == Arch(9, 0)
    assert sorted([Arch(10, 0), Arch(9, 0, "a"), Arch(9, 0)], key=Arch.sort_key) == [
        Arch(9, 0),
        Arch(9, 0, "a"),
        Arch(10, 0),
    ]


@pytest.mark.parametrize(
    ("text", "token", "suggestion"),
    [
        ("7.5 sm_90", "sm_90", "9.0"),
        ("9.O", "9.O", "9.0"),
        # A letter for the digit it looks like: 8.0, not the nearest in spelling (8.9).
        ("7.5 8.o", "8.o", "8.0"),
        ("8.O", "8.O", "8.0"),
        ("1o.0", "1o.0", "10.0"),
        ("l2.0f", "l2.0f", "12.0f"),
        ("sm_8o", "sm_8o", "8.0"),
        ("9.o+PTX", "9.o+PTX", "9.0+PTX"),
        ("90a", "90a", "9.0a"),
        ("compute_90", "compute_90", "9.0+PTX"),
        ("Hoper", "Hoper", "Hopper"),
        ("8.0 9.0+ptx", "9.0+ptx", "9.0+PTX"),
    ],
)
def test_bad_token_is_quoted_with_nearest(text: str, token: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_arch_list(text, source="--archs")
    message = err.value.message
    assert message.startswith("--archs: ")
    assert f"'{token}'" in message
    assert f"did you mean '{suggestion}'?" in message
    assert err.value.exit_code == 2


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("8.0a", "'a' variants exist from 9.0 on"),
        ("9.0f", "'f' variants exist from 10.0 on"),
        ("4.0", "not a known CUDA arch"),
        ("", "empty"),
        (" ; , ", "empty"),
        ("native", "'native' needs the GPUs"),
    ],
)
def test_invalid_entries(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        parse_arch_list(text, source="TORCH_CUDA_ARCH_LIST")


@pytest.mark.parametrize(
    ("asked", "allowed", "expected"),
    [
        ("8.0 9.0+PTX", "9.0a", "9.0a"),  # the set's 9.0 admits the source's 9.0a
        ("8.0 9.0+PTX", "9.0a+PTX", "9.0a+PTX"),
        ("8.0 9.0", "9.0a+PTX", "9.0a"),  # PTX only where both ask
        ("7.5 8.0", "9.0a", ""),  # nothing in common: the source is left out
        ("8.0 9.0 10.0", "9.0 10.0a 12.0", "9.0 10.0a"),
        ("9.0a 10.0f", "9.0a 10.0f", "9.0a 10.0f"),
        # an asked arch none of those runs on: the source's highest plain arch below it that
        # runs there (vLLM's cuda_archs_loose_intersection)
        ("9.0a", "8.0+PTX", "8.0+PTX"),  # Marlin in a 9.0a build: its PTX runs there
        ("8.0 9.0", "8.0+PTX", "8.0+PTX"),  # the PTX kept for the 9.0 GPU
        ("8.6", "8.0 9.0", "8.0"),  # sm_80 SASS runs on 8.6
        ("9.0a", "8.0", ""),  # no PTX, another major: left out
        ("9.0a", "9.0", "9.0"),  # sm_90 SASS runs on the 9.0a GPU
        ("8.0 9.0+PTX", "7.5+PTX 8.0", "7.5+PTX 8.0"),  # 9.0 runs only 7.5's PTX
    ],
)
def test_limit_per_source(asked: str, allowed: str, expected: str) -> None:
    arch_set = ArchSet("t", parse_arch_list(asked, source="x"))
    limited = arch_set.limit(parse_arch_list(allowed, source="y"))
    assert str(limited) == expected


def test_an_arch_sets_gencode_string_is_its_specs_flags_joined() -> None:
    arch_set = ArchSet("t", parse_arch_list("9.0a 8.0+PTX", source="test"))
    assert shlex.split(arch_set.gencode()) == [
        "-gencode=arch=compute_80,code=sm_80",
        "-gencode=arch=compute_80,code=compute_80",
        "-gencode=arch=compute_90a,code=sm_90a",
    ]


_SPELLINGS = ("-gencode=", "--generate-code=", "-gencode ", "--generate-code ")


def _gencode_formed(path: Path) -> list[int]:
    """Lines of *path* that spell a -gencode flag: an f-string that starts with one of nvcc's
    spellings of it (short or long, = or a space)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and str(first.value).startswith(_SPELLINGS):
                found.append(node.lineno)
    return found


def test_only_archs_forms_the_gencode_flags() -> None:
    """The plan, a limited compile step and the schedule's cost key ask ArchSet.gencode: the
    -gencode string is formed in configuration/archs.py alone (it was formed in three places)."""
    package = Path(__file__).resolve().parents[2] / "src" / "wheelforge"
    owner = package / "configuration" / "archs.py"
    formed = [
        f"{path.relative_to(package)}:{line}"
        for path in sorted(package.rglob("*.py"))
        if path != owner
        for line in _gencode_formed(path)
    ]
    assert formed == []


def test_the_gencode_check_sees_a_planted_spelling(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        'flag = f"-gencode=arch={a.ptx},code={a.sass}"\n'
        'long = f"--generate-code=arch={a.ptx},code={a.sass}"\n'
        'fine = f"-arch={a.ptx}"\n'
    )
    assert sorted(_gencode_formed(planted)) == [1, 2]
