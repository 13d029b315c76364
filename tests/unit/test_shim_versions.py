"""PyTorch's shim_function_versions.txt and wheelforge's table of what each release's libraries
export (data/shim_exports.json): the file is read from the torch at hand when it ships one, the
table is the fallback, and the two agree on every release both cover.

What the agreement test found, on PyTorch's file as of tests/data/shims/ (releases 2.10 to 2.14)
against the table (2.9 to 2.14):

- every function the file lists arrived, in the libraries, in the release it names;
- the file also lists names no Linux library exports: the handle types (``StringHandle``) and
  the MPS and XPU shims;
- eight functions arrived in a release the file covers but are not listed, so the file says they
  predate 2.10 (SILENT below): seven AOTInductor shims that arrived in 2.10 (torch 2.9's
  libraries lack them; their declarations in aoti_torch/c/shim.h carry no version guard either),
  and torch_tag_out_variant, exported since 2.12, which PyTorch's later copies of the file list
  at 2.12 (this one lags). A binary using one loads on the table's release only, and judge()
  keeps the table's answer for a function the file omits.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wheelforge.binaries import abicheck, floors
from wheelforge.toolchain import shims
from wheelforge.toolchain.shims import Version2

DATA = Path(__file__).parents[1] / "data"
FILE = DATA / "shims" / "shim_function_versions.txt"

# Arrived in the libraries of a release the file covers, absent from the file (the test below
# finds exactly these), with that release.
SILENT: dict[str, Version2] = {
    "aoti_torch_cuda_caching_allocator_raw_alloc": (2, 10),
    "aoti_torch_cuda_caching_allocator_raw_delete": (2, 10),
    "aoti_torch_delete_c10_value_object": (2, 10),
    "aoti_torch_int64_to_ivalue": (2, 10),
    "aoti_torch_str_to_ivalue": (2, 10),
    "aoti_torch_strlist_to_ivalue": (2, 10),
    "aoti_torch_tensor_to_ivalue": (2, 10),
    "torch_tag_out_variant": (2, 12),
}


def _file() -> shims.VersionsFile:
    return shims.parse_versions_file(FILE.read_text("utf-8"), path=str(FILE))


def _first_release(table: dict[Version2, frozenset[str]]) -> dict[str, Version2]:
    first: dict[str, Version2] = {}
    for version in sorted(table):
        for name in table[version]:
            first.setdefault(name, version)
    return first


def _exported_on_linux(name: str) -> bool:
    """Whether libtorch_cpu/libtorch_cuda of a Linux build could export *name*: a shim function
    (not a handle type) of the CPU or CUDA device (not MPS, not XPU)."""
    if not shims.is_shim(name):
        return False
    return not name.startswith(("aoti_torch_mps_", "aoti_torch_xpu_", "torch_mps_", "torch_xpu_"))


def test_the_file_is_read_as_pytorch_writes_it() -> None:
    found = _file()
    assert found.versions["torch_library_impl"] == (2, 10)
    assert found.versions["torch_from_blob"] == (2, 11)
    assert found.versions["torch_stream_native_handle"] == (2, 13)
    assert found.versions["torch_tensor_from_pyobject"] == (2, 14)
    assert found.newest == (2, 14)
    assert len(found.versions) == 130  # every entry line, none lost to the parser


def test_the_file_and_the_table_agree_on_every_release_both_cover() -> None:
    table = shims.exports_table()
    versions = _file()
    both = [v for v in sorted(table) if v <= versions.newest]
    assert both == [(2, 9), (2, 10), (2, 11), (2, 12), (2, 13), (2, 14)]
    first = _first_release(table)
    # Each function the file lists arrived in the libraries in the release it names.
    disagree = {
        name: (since, first.get(name))
        for name, since in versions.versions.items()
        if _exported_on_linux(name) and first.get(name) != since
    }
    assert disagree == {}
    # The names it lists that no Linux library exports are handle types and other devices' shims.
    never = {n for n in versions.versions if n not in first}
    assert never == {n for n in versions.versions if not _exported_on_linux(n)}
    # The functions that arrived in a release the file covers but that it does not list.
    silent = {
        name: since
        for name, since in first.items()
        if shims.VERSIONS_FILE_SINCE <= since <= versions.newest and name not in versions.versions
    }
    assert silent == SILENT
    # And nothing the file lists as new was in an older release's libraries already.
    assert not any(versions.versions.get(n, (0, 0)) > (2, 9) for n in table[(2, 9)])


def test_judge_takes_the_tables_release_for_a_function_the_file_omits() -> None:
    versions = _file()
    for name, since in SILENT.items():
        before = (since[0], since[1] - 1)
        assert shims.judge(name, before, {}, versions).ok is False
        assert shims.judge(name, since, {}, versions).introduced == since
        # Beyond the table too: the table's first release, not the file's "before 2.10".
        assert shims.judge(name, (2, 99), {}, versions).introduced == since


def test_beyond_the_table_the_file_decides() -> None:
    future: Version2 = (2, 99)
    assert future not in shims.exports_table()
    versions = shims.VersionsFile(
        path="torch/csrc/stable/c/shim_function_versions.txt",
        versions={"torch_brand_new": (2, 99), "torch_later": (3, 1)},
    )
    # The headers' guards would say otherwise: the file is the torch's own word.
    guards: dict[str, Version2 | None] = {"torch_later": None, "torch_declared_old": None}
    assert shims.judge("torch_brand_new", future, guards, versions).ok is True
    later = shims.judge("torch_later", future, guards, versions)
    assert (later.ok, later.introduced, later.source) == (False, (3, 1), versions.path)
    assert shims.judge("torch_library_impl", future, guards, versions).ok is True  # the table's
    assert shims.judge("torch_declared_old", future, guards, versions).ok is True  # predates it
    assert shims.judge("torch_never_heard_of", future, guards, versions).ok is False
    assert shims.judge("torch_later", future, guards).ok is True  # without it: the guards


@pytest.mark.parametrize("where", shims.VERSIONS_FILE)
def test_a_torch_package_that_ships_the_file_is_read(tmp_path: Path, where: str) -> None:
    target = tmp_path / "torch" / where
    target.parent.mkdir(parents=True)
    target.write_text(FILE.read_text("utf-8"))
    found = shims.versions_file(tmp_path / "torch")
    assert found is not None and found.path == str(target) and found.newest == (2, 14)
    assert shims.versions_file(tmp_path) is None  # no torch there


def test_a_file_too_large_to_be_pytorchs_list_is_not_read(tmp_path: Path) -> None:
    target = tmp_path / shims.VERSIONS_FILE[0]
    target.parent.mkdir(parents=True)
    target.write_bytes(b"torch_x: TORCH_VERSION_2_10_0\n" * 40_000)
    assert shims.versions_file(tmp_path) is None


def test_check_reads_the_file_of_the_torch_at_hand(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # newer_shim.so uses torch_exception_get_what_without_backtrace (2.13 by the table); a torch
    # at hand whose file says 3.1 makes it too new for --target 2.99, naming the file.
    torch_dir = tmp_path / "site-packages" / "torch"
    listed = torch_dir / shims.VERSIONS_FILE[0]
    listed.parent.mkdir(parents=True)
    listed.write_text("torch_exception_get_what_without_backtrace: TORCH_VERSION_3_1_0\n")
    monkeypatch.setattr(shims, "_installed_torch_dir", lambda: torch_dir)
    found = shims.installed_torch_versions()
    [checked] = abicheck.check_paths(
        [DATA / "abicheck" / "newer_shim.so"],
        torch=(2, 99),
        python=None,
        guards={},
        versions=found,
    )
    [violation] = [v for v in checked.violations if v.rule == "shim-version"]
    assert "arrived in torch 3.1" in violation.message and str(listed) in violation.message


def test_a_releases_headers_declare_what_its_libraries_export() -> None:
    """tools/gen_shim_exports.py --source/--git reads a release from its source tree: the
    declarations of its shim headers (MPS and XPU aside) are, name for name, what the
    libraries of that release export (the table, read from its CUDA wheel)."""
    torch_dir = shims._installed_torch_dir()
    if torch_dir is None:
        pytest.skip("no torch here")
    import torch  # the release the headers are of

    release = tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2])
    table = shims.exports_table()
    if release not in table:
        pytest.skip(f"torch {torch.__version__} is not in the table")
    declared = shims.declared_exports(torch_dir / "include")
    assert declared == table[release]  # type: ignore[index]


GUARDED_2_15 = """\
#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_14_0
AOTI_TORCH_EXPORT AOTITorchError torch_has_storage(AtenTensorHandle t, bool* ret);
#endif
#if TORCH_FEATURE_VERSION >= TORCH_VERSION_2_15_0
AOTI_TORCH_EXPORT AOTITorchError torch_new_in_2_15(void* py_obj, bool* ret);
#endif
"""


def test_a_function_newer_than_the_table_gets_the_release_its_headers_guard_it_with(
    tmp_path: Path,
) -> None:
    """The table stops at the newest release read; a binary calling a function a newer
    release's headers declare under TORCH_VERSION_2_15_0 needs torch 2.15."""
    folder = tmp_path / "torch/csrc/stable/c"
    folder.mkdir(parents=True)
    (folder / "shim.h").write_text(GUARDED_2_15)
    guards = shims.header_guards(tmp_path)
    assert guards["torch_new_in_2_15"] == (2, 15)
    floor = floors.introduced_floor(["torch_has_storage", "torch_new_in_2_15"], guards)
    assert floor == (2, 15)
    assert floors.introduced_floor(["torch_has_storage"], guards) == (2, 14)
