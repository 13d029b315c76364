"""Real public projects, built as a user would: their PyPI sdists fetched at test time (never
copied into this repository), with the matrices in tests/integration/projects/ written here.

- witwin-radar: stable ABI (STABLE_TORCH_LIBRARY), built once, tested under two torches;
- causal-conv1d: a classic torch/extension.h CUDAExtension, unstable ABI, one wheel per torch.

Fetching runs each sdist's metadata hook (pip has no way around it); the projects' skip
variables keep that from compiling anything. All of it is `network`: out of the default run, in
CI's network step (witwin-radar's build and test, and `wheelforge init` on each checkout);
causal-conv1d's build needs two multi-GB CUDA torches and many minutes of nvcc, so it is a
`sweep` (run it with `pytest -m sweep tests/integration/test_real_projects.py`). All skip
cleanly offline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.integration.helpers import needs_nvcc, wheelforge
from wheelforge.configuration.matrix.load import load_matrix

pytestmark = [
    pytest.mark.network,
    needs_nvcc,
]

PROJECTS = Path(__file__).resolve().parent / "projects"
# pip's words when no index can be reached (or it has no such file): skip, don't fail.
_OFFLINE = (
    "NewConnectionError",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "No matching distribution found",
    "Could not find a version",
    "Network is unreachable",
)


@dataclass(frozen=True)
class RealProject:
    name: str
    requirement: str
    skip_env: dict[str, str] = field(default_factory=dict)
    # causal-conv1d's build needs torch: use this environment's instead of a fresh download.
    build_isolation: bool = True


WITWIN = RealProject("witwin-radar", "witwin-radar==0.4.1", {"WITWIN_RADAR_ALLOW_PURE_WHEEL": "1"})
CAUSAL = RealProject(
    "causal-conv1d",
    "causal-conv1d==1.7.0",
    {"CAUSAL_CONV1D_SKIP_CUDA_BUILD": "TRUE"},
    build_isolation=False,
)


def fetch(project: RealProject, dest: Path) -> Path:
    """The project's sdist, extracted into *dest*, with our matrix and smoke tests beside it."""
    download = dest / "sdist"
    args = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
            "--disable-pip-version-check", "-d", str(download), project.requirement]  # fmt: skip
    if not project.build_isolation:
        args.append("--no-build-isolation")
    proc = subprocess.run(
        args, capture_output=True, text=True, env={**os.environ, **project.skip_env}
    )
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        if any(marker in output for marker in _OFFLINE):
            pytest.skip(f"{project.requirement} can't be downloaded here (offline?)")
        pytest.fail(f"pip download {project.requirement} failed:\n{output[-3000:]}")
    [sdist] = download.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(dest, filter="data")
    [root] = [p for p in dest.iterdir() if p.is_dir() and p.name != "sdist"]
    return root


def with_matrix(project: RealProject, checkout: Path) -> Path:
    for item in (PROJECTS / project.name).iterdir():
        if item.is_dir():
            shutil.copytree(item, checkout / item.name, dirs_exist_ok=True)
        else:
            shutil.copy(item, checkout / item.name)
    return checkout


@pytest.fixture(scope="module")
def witwin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fetch(WITWIN, tmp_path_factory.mktemp("witwin"))


@pytest.fixture(scope="module")
def causal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fetch(CAUSAL, tmp_path_factory.mktemp("causal"))


def copy_of(checkout: Path, tmp_path: Path) -> Path:
    target = tmp_path / checkout.name
    shutil.copytree(checkout, target)
    return target


def test_init_on_causal_conv1d_matches_the_hand_written_matrix(
    causal: Path, tmp_path: Path
) -> None:
    root = copy_of(causal, tmp_path)
    run = wheelforge("init", root, "--torch", "2.11.0", "--torch", "2.12.0", "--archs", "9.0",
                     cwd=tmp_path)  # fmt: skip
    assert run.code == 0, run.err
    # setup.py ran (issue 19): its computed version and its appended flags were captured, so
    # nothing is left to a hand; --no-run still reads it statically and says what it can't follow.
    assert "nothing needs a hand" in run.err
    written = load_matrix(root / "matrix.yaml")
    assert "--expt-relaxed-constexpr" in written.extension.nvcc_flags
    static = copy_of(causal, tmp_path / "static")
    run = wheelforge(
        "init", "--no-run", static, "--torch", "2.11.0", "--archs", "9.0", cwd=tmp_path
    )
    assert run.code == 0, run.err
    assert "setup(version=get_package_version()) is computed" in run.err
    assert "'cc_flag' is changed in place" in run.err
    ours = load_matrix(with_matrix(CAUSAL, copy_of(causal, tmp_path / "ours")) / "matrix.yaml")
    assert (written.extension.name, written.abi, written.package.version) == (
        ours.extension.name, ours.abi, ours.package.version,
    )  # fmt: skip

    def files(m: object) -> set[Path]:  # init writes a glob where it names exactly these files
        return {p for s in m.extension.sources for p in m.root.glob(s.pattern)}  # type: ignore[attr-defined]

    assert {p.name for p in files(written)} == {p.name for p in files(ours)}
    assert written.extension.module_init is False
    assert [str(v) for v in written.torch.versions] == ["2.11.0", "2.12.0"]


