"""Path-free compile commands (planning/reproducible.py) and the wheel differ (reprodiff.py)."""

from __future__ import annotations

import shlex
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.binaries import fatbin, reprodiff
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import VerificationError
from wheelforge.planning import hostshare, ninjafile, reproducible
from wheelforge.planning.plan import PlanInputs, VariantPlan

from .fakes import CUDA118, plan_for, plan_inputs, toolkit

Project = Callable[..., Path]
DATA = Path(__file__).resolve().parents[1] / "data"


def test_prefix_maps_put_the_deepest_folder_last() -> None:
    # GCC applies the last matching map: torch inside a venv inside the project must win.
    maps = reproducible.prefix_maps(
        {Path("/p"): ".", Path("/p/.venv/lib/torch"): "torch", Path("/b"): "wheelforge-build"}
    )
    assert maps == (
        "-ffile-prefix-map=/b=wheelforge-build",
        "-ffile-prefix-map=/p=.",
        "-ffile-prefix-map=/p/.venv/lib/torch=torch",
    )


def test_path_free_names() -> None:
    folders = ((Path("/p"), "."), (Path("/p/.venv/torch"), "torch"))
    assert reproducible.path_namer(folders)(Path("/p/csrc/a.cu")) == "csrc/a.cu"
    assert (
        reproducible.path_namer(folders)(Path("/p/.venv/torch/include/x.h")) == "torch/include/x.h"
    )
    assert (
        reproducible.path_namer(folders)(Path("/usr/include/stdio.h"))
        == "system/usr/include/stdio.h"
    )
    assert reproducible.path_free_text("-I/p/.venv/torch/include -I/p/csrc", folders) == (
        "-Itorch/include -I./csrc"
    )


def test_nvcc_seeds_only_where_nvcc_has_them() -> None:
    from packaging.version import Version

    new = reproducible.nvcc_source_flags("csrc/a.cu", Version("13.0.88"))
    old = reproducible.nvcc_source_flags("csrc/a.cu", Version("11.8.89"))
    assert new == ("-Xcudafe=--orig_src_path_name=csrc/a.cu", "--frandom-seed=csrc/a.cu")
    assert old == ("-Xcudafe=--orig_src_path_name=csrc/a.cu",)


def test_plan_flags_map_every_input_folder(project: Project, tmp_path: Path) -> None:
    plan = plan_for(load_matrix(project()), tmp_path)
    cxx, nvcc = (
        shlex.split(plan.compile.flag_sets[0].cxx),
        shlex.split(plan.compile.flag_sets[0].nvcc),
    )
    # The commands name the project relative to the build folder, and so do its maps: no map
    # holds the folder a clone lies in (a compile cache hits from any checkout); folders outside
    # the project (the toolkit) keep absolute maps. The build folder's own files need none.
    assert "-ffile-prefix-map=../..=." in cxx
    assert "-Xcompiler=-ffile-prefix-map=../..=." in nvcc
    assert not any(str(tmp_path.resolve()) in flag for flag in cxx if "prefix-map" in flag)
    assert "-ffile-prefix-map=../../torch=torch" in cxx
    assert f"-ffile-prefix-map={plan.variant.toolkit.root}=cuda" in cxx
    assert "--objdir-as-tempdir" in nvcc
    steps = {s.source.name: shlex.split(s.flags) for s in hostshare.all_steps(plan)}
    assert "-Xcudafe=--orig_src_path_name=csrc/kernel.cu" in steps["kernel.cu"]
    assert steps["ops.cpp"] == ["-frandom-seed=csrc/ops.cpp"]
    assert "$source_flags" in ninjafile.render(plan)


def test_old_nvcc_runs_from_root_with_the_fixed_pid_library(
    project: Project, tmp_path: Path
) -> None:
    new = plan_for(load_matrix(project()), tmp_path)
    assert new.compile.nvcc_preload is None and "LD_PRELOAD" not in ninjafile.render(new)
    old = plan_for(load_matrix(project()), tmp_path, tk=toolkit("11.8.89", CUDA118, gcc_max=11))
    assert old.compile.nvcc_preload == old.build_dir / "gen" / "wheelforge_fixed_pid.so"
    source = next(g for g in old.compile.generated if g.path.name == "wheelforge_fixed_pid.c")
    assert "getpid" in source.text and '"cicc"' in source.text
    text = ninjafile.render(old)
    assert f"nvcc_launch = cd / && LD_PRELOAD={old.compile.nvcc_preload} " in text
    assert f"build {old.compile.nvcc_preload}: preload {source.path}" in text
    kernel = next(s for s in old.compile.steps if s.rule == "nvcc")
    assert f"build {kernel.object}: nvcc {kernel.source} | {old.compile.nvcc_preload}" in text
    # From /, relative paths would not resolve: absolute paths, and absolute prefix maps.
    root = str(tmp_path.resolve())
    assert f"-Xcompiler=-ffile-prefix-map={root}=." in shlex.split(old.compile.flag_sets[0].nvcc)
    assert f"-ffile-prefix-map={old.build_dir}=wheelforge-build" in shlex.split(
        old.compile.flag_sets[0].cxx
    )


