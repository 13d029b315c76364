"""The "loads on" table (binaries/loadson.py): per GPU generation, SASS, PTX JIT or no kernel
image, from the fatbin's entries by CUDA's compatibility rules; the PTX ISA and the driver that
can JIT it (the release table's); the a/f targets that give no forward compatibility. On real
binaries: one from vLLM 0.33.0 (tests/data/released/) and the fatbin samples of tests/data/fatbin;
bench/loads_on_vs_cuobjdump.py holds whole released wheels against cuobjdump."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Literal

from rich.console import Console

from wheelforge.binaries import loadson
from wheelforge.binaries.facts import BinaryContents
from wheelforge.binaries.fatbin import FatbinEntry
from wheelforge.binaries.inspection import inspect_paths
from wheelforge.cli.inspect_screen import print_inspect
from wheelforge.configuration import releases
from wheelforge.configuration.archs import ArchSuffix

DATA = Path(__file__).resolve().parents[1] / "data"


def entry(
    kind: Literal["sass", "ptx"],
    sm: int,
    variant: ArchSuffix = "",
    container: int = 0,
    isa: str = "9.0",
) -> FatbinEntry:
    prefix = "sm" if kind == "sass" else "compute"
    return FatbinEntry(
        kind=kind,
        arch=f"{prefix}_{sm}{variant}",
        sm=sm,
        variant=variant,
        container=container,
        offset=0,
        stored_size=8,
        size=8,
        compression="none",
        version="1.8" if kind == "sass" else isa,
    )


def table(*entries: FatbinEntry) -> dict[str, str]:
    found = loadson.loads_on(BinaryContents(path="x.so", size=1, entries=entries))
    assert found is not None
    return {g.gpu: g.verdict for g in found.gpus}


def real(name: str) -> loadson.LoadsOn:
    [binary] = inspect_paths([DATA / name])
    found = loadson.loads_on(binary)
    assert found is not None
    return found


def test_the_gpu_generations_come_from_the_release_table() -> None:
    gpus = releases.gpu_generations()
    assert gpus[:3] == (70, 72, 75) and {90, 100, 103, 110, 120, 121} <= set(gpus)
    assert 101 not in gpus  # CUDA 13.0 renamed sm_101 to sm_110


def test_sass_runs_on_its_major_from_its_minor_up() -> None:
    loads = table(entry("sass", 80))
    assert [g for g, v in loads.items() if v == "sass"] == [
        "sm_80",
        "sm_86",
        "sm_87",
        "sm_88",
        "sm_89",
    ]
    assert loads["sm_90"] == loads["sm_75"] == "none"


def test_an_a_target_runs_on_its_gpu_only_and_an_f_target_on_its_family() -> None:
    assert [g for g, v in table(entry("sass", 90, "a")).items() if v == "sass"] == ["sm_90"]
    family = table(entry("sass", 100, "f"))
    assert [g for g, v in family.items() if v == "sass"] == ["sm_100", "sm_103"]
    assert family["sm_110"] == family["sm_120"] == "none"
    assert [g for g, v in table(entry("sass", 120, "f")).items() if v == "sass"] == [
        "sm_120",
        "sm_121",
    ]


def test_ptx_is_jit_compiled_from_its_arch_up() -> None:
    loads = table(entry("sass", 80), entry("ptx", 80))
    assert loads["sm_86"] == "sass" and loads["sm_90"] == loads["sm_121"] == "ptx"
    assert loads["sm_75"] == "none"
    specific = table(entry("ptx", 90, "a"))  # compute_90a PTX: Hopper only
    assert [g for g, v in specific.items() if v == "ptx"] == ["sm_90"]


def test_a_gpu_some_translation_units_have_no_image_for_is_partial() -> None:
    found = loadson.loads_on(
        BinaryContents(
            path="x.so",
            size=1,
            entries=(entry("sass", 80, container=0), entry("sass", 90, "a", container=1)),
        )
    )
    assert found is not None
    gpus = {g.gpu: g for g in found.gpus}
    assert (gpus["sm_80"].verdict, gpus["sm_80"].units, gpus["sm_80"].of) == ("partial", 1, 2)
    assert (gpus["sm_90"].verdict, gpus["sm_90"].via) == ("partial", ("sm_90a",))
    assert gpus["sm_100"].verdict == "none"


def test_the_ptx_isa_names_the_release_and_the_driver_that_can_jit_it() -> None:
    found = loadson.loads_on(
        BinaryContents(
            path="x", size=1, entries=(entry("ptx", 80, isa="8.8"), entry("ptx", 90, isa="42.0"))
        )
    )
    assert found is not None
    assert [(i.version, i.release, i.driver) for i in found.ptx_isa] == [
        ("8.8", "12.9", "575.51.03"),
        ("42.0", None, None),
    ]


def test_a_and_f_targets_without_plain_ptx_give_no_forward_compatibility() -> None:
    covered = loadson.loads_on(
        BinaryContents(path="x", size=1, entries=(entry("sass", 90, "a"), entry("ptx", 90)))
    )
    assert covered is not None and covered.no_forward == ()
    bare = loadson.loads_on(
        BinaryContents(
            path="x",
            size=1,
            entries=(entry("sass", 90, "a"), entry("ptx", 90, container=1)),  # PTX in another TU
        )
    )
    assert bare is not None and bare.no_forward == ("sm_90a",)


def test_vllms_flashmla_extension_runs_on_hopper_and_the_blackwell_10_family_only() -> None:
    found = real("released/_flashmla_extension_C.abi3.so")  # sm_90a + sm_100f SASS, no PTX
    assert found.where("sass") == ("sm_90", "sm_100", "sm_103")
    assert "sm_120" in found.where("none") and "sm_80" in found.where("none")
    assert found.ptx_isa == () and found.no_forward == ("sm_90a", "sm_100f")


def test_the_fatbin_samples() -> None:
    found = real("fatbin/sm80_sm90a_ptx90.so")
    assert found.where("sass") == ("sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90")
    assert found.where("ptx")[0] == "sm_100" and found.where("none") == ("sm_70", "sm_72", "sm_75")
    assert [(i.version, i.release) for i in found.ptx_isa] == [("9.0", "13.0")]
    zstd = real("fatbin/sm100f_sm120a_zstd.so")
    assert zstd.where("sass") == ("sm_100", "sm_103", "sm_120")
    assert "sm_121" in zstd.where("none")  # sm_120a is the RTX 50's only: not the 12.1 GB10's
    assert loadson.loads_on(inspect_paths([DATA / "fatbin" / "no_cuda.so"])[0]) is None


def test_inspect_prints_it_below_each_binary() -> None:
    out = io.StringIO()
    print_inspect(
        inspect_paths([DATA / "released" / "_flashmla_extension_C.abi3.so"]),
        Console(file=out, width=80),
    )
    text = " ".join(out.getvalue().split())
    assert "runs SASS on: sm_90 sm_100 sm_103" in text
    assert "no forward compatibility: sm_90a, sm_100f" in text


def test_inspect_sets_a_wheels_binaries_side_by_side_per_gpu(tmp_path: Path) -> None:
    import zipfile

    wheel = tmp_path / "pkg-1.0-cp310-abi3-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for name in ("released/_flashmla_extension_C.abi3.so", "fatbin/sm80_sm90a_ptx90.so"):
            zf.writestr(f"pkg/{Path(name).name}", (DATA / name).read_bytes())
    out = io.StringIO()
    # at an 80-column terminal (into a pipe the loads-on lines are whole, however long)
    print_inspect(
        inspect_paths([wheel]), Console(file=out, width=80, force_terminal=True, color_system=None)
    )
    cells = [
        [c.strip() for c in line.strip().strip("│").split("│")]
        for line in out.getvalue().splitlines()
        if line.startswith("│ sm_")
    ]
    rows = {c[0]: c[1:] for c in cells}
    assert "where its 2 CUDA binaries load" in out.getvalue()
    assert rows["sm_90"] == ["2", "0", "0", "0"]  # both run SASS on Hopper: none without
    assert rows["sm_80"] == ["1", "0", "0", "_flashmla_extension_C.abi3.so"]
    assert rows["sm_120"] == ["0", "1", "0", "_flashmla_extension_C.abi3.so"]  # compute_90 JITs
    assert max(len(line) for line in out.getvalue().splitlines()) <= 80


def _weighed_one_by_one(binary: BinaryContents) -> list[tuple[str, str, tuple[str, ...], int]]:
    """Each GPU's verdict with every unit weighed on its own (the rules, unoptimised)."""
    units: dict[int, dict[tuple[str, int, str], FatbinEntry]] = {}
    for e in binary.entries:
        units.setdefault(e.container, {}).setdefault((e.kind, e.sm, e.variant), e)
    rows = []
    for gpu in releases.gpu_generations():
        verdicts = [loadson._unit_verdict(list(u.values()), gpu) for u in units.values()]
        served = sum(kind != "none" for kind, _ in verdicts)
        verdict = (
            "none"
            if not served
            else "partial"
            if served < len(verdicts)
            else "ptx"
            if any(kind == "ptx" for kind, _ in verdicts)
            else "sass"
        )
        via = tuple(dict.fromkeys(a for _, archs in verdicts for a in archs))
        rows.append((f"sm_{gpu}", verdict, via, served))
    return rows


