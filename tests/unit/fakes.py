"""Stand-ins for the objects that come from real tools (nvcc, the build Python's torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from wheelforge.packaging.buildinfo import BuildInfo

import sys
import zipfile
from pathlib import Path

from packaging.version import Version

from wheelforge.configuration import releases
from wheelforge.configuration.archs import ArchSet, parse_arch_list
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.configuration.settings import BuildSettings, Compilers
from wheelforge.packaging import wheel
from wheelforge.packaging.wheel import WheelContents
from wheelforge.planning import selection
from wheelforge.planning.plan import PlanInputs, VariantPlan
from wheelforge.planning.planner import make_plan
from wheelforge.planning.variants import Variant
from wheelforge.toolchain.choice import ToolkitChoice
from wheelforge.toolchain.toolkits import Toolkit
from wheelforge.toolchain.torchprobe import TorchEnv


def table_sass(release: str) -> tuple[int, ...]:
    """What nvcc of *release* lists (--list-gpu-code), as the release table records it."""
    found = releases.release(release)
    if found is None:
        raise LookupError(f"CUDA {release} is not in the release table; give the fake its sass")
    return tuple(sorted(found.sass))


CUDA13 = table_sass("13.0")
CUDA118 = table_sass("11.8")


def toolkit(
    version: str = "13.0.88", sass: tuple[int, ...] | None = None, gcc_max: int | None = 15
) -> Toolkit:
    """A toolkit of *version*; its archs are the release table's unless *sass* is given (a
    release the table lacks needs them)."""
    return Toolkit(
        nvcc=Path(f"/opt/cuda-{version}/bin/nvcc"),
        root=Path(f"/opt/cuda-{version}"),
        version=Version(version),
        sass=frozenset(table_sass(version) if sass is None else sass),
        cudart_static=Path(f"/opt/cuda-{version}/lib64/libcudart_static.a"),
        gcc_max=gcc_max,
        origin="test",
    )


def torch_env(tmp: Path, version: str = "2.13.0") -> TorchEnv:
    return TorchEnv(
        python=Path("/usr/bin/python3"),
        version=Version(version),
        local="cpu",
        cuda=None,
        include_dir=tmp / "torch" / "include",
        include_dirs=(
            tmp / "torch" / "include",
            tmp / "torch" / "include" / "torch" / "csrc" / "api" / "include",
        ),
        ext_suffix=".cpython-311-x86_64-linux-gnu.so",
        cxx11_abi=1,
        library_dirs=(tmp / "torch" / "lib",),
        python_include=Path("/usr/include/python3.11"),
        python_version="3.11",
    )


# The head of a demo-ops matrix (package, torch, one arch set) the multi-extension and torch-target
# tests put their extensions under.
DEMO_OPS_HEAD = """\
package:
  name: demo-ops
  version: 1.2.0
  packages: [demo_ops]
torch: ">=2.10"
arch-sets:
  default: "8.0 9.0+PTX"