def test_init_on_causal_conv1d_writes_its_folders_relative_so_a_copy_reads_them(
    causal: Path, tmp_path: Path
) -> None:
    """causal-conv1d 1.7.0 names its include folder as Path(this_dir) / "csrc" (an
    absolute path) and its archs as a -gencode list (issue 32): init writes the folder relative
    to the project and the archs from the flags; the matrix read in a copy elsewhere names
    nothing of the folder init ran in."""
    root = copy_of(causal, tmp_path / "first")
    run = wheelforge("init", root, "--torch", "2.11.0", cwd=tmp_path)
    assert run.code == 0, run.err
    text = (root / "matrix.yaml").read_text()
    assert str(root) not in text and str(tmp_path) not in text
    written = yaml.safe_load(text)
    assert written["extension"]["include-dirs"] == ["csrc"]
    assert written["arch-sets"]["default"]  # its own -gencode flags, not a guess
    copy = copy_of(root, tmp_path / "elsewhere")
    shutil.rmtree(root)
    moved = load_matrix(copy / "matrix.yaml")
    folders = [
        (copy / d).resolve().relative_to(copy.resolve()) for d in moved.extension.include_dirs
    ]
    assert [f.as_posix() for f in folders] == ["csrc"]


def test_init_on_witwin_radar_guesses_the_module_and_says_so(witwin: Path, tmp_path: Path) -> None:
    root = copy_of(witwin, tmp_path)
    run = wheelforge("init", root, "--archs", "9.0", cwd=tmp_path)
    assert run.code == 0, run.err
    text = " ".join(run.err.split())
    assert "extension.name 'witwin.radar.cuda._radar_native' is guessed" in text
    written = load_matrix(root / "matrix.yaml")
    assert written.abi == "stable"
    assert written.package.name == "witwin-radar"  # from its pyproject.toml
    assert sorted(s.pattern for s in written.extension.sources) == [
        "witwin/radar/cuda/*.cpp",
        "witwin/radar/cuda/*.cu",
    ]


# In CI's network step: one stable-ABI build of a real project (about 3 minutes here).
def test_witwin_radar_builds_on_the_stable_abi_and_passes_under_two_torches(
    witwin: Path, tmp_path: Path
) -> None:
    root = with_matrix(WITWIN, copy_of(witwin, tmp_path))
    build = wheelforge("build", cwd=root)
    assert build.code == 0, build.err
    assert "import check: import witwin ok" in build.out
    assert "; import witwin.radar.cuda.prebuilt._radar_native ok" in build.out
    [wheel] = (root / "dist").glob("witwin_radar-0.4.1-cp310-abi3-manylinux_*.whl")
    assert wheelforge("check", wheel, cwd=root).code == 0
    test = wheelforge("test", "--torch", "2.13.0", "--torch", "2.14.1", "--json", cwd=root)
    runs = json.loads(test.out)["runs"]
    assert [(r["status"], r["passed"]) for r in runs] == [("passed", 3), ("passed", 3)], test.err


@pytest.mark.sweep
def test_causal_conv1d_builds_on_the_unstable_abi_one_wheel_per_torch(
    causal: Path, tmp_path: Path
) -> None:
    root = with_matrix(CAUSAL, copy_of(causal, tmp_path))
    build = wheelforge("build", cwd=root)
    assert build.code == 0, build.err
    assert build.out.count("import check: import causal_conv1d ok under torch") == 2
    assert build.out.count("; import causal_conv1d_cuda ok under torch") == 2
    wheels = sorted(p.name for p in (root / "dist").glob("*.whl"))
    assert len(wheels) == 2 and all(f"-cp3{sys.version_info[1]}-" in w for w in wheels), wheels
    test = wheelforge("test", "--json", cwd=root)
    assert test.code == 0, test.err
    runs = json.loads(test.out)["runs"]
    # Each wheel is pinned to its torch (torch==2.11.*): it runs under that one, and the other
    # torch's cell says the wheel can't be installed there.
    assert sorted(
        (r["torch"].split("+")[0], r["variant"].rsplit("-", 1)[-1], r["status"], r["passed"])
        for r in runs
    ) == [
        ("2.11.0", "torch211", "passed", 3),
        ("2.11.0", "torch212", "unavailable", 0),
        ("2.12.0", "torch211", "unavailable", 0),
        ("2.12.0", "torch212", "passed", 3),
    ], test.out
    assert sorted(r["detail"] for r in runs if r["status"] == "unavailable") == [
        "the wheel needs torch==2.11.*",
        "the wheel needs torch==2.12.*",
    ]