def test_units_alike_weighed_once_give_each_units_verdict() -> None:
    """loads_on weighs each kind of unit once (libcublasLt: 2782 units, a few dozen kinds): the
    verdicts, archs and counts are those of weighing every unit, on mixes of alike units,
    units that differ only in their order, a, f and PTX."""
    import random

    shapes = [
        [("sass", 80, ""), ("sass", 90, "")],
        [("sass", 90, ""), ("sass", 80, "")],  # the same targets in another order
        [("sass", 90, "a"), ("ptx", 90, "a")],
        [("sass", 100, "f"), ("sass", 120, "")],
        [("ptx", 75, "")],
        [("sass", 86, "")],
    ]
    rng = random.Random(33)
    for _ in range(40):
        entries = []
        for container in range(rng.randint(1, 30)):
            for kind, sm, variant in rng.choice(shapes):
                entries.append(entry(kind, sm, variant, container=container))  # type: ignore[arg-type]
        binary = BinaryContents(path="x.so", size=1, entries=tuple(entries))
        found = loadson.loads_on(binary)
        assert found is not None
        assert [(g.gpu, g.verdict, g.via, g.units) for g in found.gpus] == _weighed_one_by_one(
            binary
        )
        assert all(g.of == len({e.container for e in entries}) for g in found.gpus)


