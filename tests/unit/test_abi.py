"""The ABI flavours (configuration/abi.py, planning/abi.py) own what differs between the stable
and the unstable ABI: no other module decides it again by comparing the ABI's name."""

from __future__ import annotations

import ast
from pathlib import Path

from wheelforge.configuration import abi
from wheelforge.configuration.matrix.torchspec import parse_torch_spec
from wheelforge.planning import abi as planning_abi

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "wheelforge"
OWNERS = {PACKAGE / "configuration" / "abi.py"}


def _name_comparisons(path: Path, base: Path = PACKAGE) -> list[str]:
    """Comparisons (==, !=, in) of anything with the string 'stable' or 'unstable'."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Compare):
            constants = [node.left, *node.comparators]
            for o in (node.left, *node.comparators):
                if isinstance(o, ast.Tuple | ast.Set | ast.List):
                    constants += o.elts
            names = [c for c in constants if isinstance(c, ast.Constant) and c.value in abi.ABIS]
            if names:
                found.append(f"{path.relative_to(base)}:{node.lineno}")
    return found


def test_no_module_but_the_flavours_compares_an_abi_name() -> None:
    compared = [
        where
        for path in sorted(PACKAGE.rglob("*.py"))
        if path not in OWNERS
        for where in _name_comparisons(path)
    ]
    assert compared == [], "ask configuration/abi.of(name) instead of comparing the ABI's name"


def test_the_checker_sees_a_planted_comparison(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('if matrix.abi == "unstable":\n    pass\nif abi in ("stable",):\n    pass\n')
    assert _name_comparisons(planted, tmp_path) == ["planted.py:1", "planted.py:3"]


def test_every_flavour_is_planned() -> None:
    """A flavour added to configuration/abi.py needs its flags, tags and pin in planning/abi.py."""
    assert set(planning_abi._FLAVOURS) == set(abi.ABIS.values())


def test_what_each_flavour_decides_before_torch_is_probed() -> None:
    spec = parse_torch_spec(["2.13.0", "2.14.1"])
    stable, unstable = abi.of("stable"), abi.of("unstable")
    assert stable.torches(spec) == (None,)
    assert unstable.torches(spec) == ("2.13.0", "2.14.1")
    assert stable.requirement(spec) == "torch>=2.13" and unstable.requirement(spec) is None
    assert unstable.build_requirement(spec) == "torch==2.13.0"
    assert stable.build_requirement(spec) == "torch>=2.13"