def wheel(path: Path, members: dict[str, bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def test_diff_names_members_and_elf_sections(tmp_path: Path) -> None:
    ext = (DATA / "abicheck" / "ext.so").read_bytes()
    other = (DATA / "abicheck" / "newer_shim.so").read_bytes()
    a = wheel(tmp_path / "a" / "p.whl", {"p/_C.so": ext, "p/x.py": b"1", "p/only_a": b""})
    b = wheel(tmp_path / "b" / "p.whl", {"p/_C.so": other, "p/x.py": b"1", "p/only_b": b""})
    found = {d.member: d for d in reprodiff.diff_wheels(a, b)}
    assert set(found) == {"p/_C.so", "p/only_a", "p/only_b"}
    assert ".text" in found["p/_C.so"].sections and ".dynsym" in found["p/_C.so"].sections
    assert found["p/only_a"].kind == "only in the first"
    with pytest.raises(
        VerificationError,
        match=r"variant v is not reproducible: .* p/_C\.so: content in section\(s\)",
    ):
        reprodiff.require_identical(a, b, what="variant v")
    reprodiff.require_identical(a, a, what="variant v")


def test_diff_names_the_fatbin_entry(tmp_path: Path) -> None:
    data = (DATA / "fatbin" / "rdc_linked_sm80.so").read_bytes()
    entries = fatbin.read_fatbin_entries(data, path="x")
    sass = next(e for e in entries if e.kind == "sass" and e.compression == "none")
    # Flip one byte inside that cubin: only that entry differs, in .nv_fatbin only.
    payload = fatbin.entry_payload(data, sass, path="x")
    pos = data.index(payload[:256], sass.offset) + 200
    changed = data[:pos] + bytes([data[pos] ^ 0xFF]) + data[pos + 1 :]
    sections, entries_differ = reprodiff.diff_elf(data, changed, path="x")
    assert sections == (".nv_fatbin",)
    assert entries_differ == (f"{sass.arch} (container {sass.container})",)


def test_verify_rebuilds_without_any_compile_cache(
    project: Project, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The twin build of --verify-reproducible is planned from the twin's inputs: no cache and
    no launcher, in another folder; a cache hit would make the two wheels identical by
    construction."""
    import dataclasses

    from wheelforge.build import reproduce
    from wheelforge.configuration.settings import Launchers
    from wheelforge.planning.planner import make_plan
    from wheelforge.toolchain.compilecache import CompileCache

    matrix = load_matrix(project())
    ccache = CompileCache(tool="ccache", exe=Path("/opt/bin/ccache"), base=tmp_path)
    given = plan_inputs(matrix, tmp_path)
    compilers = dataclasses.replace(given.settings.compilers, launchers=Launchers(cxx=("ccache",)))
    inputs = dataclasses.replace(
        given,
        compile_cache=ccache,
        settings=dataclasses.replace(given.settings, compilers=compilers),
    )
    plan = plan_for(matrix, tmp_path)

    def plan_variant(inputs: PlanInputs, variant: object, torch: object) -> object:
        return make_plan(inputs, variant, torch, weak_header="", nvcc_host="g++")  # type: ignore[arg-type]

    seen: list[tuple[VariantPlan, PlanInputs]] = []

    def build_variant(
        twin: VariantPlan, twin_inputs: PlanInputs, *_: object, **kw: object
    ) -> object:
        assert kw == {"keep_repairs": False}  # the twin's wheel comes from its own repair
        seen.append((twin, twin_inputs))
        raise RuntimeError("stop")

    monkeypatch.setattr(reproduce, "plan_variant", plan_variant)
    monkeypatch.setattr(reproduce, "build_variant", build_variant)
    first = make_plan(inputs, plan.variant, plan.torch, weak_header="", nvcc_host="g++")
    assert first.compile.launchers.cc == ("/opt/bin/ccache",)  # what the twin must not keep
    with pytest.raises(RuntimeError, match="stop"):
        reproduce.verify(object(), first, inputs, object())  # type: ignore[arg-type]
    [(twin, twin_inputs)] = seen
    assert twin.compile.launchers == Launchers() and twin.compile.compile_cache is None
    assert twin_inputs.compile_cache is None and not twin.build_dir.is_relative_to(tmp_path)


def test_path_free_names_each_path_under_its_deepest_folder() -> None:
    from wheelforge.planning.reproducible import SYSTEM, path_namer

    folders = (
        (Path("/work/proj"), "."),
        (Path("/venv/lib/site-packages/torch"), "torch"),
        (Path("/venv/lib/site-packages/torch/include/sub"), "deeper"),
        (Path("/usr/local/cuda-13.0"), "cuda"),
    )
    cases = {
        "/work/proj/kernels/csrc/a.cu": "kernels/csrc/a.cu",
        "/work/proj": ".",
        "/work/projector/x.h": f"{SYSTEM}/work/projector/x.h",  # a sibling, not inside
        "/venv/lib/site-packages/torch/include/torch/x.h": "torch/include/torch/x.h",
        "/venv/lib/site-packages/torch/include/sub/y.h": "deeper/y.h",
        "/usr/local/cuda-13.0/include/cuda.h": "cuda/include/cuda.h",
        "/usr/include/stdio.h": f"{SYSTEM}/usr/include/stdio.h",
    }
    for path, name in cases.items():
        assert path_namer(folders)(Path(path)) == name, path