def test_the_loads_on_lines_fold_at_the_screens_width_not_the_tables() -> None:
    """`no kernel image on: sm_70 ... sm_121` was the table's caption, folded at the table's 66
    columns whatever the screen's width. Now a line of its own: at a terminal folded at a space
    only where the screen (100 or 80 columns) needs it; into a pipe one line, whole."""
    binaries = inspect_paths([DATA / "fatbin" / "sm100f_sm120a_zstd.so"])
    text = {}
    for width, terminal in ((100, True), (80, True), (40, False)):
        out = io.StringIO()
        print_inspect(binaries, Console(file=out, width=width, force_terminal=terminal,
                                        color_system=None, soft_wrap=not terminal))  # fmt: skip
        text[width] = out.getvalue()
    [piped] = [line for line in text[40].splitlines() if line.startswith("no kernel image on:")]
    assert len(piped) > 66  # wider than the table, and whole
    for width in (100, 80):
        lines = text[width].splitlines()
        assert max(len(line) for line in lines) <= width
        start = next(n for n, line in enumerate(lines) if line.startswith("no kernel image on:"))
        folded = lines[start : start + 1 + (len(piped) > width)]
        assert " ".join(folded) == piped  # folded at a space, at the screen's width
        assert len(folded[0]) > 66 or len(piped) <= 66
