"""init on a build Python without torch: setup.py sees wheelforge's stand-in torch
(capture_standin.py) and must get what an installed torch gives it.

- A probe setup.py built here asks what real ones ask (exllamav2's ``find_spec("torch")``,
  flash-attention's and causal-conv1d's version parsing and C++ ABI, xformers'
  ``parallel_info``, ``importlib.metadata.version("torch")``, ``torch.__file__``): init writes
  the same matrix under a Python without torch as under this one, which has torch 2.13.0; a
  name the stand-in lacks is one line naming setup.py's line and the name, exit code 5.
- exllamav2 (network): its real sources, init'd under a Python without torch ("torch.__spec__
  is None" before), and the files the wheel wheelforge plans to pack carries of the project are the
  released wheel's, name for name and byte for byte. PyPI has exllamav2 sdists only up to
  0.0.4 (2023, no hadamard/); 0.2.7 (hadamard/*.txt, MANIFEST.in's recursive-include) is the
  GitHub tarball of its tag, commit ae241a9, compared with the 0.2.7 wheel on PyPI.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tarfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest
import yaml

from tests.integration.helpers import wheelforge
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.planning import selection


def torchless_python(folder: Path) -> Path:
    """A venv without pip and without torch whose setuptools and packaging are this one's
    (linked, nothing downloaded): a build Python as a fresh CI image has it."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", folder], check=True)
    python = folder / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    ours = Path(sysconfig.get_paths()["purelib"])
    for pattern in ("setuptools", "setuptools-*", "_distutils_hack", "distutils-precedence.pth",
                    "packaging", "packaging-*"):  # fmt: skip
        for item in ours.glob(pattern):
            (site / item.name).symlink_to(item)
    probe = "import importlib.util as u, setuptools; assert u.find_spec('torch') is None"
    subprocess.run([python, "-c", probe], check=True)
    return python


PROBE_SETUP = """\
import importlib.metadata, importlib.util, os
from setuptools import setup

# exllamav2: the walrus binds the comparison
if torch := importlib.util.find_spec("torch") is not None:
    from torch.utils import cpp_extension
    from torch import version as torch_version
import torch
from packaging.version import parse
from torch.utils.cpp_extension import CUDA_HOME, BuildExtension, CUDAExtension

# flash-attention, causal-conv1d, fast-hadamard-transform
raw = parse(torch.__version__)
cuda = parse(torch.version.cuda)
assert torch.__version__ >= (2, 4) and torch.__version__ >= "2.4"
abi = str(int(torch._C._GLIBCXX_USE_CXX11_ABI))
# xformers
assert "parallel" in torch.__config__.parallel_info()
assert not torch.cuda.is_available() and torch_version.hip is None
# the distribution agrees with the module
assert importlib.metadata.version("torch").split("+")[0] == torch.__version__.split("+")[0]
assert os.path.isdir(os.path.dirname(torch.__file__))
flags = [f"-D_GLIBCXX_USE_CXX11_ABI={abi}", f"-DPROBE_TORCH={raw.major}{raw.minor}",
         f"-DPROBE_CUDA={cuda.major}"]

mode = os.environ.get("PROBE")
if mode == "attribute":
    torch.cuda.nccl_version()
elif mode == "module":
    import torch.nn
elif mode == "helper":
    from torch.utils.cpp_extension import load

setup(
    name="probe",
    version="1.0",
    packages=["probe"],
    package_data={"probe": ["*.txt"]},
    ext_modules=[CUDAExtension("probe._C", ["csrc/k.cu"], extra_compile_args={"cxx": flags, "nvcc": flags})],
    cmdclass={"build_ext": BuildExtension},
)
"""


