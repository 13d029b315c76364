"""The fatbin reader against cuobjdump, on binaries that the real nvcc builds here.

For each arch set and fatbin option below, the reader must list the same (kind, arch) entries,
in the same order, as ``cuobjdump --list-elf --list-ptx``; the same archs and code versions as
the entry headers that ``cuobjdump --dump-elf --dump-ptx`` prints; and the same payloads as
``cuobjdump --extract-elf all --extract-ptx all`` writes.

cuobjdump comes from the toolkit on PATH or from PyPI's ``nvidia-cuda-cuobjdump``.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from wheelforge.binaries.fatbin import FatbinEntry, entry_payload, ptx_target, read_fatbin_entries

pytestmark = pytest.mark.integration

KERNEL = """
__global__ void kernel_{n}(float* x, float s, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * s + {n}.0f;
}}
extern "C" void launch_{n}(float* x, float s, int n) {{
  kernel_{n}<<<(n + 255) / 256, 256>>>(x, s, n);
}}
"""


@dataclass(frozen=True)
class Case:
    id: str
    nvcc_flags: tuple[str, ...]
    units: int = 1
    # "so": nvcc -shared; "o": nvcc -c; "rdc-so": -rdc=true objects, device-linked with nvcc -dlink
    # and linked into a shared object by the host compiler.
    output: str = "so"
    cudart_none: bool = True


def gencode(arch: str, code: str) -> tuple[str, ...]:
    return ("-gencode", f"arch={arch},code={code}")


CASES = [
    Case("sass-only", gencode("compute_80", "sm_80")),
    Case(
        "sass-and-ptx-three-units",
        (*gencode("compute_75", "sm_75"), *gencode("compute_86", "[sm_86,compute_86]")),
        units=3,
    ),
    Case("ptx-only", gencode("compute_89", "compute_89")),
    Case(
        "arch-specific-sm90a",
        (*gencode("compute_90a", "[sm_90a,compute_90a]"), *gencode("compute_90", "sm_90")),
    ),
    Case(
        "family-specific-sm100f",
        (
            *gencode("compute_100f", "[sm_100f,compute_100f]"),
            *gencode("compute_103a", "sm_103a"),
            *gencode("compute_120f", "sm_120f"),
        ),
    ),
    Case(
        "compress-all-zstd",
        (
            "-Xfatbin=-compress-all",
            *gencode("compute_80", "[sm_80,compute_80]"),
            *gencode("compute_100a", "sm_100a"),
        ),
        units=2,
    ),
    Case(
        "compress-all-lz4",
        (
            "-Xfatbin=-compress-all",
            "-Xfatbin=-compress-mode=speed",
            *gencode("compute_75", "[sm_75,compute_75]"),
        ),
    ),
    Case(
        "no-compression",
        ("-Xfatbin=-compress=false", *gencode("compute_80", "[sm_80,compute_80]")),
    ),
    Case(
        "static-cudart",
        (*gencode("compute_80", "sm_80"), *gencode("compute_90", "compute_90")),
        cudart_none=False,
    ),
    Case("object-file", gencode("compute_80", "[sm_80,compute_80]"), output="o"),
    Case(
        "relocatable-object-file",
        ("-rdc=true", *gencode("compute_86", "[sm_86,compute_86]")),
        output="o",
    ),
    Case(
        "device-linked-shared-object",
        gencode("compute_80", "[sm_80,compute_80]"),
        units=2,
        output="rdc-so",
    ),
]


def find_cuobjdump() -> str | None:
    on_path = shutil.which("cuobjdump")
    if on_path:
        return on_path
    try:
        dist = importlib.metadata.distribution("nvidia-cuda-cuobjdump")
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in dist.files or []:
        if file.name == "cuobjdump":
            located = Path(str(dist.locate_file(file)))
            if located.is_file():
                return str(located)
    return None


@pytest.fixture(scope="module")
def nvcc() -> str:
    found = shutil.which("nvcc")
    if found is None:
        pytest.skip(
            "nvcc is not on PATH; install a CUDA toolkit to run the fatbin integration tests"
        )
    return found


@pytest.fixture(scope="module")
def cuobjdump() -> str:
    found = find_cuobjdump()
    if found is None:
        pytest.skip(
            "cuobjdump is neither on PATH nor installed from PyPI "
            "(pip install nvidia-cuda-cuobjdump)"
        )
    return found


def run(*command: str, cwd: Path) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        if "Unsupported gpu architecture" in done.stderr:
            pytest.skip(f"this nvcc can't build the case: {done.stderr.strip()}")
        pytest.fail(f"{' '.join(command)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return done.stdout


@pytest.fixture(scope="module", params=CASES, ids=[case.id for case in CASES])
def built(
    request: pytest.FixtureRequest, nvcc: str, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    case: Case = request.param
    folder = tmp_path_factory.mktemp(case.id)
    sources = [f"unit{n}.cu" for n in range(case.units)]
    for n, source in enumerate(sources):
        (folder / source).write_text(KERNEL.format(n=n))
    flags = ["-Xcompiler", "-fPIC", *case.nvcc_flags]
    if case.output == "o":
        run(nvcc, "-c", *flags, "-o", "out.o", *sources, cwd=folder)
        return folder / "out.o"
    if case.output == "rdc-so":
        objects = [f"unit{n}.o" for n in range(case.units)]
        for source, obj in zip(sources, objects, strict=True):
            run(nvcc, "-c", "-rdc=true", *flags, "-o", obj, source, cwd=folder)
        run(nvcc, "-dlink", *flags, "-o", "dlink.o", *objects, cwd=folder)
        compiler = shutil.which("g++") or shutil.which("c++")
        if compiler is None:
            pytest.skip("no host C++ compiler (g++) to link the device-linked shared object")
        run(compiler, "-shared", "-o", "out.so", *objects, "dlink.o", cwd=folder)
        return folder / "out.so"
    cudart = ["-cudart", "none"] if case.cudart_none else []
    run(nvcc, "-shared", *cudart, *flags, "-o", "out.so", *sources, cwd=folder)
    return folder / "out.so"


def reader_entries(binary: Path) -> list[FatbinEntry]:
    return read_fatbin_entries(binary.read_bytes(), path=str(binary))


def listed_name(entry: FatbinEntry) -> tuple[str, str]:
    """An entry as cuobjdump --list-elf/--list-ptx names it: PTX as sm_XX, and an f cubin after
    its own ELF header, which has no f (sm_100f -> sm_100)."""
    if entry.kind == "ptx":
        return ("ptx", entry.arch.replace("compute_", "sm_"))
    return ("sass", entry.arch[:-1] if entry.variant == "f" else entry.arch)


def test_list_matches_cuobjdump(built: Path, cuobjdump: str) -> None:
    listing = run(cuobjdump, "--list-elf", "--list-ptx", built.name, cwd=built.parent)
    expected = []
    for line in listing.splitlines():
        match = re.match(r"(ELF|PTX) file\s+\d+: .*\.(sm_\d+[a-z]?)\.(cubin|ptx)$", line)
        if match:
            expected.append(("sass" if match[1] == "ELF" else "ptx", match[2]))
    entries = reader_entries(built)
    assert expected, f"cuobjdump listed nothing:\n{listing}"
    assert [listed_name(e) for e in entries] == expected


def test_header_archs_and_versions_match_cuobjdump(built: Path, cuobjdump: str) -> None:
    dump = run(cuobjdump, "--dump-elf", "--dump-ptx", built.name, cwd=built.parent)
    expected = []
    kind = ""
    for line in dump.splitlines():
        if match := re.match(r"Fatbin (elf|ptx) code:", line):
            kind = "sass" if match[1] == "elf" else "ptx"
        elif kind and (match := re.match(r"arch = (sm_\d+[af]?)$", line)):
            arch = match[1]
        elif kind and (match := re.match(r"code version = \[(\d+),(\d+)\]$", line)):
            expected.append((kind, arch, f"{match[1]}.{match[2]}"))
            kind = ""
    found = [(e.kind, e.arch.replace("compute_", "sm_"), e.version) for e in reader_entries(built)]
    assert found == expected


def test_payloads_match_cuobjdump_extraction(built: Path, cuobjdump: str) -> None:
    out = built.parent / "extracted"
    out.mkdir(exist_ok=True)
    log = run(cuobjdump, "--extract-elf", "all", "--extract-ptx", "all", str(built), cwd=out)
    names: dict[str, list[str]] = {"sass": [], "ptx": []}
    for line in log.splitlines():
        if match := re.match(r"Extracting (ELF|PTX) file.*?\d+: (\S+\.(cubin|ptx))", line):
            names["sass" if match[1] == "ELF" else "ptx"].append(match[2])
    data = built.read_bytes()
    entries = read_fatbin_entries(data, path=str(built))
    for kind in ("sass", "ptx"):
        mine = [e for e in entries if e.kind == kind]
        assert len(mine) == len(names[kind])
        for entry, name in zip(mine, names[kind], strict=True):
            payload = entry_payload(data, entry, path=str(built))
            assert len(payload) == entry.size
            extracted = (out / name).read_bytes()
            if kind == "sass":
                assert payload == extracted, name
            else:
                # The fatbin keeps the PTX text's terminating NUL (and padding); cuobjdump drops it.
                assert payload.rstrip(b"\0") == extracted, name
                expected_target = entry.arch.replace("compute_", "sm_")
                assert ptx_target(data, entry, path=str(built)) == expected_target
