"""check's unresolved-symbol rule (issue 32): an op library whose kernel calls a function nothing
it loads defines fails torch.ops.load_library with "undefined symbol"; check fails such a wheel
with a line naming the symbol, without torch, from the ELF files alone. The binaries are small
real ones built by tests/data/abicheck/build.sh (unresolved_oplib.c, helper.c)."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from wheelforge.binaries import abicheck
from wheelforge.binaries.abicheck import BinaryCheck
from wheelforge.binaries.elf import open_elf_file
from wheelforge.binaries.symbols import LibraryExports, library_exports, read_linkage
from wheelforge.build import importcheck
from wheelforge.cli.app import main
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.foundation.errors import VerificationError

from .conftest import GOOD_MATRIX
from .fakes import plan_for, with_record

ABI = Path(__file__).resolve().parents[1] / "data" / "abicheck"
RELEASED = Path(__file__).resolve().parents[1] / "data" / "released"
NAME = "demo-1.0-cp310-abi3-manylinux_2_17_x86_64.whl"


def wheel(tmp_path: Path, members: dict[str, Path], name: str = NAME) -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as zf:
        for member, source in members.items():
            zf.writestr(member, source.read_bytes())
        zf.writestr(
            "demo-1.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: torch>=2.10\n",
        )
    return with_record(path)


def unresolved(checks: list[BinaryCheck]) -> dict[str, list[tuple[str | None, str, str]]]:
    return {
        c.path.rsplit("!", 1)[-1]: [
            (v.symbol, v.severity, v.message) for v in c.violations if v.rule == "unresolved-symbol"
        ]
        for c in checks
        if "!" in c.path
    }


def test_the_linkage_reader_sees_needed_libraries_versions_and_exports() -> None:
    with open_elf_file(ABI / "linked_oplib.so") as image:
        linked = read_linkage(image)
    assert linked.needed == ("libhelper.so",)
    assert linked.unbound == ("aoti_torch_library_init_impl", "scale_rows", "torch_library_impl")
    with open_elf_file(RELEASED / "spinloop.abi3.so") as image:
        released = read_linkage(image)
    # clock_gettime@GLIBC_2.17 names its library: not among those the loader must find
    assert "clock_gettime" not in released.unbound and "libc.so.6" in released.needed
    with open_elf_file(ABI / "libhelper.so") as image:
        helper = read_linkage(image)
    assert helper.soname == "libhelper.so" and "scale_rows" in helper.exports


def test_an_op_library_calling_a_function_nothing_defines_fails_check_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = wheel(tmp_path, {"demo/_ops.abi3.so": ABI / "unresolved_oplib.so"})
    [[(symbol, severity, message)]] = unresolved(
        abicheck.check_wheel(path, torch=None, guards={})
    ).values()
    assert (symbol, severity) == ("scale_rows", "error")
    assert "torch.ops.load_library fails with 'undefined symbol: scale_rows'" in message
    assert main(["check", str(path)]) == VerificationError.exit_code
    err = " ".join(capsys.readouterr().err.split())
    assert "error: demo/_ops.abi3.so needs scale_rows, which nothing it loads defines" in err


def test_a_library_of_the_wheel_it_links_provides_the_symbol(tmp_path: Path) -> None:
    path = wheel(
        tmp_path,
        {"demo/_ops.abi3.so": ABI / "linked_oplib.so", "demo/libhelper.so": ABI / "libhelper.so"},
    )
    assert unresolved(abicheck.check_wheel(path, torch=None, guards={})) == {
        "demo/_ops.abi3.so": [],
        "demo/libhelper.so": [],
    }


def test_a_library_of_the_wheel_that_defines_it_but_is_not_linked_is_named(
    tmp_path: Path,
) -> None:
    path = wheel(
        tmp_path,
        {
            "demo/_ops.abi3.so": ABI / "unresolved_oplib.so",
            "demo/libhelper.so": ABI / "libhelper.so",
        },
    )
    [(symbol, severity, message)] = unresolved(abicheck.check_wheel(path, torch=None, guards={}))[
        "demo/_ops.abi3.so"
    ]
    assert (symbol, severity) == ("scale_rows", "error")
    assert "which the wheel's libhelper.so defines but demo/_ops.abi3.so does not link" in message


def test_a_needed_library_the_wheel_lacks_makes_it_a_warning_naming_that_library(
    tmp_path: Path,
) -> None:
    # linked_oplib.so needs libhelper.so, which this wheel does not ship: it may come from the
    # system, so the symbol is a warning that names the library, not an error.
    path = wheel(tmp_path, {"demo/_ops.abi3.so": ABI / "linked_oplib.so"})
    [(symbol, severity, message)] = unresolved(abicheck.check_wheel(path, torch=None, guards={}))[
        "demo/_ops.abi3.so"
    ]
    assert (symbol, severity) == ("scale_rows", "warning")
    assert "unless libhelper.so provides it" in message


def test_a_library_auditwheel_grafted_is_taken_to_provide_what_it_needs(tmp_path: Path) -> None:
    path = wheel(
        tmp_path,
        {
            "demo/_ops.abi3.so": ABI / "linked_oplib.so",
            "demo.libs/libhelper.so": ABI / "libhelper.so",
        },
    )
    assert unresolved(abicheck.check_wheel(path, torch=None, guards={}))["demo/_ops.abi3.so"] == []


@pytest.mark.parametrize(
    "member",
    [
        "_torchaudio.abi3.so",  # links libtorch, libcudart: its std:: and c10:: come from them
        "fs_io_C.abi3.so",
        "spinloop.abi3.so",
        "_flashmla_extension_C.abi3.so",  # nvcc's __cudaRegister*: torch loads CUDA globally
    ],
)
def test_released_binaries_have_no_unresolved_symbol(tmp_path: Path, member: str) -> None:
    path = wheel(tmp_path, {f"demo/{member}": RELEASED / member})
    assert unresolved(abicheck.check_wheel(path, torch=None, guards={})) == {f"demo/{member}": []}


def test_the_import_check_names_the_symbol_a_library_lacks(
    project: Callable[[str], Path], tmp_path: Path
) -> None:
    """What torch.ops.load_library raised (dlopen's words) becomes a hint naming the symbol,
    demangled, and what to add (build/importcheck.py)."""
    text = GOOD_MATRIX.replace("name: demo_ops._C", "name: demo_ops._ops\n  kind: library")
    plan = plan_for(load_matrix(project(text)), tmp_path)
    [link] = plan.links
    load = ("library", link.extension.name, Path("/tmp/x/site") / link.wheel_path)
    said = importcheck._hint(
        "OSError: /tmp/x/site/demo_ops/_ops.so: undefined symbol: _Z10scale_rowsPvi",
        load,
        plan,
        Path("/tmp/x/site"),
    )
    assert said.startswith("scale_rows(void*, int) (_Z10scale_rowsPvi) is defined by no library")
    assert "the library loads" in said


def test_a_binary_linking_torch_is_judged_by_what_torchs_libraries_export(tmp_path: Path) -> None:
    """torch_oplib.so links libc10.so, as the stable ABI's builds link torch's libraries: with a
    torch at hand its libraries' exports decide; without one, their namespaces (scale_rows is
    in none of them)."""
    path = wheel(tmp_path, {"demo/_ops.abi3.so": ABI / "torch_oplib.so"})

    def found(exports: frozenset[str] | None) -> list[tuple[str | None, str, str]]:
        checks = abicheck.check_wheel(path, torch=None, guards={}, torch_exports=exports)
        return unresolved(checks)["demo/_ops.abi3.so"]

    [(symbol, severity, message)] = found(None)
    assert (symbol, severity) == ("scale_rows", "error")
    assert "no torch here to read its libraries" in message
    [(symbol, _, message)] = found(frozenset({"c10_stub"}))
    assert symbol == "scale_rows" and "no torch here" not in message
    assert found(frozenset({"scale_rows"})) == []


def test_what_torchs_libraries_need_beside_them_provides_symbols(tmp_path: Path) -> None:
    """The released xformers 0.0.32.post2's _C.so calls GOMP_parallel, unversioned, and links
    no libgomp: libtorch_cpu.so needs the libgomp.so.1 torch ships beside it, so it binds there
    (the loader's scope is the DT_NEEDED closure). torchlib/ is torch's lib folder in small
    (build.sh)."""
    path = wheel(tmp_path, {"demo/_ops.abi3.so": ABI / "gomp_oplib.so"})
    with_gomp = library_exports([ABI / "torchlib"])
    assert with_gomp is not None and "GOMP_parallel" in with_gomp

    def found(exports: LibraryExports | None) -> list[tuple[str | None, str, str]]:
        checks = abicheck.check_wheel(path, torch=None, guards={}, torch_exports=exports)
        return unresolved(checks)["demo/_ops.abi3.so"]

    assert found(LibraryExports((ABI / "torchlib",))) == []
    # No torch here to read: libtorch_cpu.so is known by name, and it links libgomp.
    assert found(None) == []


def test_a_symbol_only_the_host_process_loads_globally_is_a_warning_saying_so(
    tmp_path: Path,
) -> None:
    """gomp_alone.so calls GOMP_parallel and links no library that has it: dlopen fails here
    ('undefined symbol: GOMP_parallel'), but in a process where torch was imported first,
    libtorch_global_deps.so (RTLD_GLOBAL) brought libgomp: a warning with that reason."""
    path = wheel(tmp_path, {"demo/_ops.abi3.so": ABI / "gomp_alone.so"})
    [(symbol, severity, message)] = unresolved(abicheck.check_wheel(path, torch=None, guards={}))[
        "demo/_ops.abi3.so"
    ]
    assert (symbol, severity) == ("GOMP_parallel", "warning")
    assert "from the host process" in message and "libtorch_global_deps.so" in message


@pytest.mark.parametrize(
    ("tag", "verdict"),
    [("manylinux_2_17_x86_64", "warning"), ("manylinux_2_34_x86_64", None)],
)
def test_unversioned_dlopen_binds_in_libc_from_glibc_234_and_in_libdl_before(
    tmp_path: Path, tag: str, verdict: str | None
) -> None:
    """dl_unversioned.so (as cupy's nvtx module) references dlopen, dlsym and dlclose without a
    version and links only libc.so.6: libc.so.6 has them from glibc 2.34 on (dlopen@@GLIBC_2.34
    in data/system-exports.json); before, libdl.so.2 had them, which the python executable links:
    on a tag older than 2.34 a warning naming that, never an error; from 2.34 nothing."""
    name = NAME.replace("manylinux_2_17_x86_64", tag)
    path = wheel(tmp_path, {"demo/_nvtx.abi3.so": ABI / "dl_unversioned.so"}, name=name)
    found = unresolved(abicheck.check_wheel(path, torch=None, guards={}))["demo/_nvtx.abi3.so"]
    assert [severity for _, severity, _ in found] == ([verdict] if verdict else [])
    if verdict:
        assert "dlclose, dlopen, dlsym" in found[0][2] and "before 2.34" in found[0][2]


@pytest.mark.parametrize(
    ("tag", "verdict"),
    [("manylinux_2_17_x86_64", "error"), ("manylinux_2_28_x86_64", None)],
)
def test_an_unversioned_glibc_symbol_newer_than_the_tag_fails(
    tmp_path: Path, tag: str, verdict: str | None
) -> None:
    """getrandom arrived in glibc 2.25: unversioned, it binds on a manylinux_2_28 system, and on
    the glibc 2.17 a manylinux2014 tag admits it does not."""
    name = NAME.replace("manylinux_2_17_x86_64", tag)
    path = wheel(tmp_path, {"demo/_r.abi3.so": ABI / "getrandom_unversioned.so"}, name=name)
    found = unresolved(abicheck.check_wheel(path, torch=None, guards={}))["demo/_r.abi3.so"]
    assert [severity for _, severity, _ in found] == ([verdict] if verdict else [])
    if verdict:
        assert "libc.so.6 GLIBC_2.25" in found[0][2] and "GLIBC_2.17 at most" in found[0][2]


def test_operator_new_binds_in_the_libstdcxx_it_links(tmp_path: Path) -> None:
    """_Znwm and _ZdlPvm (operator new and sized delete), unversioned, with libstdc++.so.6 a
    DT_NEEDED library: libstdc++ exports them (GLIBCXX_3.4; CXXABI_1.3.9, GCC 5), so on a
    manylinux_2_28 system they bind; the manylinux2014 tag guarantees CXXABI_1.3.7 at most
    (GCC 4.8's libstdc++), which has no sized delete."""
    new = NAME.replace("manylinux_2_17", "manylinux_2_28")
    path = wheel(tmp_path, {"demo/_n.abi3.so": ABI / "new_unversioned.so"}, name=new)
    assert unresolved(abicheck.check_wheel(path, torch=None, guards={}))["demo/_n.abi3.so"] == []
    old = wheel(tmp_path, {"demo/_n.abi3.so": ABI / "new_unversioned.so"})
    [(symbol, severity, message)] = unresolved(abicheck.check_wheel(old, torch=None, guards={}))[
        "demo/_n.abi3.so"
    ]
    assert (symbol, severity) == ("_ZdlPvm", "error")
    assert "libstdc++.so.6 CXXABI_1.3.9" in message and "CXXABI_1.3.7 at most" in message


def test_a_symbol_of_a_dependencys_dependency_binds(tmp_path: Path) -> None:
    """mid_oplib.so links libmid.so, which links libhelper.so, which defines scale_rows: the
    loader's scope is the whole closure (libtorch_python -> libtorch_cuda -> libtorch_nvshmem
    in torch's own wheel)."""
    path = wheel(
        tmp_path,
        {
            "demo/_ops.abi3.so": ABI / "mid_oplib.so",
            "demo/libmid.so": ABI / "libmid.so",
            "demo/libhelper.so": ABI / "libhelper.so",
        },
    )
    assert unresolved(abicheck.check_wheel(path, torch=None, guards={}))["demo/_ops.abi3.so"] == []
