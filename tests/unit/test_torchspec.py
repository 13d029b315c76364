from __future__ import annotations

import pytest
from packaging.version import Version

from wheelforge.configuration.matrix.torchspec import parse_torch_spec, target_macro


def test_range_lowest_and_target_macro() -> None:
    spec = parse_torch_spec(">=2.10")
    assert spec.lowest == Version("2.10")
    assert spec.target == (2, 10)
    assert target_macro(spec.target) == "0x020a000000000000"
    assert spec.requirement == "torch>=2.10"


def test_range_with_upper_bound_keeps_it() -> None:
    spec = parse_torch_spec(">=2.11.1,<2.15")
    assert spec.target == (2, 11)
    assert spec.requirement == "torch>=2.11,<2.15"


def test_list_takes_the_lowest() -> None:
    spec = parse_torch_spec(["2.13", "2.10", "2.11.0"])
    assert spec.lowest == Version("2.10")
    assert spec.versions == (Version("2.10"), Version("2.11.0"), Version("2.13"))
    assert target_macro(spec.target) == f"0x{(2 << 56) | (10 << 48):016x}"


def test_single_version_and_wildcard() -> None:
    assert parse_torch_spec("2.12").target == (2, 12)
    assert parse_torch_spec("==2.11.*").target == (2, 11)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("<2.15", "no lower bound"), ("two point ten", "neither a version nor a range"),
     ([], "empty"), (["2.x"], "not a version")],
)  # fmt: skip
def test_errors(value: str | list[str], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_torch_spec(value)