"""


def plan_for(
    matrix: Matrix,
    tmp: Path,
    archs: str = "8.0 9.0+PTX",
    nvcc_threads: int | None = None,
    tk: Toolkit | None = None,
    inputs: PlanInputs | None = None,
) -> VariantPlan:
    arch_set = ArchSet("default", parse_arch_list(archs, source="test"))
    tk = tk or toolkit()
    return make_plan(
        inputs or plan_inputs(matrix, tmp, nvcc_threads=nvcc_threads),
        Variant(
            id=f"default-{tk.short}",
            arch_set=arch_set,
            choice=ToolkitChoice(toolkit=tk, recipe=None),
            local_label=None,
        ),
        torch_env(tmp),
        weak_header="#pragma weak aoti_torch_get_current_cuda_stream\n",
        nvcc_host="/usr/bin/g++",
    )


def build_settings(matrix: Matrix, tmp: Path, nvcc_threads: int | None = None) -> BuildSettings:
    """The settings of a build of *matrix* in *tmp*: g++ and gcc, its caches in *tmp*."""
    return BuildSettings(
        matrix=matrix,
        arch_source="matrix.yaml",
        out_dir=tmp / "dist",
        build_root=tmp / "build",
        jobs=None,
        nvcc_threads=nvcc_threads,
        python=Path(sys.executable),
        compilers=Compilers(cxx="/usr/bin/g++", cc="/usr/bin/gcc"),
        only=(),
        offline=True,
        cache_dir=tmp / "cache",
        size_budget=matrix.size_budget,
    )


def plan_inputs(matrix: Matrix, tmp: Path, nvcc_threads: int | None = None) -> PlanInputs:
    """What a build of *matrix* in *tmp* plans with: one core, no compile cache."""
    return PlanInputs(
        settings=build_settings(matrix, tmp, nvcc_threads), files=selection.project_files(matrix)
    )


def built_contents(plan: VariantPlan, platform: str = "linux_x86_64") -> WheelContents:
    """What the packer makes of *plan* once its build ran: each shared object written (a few
    bytes standing in for the link's output) where missing, and provenance files as the build
    gives them (their text aside)."""
    for link in plan.links:
        if not link.library.is_file():
            link.library.parent.mkdir(parents=True, exist_ok=True)
            link.library.write_bytes(b"\x7fELF fake library")
    extra = tuple((name, f"{name}\n") for name in selection.PROVENANCE_NAMES)
    return wheel.contents(plan, platform, extra)


ABICHECK_DATA = Path(__file__).resolve().parents[1] / "data" / "abicheck"


def make_wheel(
    tmp_path: Path,
    name: str,
    so: str,
    requires: str | None = "torch>=2.10",
    member: str = "pkg/_C.abi3.so",
    variant_json: bool = False,
) -> Path:
    """A wheel named *name* holding one of tests/data/abicheck's binaries as *member*."""
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(member, (ABICHECK_DATA / so).read_bytes())
        if variant_json:
            zf.writestr("pkg-1.0.dist-info/variant.json", "{}")
        zf.writestr("pkg/__init__.py", "")
        metadata = "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n" + (
            f"Requires-Dist: {requires}\n" if requires else ""
        )
        zf.writestr("pkg-1.0.dist-info/METADATA", metadata)
    return with_record(path)  # a whole wheel: the layout rule reads RECORD (issue 21)


def with_record(path: Path) -> Path:
    """The zip at *path* rewritten with a RECORD that lists its members (as a wheel builder
    writes it: sha256 and size, RECORD itself without), so a hand-made test wheel is a whole
    wheel to the layout rule."""
    import base64
    import hashlib
    import zipfile

    with zipfile.ZipFile(path) as zf:
        members = [(i, zf.read(i)) for i in zf.infolist() if not i.filename.endswith("/RECORD")]
    dist_info = next(
        (i.filename.split("/")[0] for i, _ in members if ".dist-info/" in i.filename),
        "demo-1.0.dist-info",
    )
    rows = []
    for info, data in members:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{info.filename},sha256={digest},{len(data)}\n")
    rows.append(f"{dist_info}/RECORD,,\n")
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for info, data in members:
            zf.writestr(info, data)
        zf.writestr(f"{dist_info}/RECORD", "".join(rows))
    return path


def build_info(variant_id: str, arch_set: str) -> BuildInfo:
    """A wheel's build info as wheelforge writes it, naming *variant_id* and *arch_set*."""
    from wheelforge.packaging import buildinfo

    return buildinfo.BuildInfo(
        wheelforge="0.1.0",
        source_date_epoch=0,
        variant=variant_id,
        arch_set=arch_set,
        archs=buildinfo.Archs(sass=("sm_80",), ptx=()),
        toolkit=buildinfo.ToolkitInfo(release="13.0.88", build=""),
        host_compiler="g++ 12",
        nvcc_host_compiler="g++ 12",
        torch=buildinfo.TorchInfo(headers_of="2.13.0", requirement="torch>=2.10"),
        abi="stable",
        target_version=(2, 10),
        python_abi="cp310-abi3",
        prefix_maps=(),
        flags=buildinfo.Flags(gencode="-gencode arch=compute_80,code=sm_80"),
        extensions=(),
        inputs=buildinfo.InputsInfo(files=0, sha256="0" * 64, list="wheelforge-inputs.txt"),
    )


# The package's layers (docs/architecture.md; test_layers.py enforces them).
# Lowest first: a module may import from its own layer and the layers before it.
LAYERS = (
    "foundation",
    "configuration",
    "toolchain",
    "planning",
    "binaries",
    "packaging",
    "adoption",
    "build",
    "documents",
    "cli",
)
