"""Bit-identical wheels from two folders, --verify-reproducible, and the provenance inside."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from tests.integration.helpers import needs_nvcc, only_wheel, wheelforge

pytestmark = needs_nvcc

# An anonymous namespace in a .cu file (nvcc mangles it with a hash of the source path and a
# random number) and __FILE__ (an absolute path unless mapped): the two classic leaks.
KERNEL = """\
#include <cstdio>
namespace {
__global__ void fill(float* x) { x[threadIdx.x] = 1.0f; }
}
extern "C" const char* where() { return __FILE__; }
extern "C" void launch(float* x) { fill<<<1, 32>>>(x); }
"""
MATRIX = """\
package: {name: tiny, version: '1.0', packages: [src/tiny]}
extension: {name: tiny._C, sources: [csrc/*.cu, csrc/*.cpp]}
torch: '>=2.10'
arch-sets: '8.0'
"""


def tiny_project(root: Path, *, planted: bool = False) -> Path:
    (root / "src" / "tiny").mkdir(parents=True)
    (root / "src" / "tiny" / "__init__.py").write_text("")
    (root / "csrc").mkdir()
    (root / "csrc" / "kernel.cu").write_text(KERNEL)
    stamp = '__DATE__ " " __TIME__' if planted else '"fixed"'
    (root / "csrc" / "stamp.cpp").write_text(
        f'extern "C" const char* stamp() {{ return {stamp}; }}\n'
    )
    (root / "matrix.yaml").write_text(MATRIX)
    return root


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_two_folders_give_identical_wheels_and_verify_passes(tmp_path: Path) -> None:
    first = tiny_project(tmp_path / "a")
    second = tiny_project(tmp_path / "elsewhere" / "b")
    run = wheelforge("build", "--verify-reproducible", cwd=first)
    assert run.code == 0, run.err
    assert "reproducible: a rebuild in another folder is identical" in run.out
    run = wheelforge("build", "--build-dir", tmp_path / "other-build", cwd=second)
    assert run.code == 0, run.err
    wheel = only_wheel(first / "dist")
    assert sha256(wheel) == sha256(only_wheel(second / "dist"))
    with zipfile.ZipFile(wheel) as zf:
        so = zf.read("tiny/_C.abi3.so")
        info = json.loads(zf.read("tiny-1.0.dist-info/wheelforge-build.json"))
        sbom = zf.read("tiny-1.0.dist-info/sboms/wheelforge.cdx.json").decode()
    for folder in (first, second, tmp_path):
        assert str(folder).encode() not in so
    assert b"tmpxft" not in so
    assert b"./csrc/kernel.cu" in so  # __FILE__, through the prefix map
    # Build info: the archs read from the fatbin, and the digest of the inputs list, in which
    # every input is hashed under a path-free name (the list lies in the build folder).
    assert info["archs"] == {"sass": ["sm_80"], "ptx": []}
    listed = (
        first / "build" / "wheelforge" / "default-cu130" / "wheelforge-inputs.txt"
    ).read_text()
    assert f"{hashlib.sha256(KERNEL.encode()).hexdigest()}  csrc/kernel.cu\n" in listed
    assert not any(line.split("  ", 1)[1].startswith("/") for line in listed.splitlines())
    assert info["inputs"] == {
        "files": len(listed.splitlines()),
        "sha256": hashlib.sha256(listed.encode()).hexdigest(),
        "list": "wheelforge-inputs.txt",
    }
    assert str(tmp_path) not in json.dumps(info) and str(tmp_path) not in sbom
    # The build info is its model's document: the shipped schema validates it, and it reads back.
    import jsonschema

    from wheelforge.documents import schemas
    from wheelforge.packaging import buildinfo

    [kind] = [k for k in schemas.KINDS if k.model is buildinfo.BuildInfo]
    jsonschema.validate(info, kind.packaged_schema(), cls=jsonschema.Draft202012Validator)
    read = buildinfo.read(wheel)
    assert read is not None and read.schema_version == 1 and read.variant == "default-cu130"
    # The format's own validator accepts the SBOM.
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(sbom) is None
    names = {c["name"] for c in json.loads(sbom)["components"]}
    assert {"torch", "cudart_static", "csrc/kernel.cu", "csrc/stamp.cpp"} <= names


def test_verify_reproducible_names_member_and_section_of_a_planted_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GCC takes __DATE__ and __TIME__ from SOURCE_DATE_EPOCH when it is set.
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    project = tiny_project(tmp_path / "p", planted=True)
    run = wheelforge("build", "--verify-reproducible", cwd=project)
    assert run.code == 4  # a verification failure (docs/usage.md: exit codes)
    assert "variant default-cu130 is not reproducible" in run.err
    # The member and the section of the string (.note.gnu.build-id, a hash of it all, too).
    line = next(ln for ln in run.err.splitlines() if "is not reproducible" in ln)
    assert "differs in tiny/_C.abi3.so: content in section(s) " in line
    assert ".rodata" in line.split("section(s) ", 1)[1]
    assert not list((project / "dist").glob("*.whl"))  # the failed wheel is not published


def test_split_compiles_give_the_same_wheel_at_any_jobs(tmp_path: Path) -> None:
    """nvcc's compiles are cut into a fixed number of partitions (planner.split_partitions) whose
    threads take jobserver tokens: the wheel is byte for byte the same whether one token or
    several are free (-j 1, -j 3), and the jobserver's folder is gone afterwards."""
    from wheelforge.planning.planner import SPLIT_PARTITIONS

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {"TMPDIR": str(scratch)}
    wheels = []
    for jobs, name in (("1", "a"), ("3", "b")):
        root = tiny_project(tmp_path / name)
        run = wheelforge("build", "-j", jobs, "--compile-cache", "none", cwd=root, env=env)
        assert run.code == 0, run.err
        folder = root / "build" / "wheelforge" / "default-cu130"
        assert f"--split-compile={SPLIT_PARTITIONS}" in (folder / "build.ninja").read_text()
        assert "--jobserver-auth=fifo:" in (folder / "build.log").read_text()
        wheels.append(only_wheel(root / "dist"))
    assert sha256(wheels[0]) == sha256(wheels[1])
    assert not [p for p in scratch.iterdir() if p.name.startswith("wheelforge-jobserver-")]
