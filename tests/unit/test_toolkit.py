from __future__ import annotations

import pytest

from wheelforge.archs import Arch, parse_arch_list
from wheelforge.errors import ConfigError
from wheelforge.toolkit import check_archs

from .fakes import toolkit


def archs(text: str) -> tuple[Arch, ...]:
    return tuple(s.arch for s in parse_arch_list(text, source="t"))


def test_supports() -> None:
    tk = toolkit()
    assert tk.short == "cu130"
    assert (
        tk.supports(Arch(9, 0)) and tk.supports(Arch(9, 0, "a")) and tk.supports(Arch(10, 0, "f"))
    )
    assert not tk.supports(Arch(7, 0))
    old = toolkit("12.4.1", (50, 52, 60, 61, 70, 75, 80, 86, 89, 90))
    assert old.supports(Arch(9, 0, "a")) and not old.supports(Arch(10, 0))
    assert not toolkit("12.8.0", (90, 100)).supports(Arch(10, 0, "f"))


def test_check_archs_names_arch_toolkit_and_fix() -> None:
    with pytest.raises(ConfigError) as err:
        check_archs(toolkit(), archs("7.0 8.0 9.0+PTX"), "custom")
    message = err.value.message
    assert "arch set 'custom': CUDA 13.0 at /opt/cuda can't build 7.0 (sm_70)" in message
    assert "it builds sm_75 to sm_121" in message
    assert "older CUDA toolkit" in message
    with pytest.raises(ConfigError, match="newer CUDA toolkit"):
        check_archs(toolkit("12.4.1", (70, 75, 80, 90)), archs("10.0"), "default")
    check_archs(toolkit(), archs("7.5 9.0a 10.0f 12.0+PTX"), "default")