def _probe(root: Path) -> Path:
    for name, text in {"setup.py": PROBE_SETUP, "csrc/k.cu": "// k\n", "probe/__init__.py": "",
                       "probe/table.txt": "1 2\n"}.items():  # fmt: skip
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _init(root: Path, python: Path, *more: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return wheelforge("init", "--python", python, "--archs", "9.0", "--torch", "2.13.0",
                      *more, root, cwd=root, env=env)  # fmt: skip


def test_setup_py_sees_what_an_installed_torch_gives_and_init_writes_the_same_matrix(
    tmp_path: Path,
) -> None:
    bare = torchless_python(tmp_path / "bare")
    without = _init(_probe(tmp_path / "without"), bare)
    assert without.code == 0, without.err
    assert "setup.py saw wheelforge's stand-in torch" in without.err
    withtorch = _init(_probe(tmp_path / "with"), Path(sys.executable))
    assert withtorch.code == 0, withtorch.err
    ours, theirs = (
        yaml.safe_load((tmp_path / d / "matrix.yaml").read_text()) for d in ("without", "with")
    )
    assert ours == theirs
    # What setup.py computed from torch's answers (the ABI macro is torch's own: init leaves it
    # out); the stand-in reports the torch --torch names.
    assert ours["extension"]["cxx-flags"] == ["-DPROBE_TORCH=213", "-DPROBE_CUDA=13"]
    assert ours["package"]["package-data"] == ["table.txt"]  # the files setuptools ships
    # The packing plan: what the wheel carries of the project, beside the built probe._C.
    assert _planned_members(tmp_path / "without") == {"probe/__init__.py", "probe/table.txt"}


@pytest.mark.parametrize(
    ("mode", "line", "asked"),
    [
        ("attribute", 28, "torch.cuda.nccl_version"),
        ("module", 30, "the module torch.nn"),
        ("helper", 32, "torch.utils.cpp_extension.load"),
    ],
)
def test_a_name_the_stand_in_lacks_is_one_line_naming_setup_py_and_the_name(
    tmp_path: Path, mode: str, line: int, asked: str
) -> None:
    bare = torchless_python(tmp_path / "bare")
    root = _probe(tmp_path / "p")
    run = _init(root, bare, env={"PROBE": mode})
    assert run.code == 5, run.err
    errors = [ln for ln in run.err.splitlines() if ln.startswith("error:")]
    assert errors == [
        f"error: {root / 'setup.py'} line {line} asks for {asked}, which wheelforge init's "
        f"stand-in torch lacks ({bare} has no torch); install torch there or pass --python with "
        "a Python that has it, or read setup.py without running it: 'wheelforge init --no-run'"
    ]
    assert 'File "' not in run.err and not (root / "matrix.yaml").exists()


# -- exllamav2, for real (network) ----------------------------------------------------------------

_PYPI = "https://pypi.org/pypi/exllamav2/json"
# The GitHub tarball of tag v0.2.7 (commit ae241a9af586f0ebd6bb418aa0e2416b81bf4215): no sdist
# of it on PyPI. WHEELFORGE_EXLLAMAV2_0_2_7 may name a local copy of that tarball.
_TAG_TARBALL = "https://github.com/turboderp/exllamav2/archive/refs/tags/v0.2.7.tar.gz"


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            data: bytes = response.read()
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        pytest.skip(f"{url} can't be downloaded here (offline?): {exc}")
    return data


def _pypi_file(version: str, kind: str, dest: Path) -> Path:
    """exllamav2 *version*'s file of *kind* (sdist, bdist_wheel) from PyPI, its sha256 checked."""
    releases = json.loads(_get(_PYPI))["releases"]
    [entry] = [f for f in releases[version] if f["packagetype"] == kind]
    data = _get(entry["url"])
    assert hashlib.sha256(data).hexdigest() == entry["digests"]["sha256"]
    dest.mkdir(parents=True, exist_ok=True)
    (dest / entry["filename"]).write_bytes(data)
    return dest / entry["filename"]


def _sources(version: str, dest: Path) -> Path:
    if version == "0.2.7":
        local = os.environ.get("WHEELFORGE_EXLLAMAV2_0_2_7")
        tarball = dest / "v0.2.7.tar.gz"
        dest.mkdir(parents=True, exist_ok=True)
        tarball.write_bytes(Path(local).read_bytes() if local else _get(_TAG_TARBALL))
    else:
        tarball = _pypi_file(version, "sdist", dest)
    with tarfile.open(tarball) as tar:
        tar.extractall(dest / "src", filter="data")
    [root] = (dest / "src").iterdir()
    return root


def _planned_members(root: Path) -> set[str]:
    """The wheel's files of the project as the build plans them (planning/selection.py, the
    list the packer writes and `build --dry-run` shows for a planned variant): package
    modules, package data, license files under .dist-info/licenses/."""
    matrix = load_matrix(root / "matrix.yaml")
    files = selection.project_files(matrix)
    info = selection.dist_info(matrix.package, matrix.package.version)
    return {m.path for m in files.members} | {f"{info}/licenses/{n}" for n, _ in files.licenses}


@pytest.mark.network
@pytest.mark.parametrize("version", ["0.0.4", "0.2.7"])
def test_init_adopts_exllamav2_without_torch_and_packs_the_released_wheels_files(
    tmp_path: Path, version: str
) -> None:
    root = _sources(version, tmp_path / "get")
    released = _pypi_file(version, "bdist_wheel", tmp_path / "wheel")
    bare = torchless_python(tmp_path / "bare")
    run = _init(root, bare)
    assert run.code == 0, run.err
    assert f"wrote {root / 'matrix.yaml'}" in run.err
    assert "setup.py saw wheelforge's stand-in torch" in run.err
    written = yaml.safe_load((root / "matrix.yaml").read_text())
    assert written["extension"]["name"] == "exllamav2_ext"
    ours = _planned_members(root)
    with zipfile.ZipFile(released) as zf:
        # The released wheels are JIT builds: no binary; the license under .dist-info/ (older
        # setuptools) where PEP 639 puts it under .dist-info/licenses/.
        theirs = {n for n in zf.namelist() if ".dist-info/" not in n}
        assert ours - theirs == {f"exllamav2-{version}.dist-info/licenses/LICENSE"}
        assert f"exllamav2-{version}.dist-info/LICENSE" in zf.namelist()
        assert theirs <= ours
        different = [n for n in theirs if zf.read(n) != (root / n).read_bytes()]
    assert different == []
    if version == "0.2.7":
        hadamard = {n for n in ours if n.startswith("exllamav2/hadamard/") and n.endswith(".txt")}
        assert len(hadamard) == 12 and "exllamav2/hadamard/primes.txt" in hadamard
    # The build Python's own torch (2.13.0 here) gives the same matrix.
    again = _sources(version, tmp_path / "again")
    assert _init(again, Path(sys.executable)).code == 0
    assert yaml.safe_load((again / "matrix.yaml").read_text()) == written
