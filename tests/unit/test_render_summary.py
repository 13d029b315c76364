from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from wheelforge.interface.render import print_build
from wheelforge.running.build.results import BuildReport


def _summary(abi: str, built_against: str) -> str:
    report = BuildReport(
        matrix=Path("matrix.yaml"),
        abi=abi,  # type: ignore[arg-type]
        target_version=(2, 11),
        built_against=built_against,
        variants=(),
    )
    out = io.StringIO()
    print_build(report, Console(file=out, width=200))
    return out.getvalue()


def test_an_unstable_build_is_not_summed_up_as_stable() -> None:
    text = _summary("unstable", "2.13.0+cpu, 2.14.1+cu130")
    assert "stable-ABI target" not in text
    assert "unstable ABI: each wheel pinned to the torch it was built against" in text
    assert "2.13.0+cpu, 2.14.1+cu130" in text
    assert "stable-ABI target torch 2.11" in _summary("stable", "2.13.0+cpu")
