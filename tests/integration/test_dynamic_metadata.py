"""The metadata of a wheelforge wheel against the METADATA setuptools itself writes for the same
project (setuptools' prepare_metadata_for_build_wheel, run in a child): setup.cfg's [metadata]
and [options] with extras_require, and pyproject.toml [project] fields listed as dynamic and
given by [tool.setuptools.dynamic] or setuptools-scm (git tags). Compared field by field, the
headers wheelforge writes from the matrix itself (Requires-Python's default, Metadata-Version)
aside."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.integration.helpers import metadata_differences, setuptools_metadata, wheelforge
from wheelforge.configuration.matrix.load import load_matrix
from wheelforge.packaging.wheel import core_metadata

MATRIX = """\
extension:
  name: demo._C
  sources: [csrc/*.cu]
torch: ">=2.10"
arch-sets:
  default: "8.0"
"""


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    (root / "csrc").mkdir(exist_ok=True)
    (root / "csrc" / "k.cu").write_text("// kernel\n")
    return root


def _setuptools_metadata(root: Path, tmp: Path) -> str:
    return setuptools_metadata(root, tmp / "md", _with_cuda_home())


def _with_cuda_home() -> dict[str, str]:
    """torch's CUDAExtension() needs a CUDA build of torch even when nothing is compiled: the
    fixtures' setup.py leave their extension out under NO_EXT (METADATA does not depend on it)."""
    return {"NO_EXT": "1"}


def _ours(root: Path, matrix: str = MATRIX) -> str:
    (root / "matrix.yaml").write_text(matrix)
    package = load_matrix(root / "matrix.yaml").package
    return core_metadata(package, ">=3.10", version=package.version, torch_requirement=None)


def _same(theirs: str, ours: str) -> None:
    assert metadata_differences(theirs, ours) == {
        "ours only": [],
        "theirs only": [],
        "body differs": False,
    }


SETUP_CFG = {
    "setup.py": "from setuptools import setup\nsetup()\n",
    "README.md": "# Demo\n\nA long description.\n",
    "src/demo/__init__.py": '__version__ = "1.4.2"\n',
    "setup.cfg": """\
        [metadata]
        name = demo-cfg
        version = attr: demo.__version__
        description = A demo from setup.cfg
        long_description = file: README.md
        long_description_content_type = text/markdown
        license = BSD-3-Clause
        author = Jane Roe
        author_email = jane@example.org
        url = https://example.org/demo
        project_urls =
            Source = https://example.org/src
        classifiers =
            Programming Language :: Python :: 3
            Environment :: GPU :: NVIDIA CUDA
        keywords = cuda, kernels

        [options]
        package_dir =
            = src
        packages = find:
        python_requires = >=3.10
        install_requires =
            numpy>=1.24
            packaging; python_version < "3.12"

        [options.packages.find]
        where = src

        [options.extras_require]
        test =
            pytest>=8
        docs = sphinx
        """,
}


def test_setup_cfg_metadata_and_extras_as_setuptools_writes_them(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p", SETUP_CFG)
    theirs = _setuptools_metadata(root, tmp_path)
    ours = _ours(root, MATRIX + "package:\n  packages: [src/demo]\n")
    _same(theirs, ours)
    assert "Provides-Extra: test" in ours and 'pytest>=8; extra == "test"' in ours


DYNAMIC = {
    "setup.py": "from setuptools import setup\nsetup()\n",
    "README.rst": "Demo\n====\n\nLong text.\n",
    "requirements.txt": "numpy>=1.24  # arrays\n# a comment\nsafetensors\n",
    "requirements-test.txt": "pytest>=8\n",
    "VERSION": "0.21.5\n",
    "src/demo/__init__.py": "",
    "pyproject.toml": """\
        [project]
        name = "demo-dyn"
        description = "dynamic fields"
        requires-python = ">=3.10"
        dynamic = ["version", "dependencies", "optional-dependencies", "readme", "classifiers"]

        [build-system]
        requires = ["setuptools>=64"]
        build-backend = "setuptools.build_meta"

        [tool.setuptools.dynamic]
        version = {file = "VERSION"}
        dependencies = {file = ["requirements.txt"]}
        optional-dependencies = {test = {file = ["requirements-test.txt"]}}
        readme = {file = ["README.rst"], content-type = "text/x-rst"}
        classifiers = {file = "classifiers.txt"}

        [tool.setuptools.packages.find]
        where = ["src"]
        """,
    "classifiers.txt": "Programming Language :: Python :: 3\nOperating System :: POSIX :: Linux\n",
}


def test_dynamic_fields_from_tool_setuptools_dynamic(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p", DYNAMIC)
    theirs = _setuptools_metadata(root, tmp_path)
    ours = _ours(root, MATRIX + "package:\n  packages: [src/demo]\n")
    _same(theirs, ours)
    assert "Version: 0.21.5" in ours


def test_dynamic_version_from_an_attr(tmp_path: Path) -> None:
    files = dict(DYNAMIC)
    files["pyproject.toml"] = files["pyproject.toml"].replace(
        'version = {file = "VERSION"}', 'version = {attr = "demo.version.__version__"}'
    )
    files["src/demo/version.py"] = '__version__ = "2.3.0rc1"\n'
    root = _tree(tmp_path / "p", files)
    theirs = _setuptools_metadata(root, tmp_path)
    ours = _ours(root, MATRIX + "package:\n  packages: [src/demo]\n")
    _same(theirs, ours)
    assert "Version: 2.3.0rc1" in ours


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_dynamic_version_from_setuptools_scm_git_tags(tmp_path: Path) -> None:
    pytest.importorskip("setuptools_scm")
    files = dict(DYNAMIC)
    files["pyproject.toml"] = (
        files["pyproject.toml"]
        .replace('version = {file = "VERSION"}\n        ', "")
        .replace(
            'requires = ["setuptools>=64"]', 'requires = ["setuptools>=64", "setuptools-scm>=8"]'
        )
        + '\n        [tool.setuptools_scm]\n        fallback_version = "0.0.1"\n'
    )
    root = _tree(tmp_path / "p", files)
    git = [
        "git",
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.org",
        "-c",
        "commit.gpgsign=false",
    ]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "."], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "one"], cwd=root, check=True)
    subprocess.run([*git, "tag", "v3.1.0"], cwd=root, check=True)
    ours = _ours(root, MATRIX + "package:\n  packages: [src/demo]\n")
    assert "Version: 3.1.0" in ours
    theirs = _setuptools_metadata(root, tmp_path)
    if "Version: 3.1.0" in theirs:  # the build Python has setuptools-scm: compare all
        _same(theirs, ours)


SETUP_PY_ONLY = {
    "README.md": "# demo\n\nWhat setup() reads as long_description.\n",
    "demo/__init__.py": "",
    "csrc/ops.cu": "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n",
    "setup.py": """\
        import os

        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension

        setup(
            name="demo-extras",
            version="0.3.0",
            description="extras and a readme from setup()",
            long_description=open("README.md").read(),
            long_description_content_type="text/markdown",
            license="MIT",
            author="Jane Roe",
            author_email="jane@example.org",
            url="https://example.org/demo",
            download_url="https://example.org/demo/0.3.0.tar.gz",
            python_requires=">=3.10",
            packages=["demo"],
            install_requires=["numpy>=1.24", "torch>=2.10"],
            extras_require={
                "test": ["pytest>=8", "scipy; python_version < '3.13'"],
                "triton": ["triton>=3.0", "torch>=2.10"],
            },
            ext_modules=[] if os.environ.get("NO_EXT") else [CUDAExtension("demo._C", ["csrc/ops.cu"])],
            cmdclass={"build_ext": BuildExtension},
        )
        """,
}


def _without_torch(text: str) -> str:
    """setuptools' METADATA with its torch requirements left out: wheelforge's matrix decides
    torch (a stable-ABI floor, or one pinned torch)."""
    return "\n".join(
        line
        for line in text.splitlines()
        if not (
            line.startswith("Requires-Dist: torch")
            and line[len("Requires-Dist: torch")] in "<>=;! "
        )
    )


def test_init_carries_setup_py_extras_and_readme_into_the_wheel(tmp_path: Path) -> None:
    root = _tree(tmp_path / "p", SETUP_PY_ONLY)
    run = wheelforge("init", "--archs", "8.0", "--torch", "2.13.0", cwd=root)
    assert run.code == 0, run.err + run.out
    written = (root / "matrix.yaml").read_text()
    assert "optional-dependencies:" in written and "readme: README.md" in written
    package = load_matrix(root / "matrix.yaml").package
    ours = core_metadata(package, ">=3.10", version=package.version, torch_requirement=None)
    theirs = _setuptools_metadata(root, tmp_path)
    _same(_without_torch(theirs), ours)


NATTEN_LIKE = {
    "src/natten_like/__init__.py": "",
    "src/natten_like/version.py": '__version__ = "0.21.5"\n',
    "csrc/ops.cu": "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n",
    "pyproject.toml": """\
        [project]
        name = "natten-like"
        description = "version computed by setup.py"
        dynamic = ["version"]
        requires-python = ">=3.10"

        [build-system]
        requires = ["setuptools >= 64", "torch"]
        build-backend = "setuptools.build_meta"

        [tool.setuptools.packages.find]
        where = ["src/"]
        """,
    "setup.py": """\
        import os

        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension


        def get_version():
            for line in open("src/natten_like/version.py"):
                if line.startswith("__version__"):
                    return line.split("=")[-1].strip().strip("'\\"")


        setup(
            version=get_version(),
            author="Ali Hassani",  # [project] has no authors: setuptools warns, and keeps it
            url="https://example.org/natten-like",  # no [project] field: setuptools keeps it
            ext_modules=[] if os.environ.get("NO_EXT") else [CUDAExtension("natten_like._C", ["csrc/ops.cu"])],
            cmdclass={"build_ext": BuildExtension},
        )
        """,
}


def test_a_version_setup_py_computes_reaches_init_and_build(tmp_path: Path) -> None:
    """NATTEN: [project] dynamic = ["version"], setup.py reads it from a file; init and the
    matrix check stopped on 'Field "project.version" missing'. Its setup(url=) is METADATA's
    Home-page beside [project] (NATTEN 0.21.7's wheel has it; init left it out)."""
    root = _tree(tmp_path / "p", NATTEN_LIKE)
    run = wheelforge("init", "--archs", "8.0", "--torch", "2.13.0", cwd=root)
    assert run.code == 0, run.err + run.out
    package = load_matrix(root / "matrix.yaml").package
    assert package.version == "0.21.5"
    assert package.home_page == "https://example.org/natten-like"
    assert package.authors == ("Ali Hassani",)
    ours = core_metadata(package, ">=3.10", version=package.version, torch_requirement=None)
    _same(_setuptools_metadata(root, tmp_path), ours)


SETUP_PY_AND_CFG = {
    "README.md": "# sparse-like\n\nsetup.cfg names this file.\n",
    "sparse_like/__init__.py": "",
    "csrc/ops.cu": "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n",
    "setup.cfg": """\
        [metadata]
        long_description = file: README.md
        long_description_content_type = text/markdown
        classifiers =
            Development Status :: 5 - Production/Stable
            Programming Language :: Python :: 3 :: Only

        [aliases]
        test = pytest
        """,
    "setup.py": """\
        import os

        from setuptools import find_packages, setup
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension

        setup(
            name="sparse_like",
            version="0.6.18",
            description="setup() and setup.cfg together, as pytorch_sparse has them",
            keywords=["pytorch", "sparse"],
            python_requires=">=3.10",
            install_requires=["scipy"],
            extras_require={"test": ["pytest", "pytest-cov"]},
            packages=find_packages(),
            ext_modules=[] if os.environ.get("NO_EXT") else [CUDAExtension("sparse_like._C", ["csrc/ops.cu"])],
            cmdclass={"build_ext": BuildExtension},
        )
        """,
}


def test_setup_cfg_metadata_of_a_setup_py_project_reaches_the_wheel(tmp_path: Path) -> None:
    """pytorch_sparse: setup() gives name, version and extras; setup.cfg [metadata] (without a
    name) the classifiers and the readme, which setuptools merges in."""
    root = _tree(tmp_path / "p", SETUP_PY_AND_CFG)
    run = wheelforge("init", "--archs", "8.0", "--torch", "2.13.0", cwd=root)
    assert run.code == 0, run.err + run.out
    package = load_matrix(root / "matrix.yaml").package
    ours = core_metadata(package, ">=3.10", version=package.version, torch_requirement=None)
    _same(_setuptools_metadata(root, tmp_path), ours)
    assert "Classifier: Development Status :: 5 - Production/Stable" in ours


VLLM_LIKE = {
    "vllm_like/__init__.py": "",
    "requirements/common.txt": "numpy>=1.24\nregex  # tokenizers\n",
    "csrc/ops.cu": "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n",
    # An sdist: setuptools-scm reads the version from PKG-INFO where there is no git.
    "PKG-INFO": "Metadata-Version: 2.4\nName: vllm-like\nVersion: 0.34.0\n",
    "pyproject.toml": """\
        [build-system]
        requires = ["setuptools>=77", "setuptools-scm>=8", "torch"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "vllm-like"
        authors = [{name = "The Team"}]
        description = "version from setuptools-scm, requirements and extras from setup.py"
        requires-python = ">=3.10"
        dynamic = ["version", "dependencies", "optional-dependencies"]

        [project.urls]
        Homepage = "https://example.org/vllm-like"

        [tool.setuptools_scm]

        [tool.setuptools.packages.find]
        include = ["vllm_like*"]
        """,
    "setup.py": """\
        import os

        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension

        setup(
            install_requires=open("requirements/common.txt").read().splitlines(),
            extras_require={"bench": ["pandas", "datasets"], "audio": ["librosa"]},
            ext_modules=[] if os.environ.get("NO_EXT") else [CUDAExtension("vllm_like._C", ["csrc/ops.cu"])],
            cmdclass={"build_ext": BuildExtension},
        )
        """,
}


def test_dependencies_and_extras_setup_py_gives_beside_a_static_project(tmp_path: Path) -> None:
    """vLLM 0.34.0: [project] lists dependencies and optional-dependencies as dynamic and
    setup.py gives them; the version is setuptools-scm's. init wrote no package section (the
    version being known), and the wheel had no Requires-Dist and no extras."""
    pytest.importorskip("setuptools_scm")
    root = _tree(tmp_path / "p", VLLM_LIKE)
    run = wheelforge("init", "--archs", "8.0", "--torch", "2.13.0", cwd=root)
    assert run.code == 0, run.err + run.out
    package = load_matrix(root / "matrix.yaml").package
    assert package.version == "0.34.0"
    assert package.optional_dependencies == (
        ("bench", ("pandas", "datasets")),
        ("audio", ("librosa",)),
    )
    ours = core_metadata(package, ">=3.10", version=package.version, torch_requirement=None)
    _same(_setuptools_metadata(root, tmp_path), ours)
    assert "Requires-Dist: regex" in ours


def _vllm_suffixed(files: dict[str, str]) -> dict[str, str]:
    """vLLM 0.34.0's setup.py: setup(version=get_vllm_version()), setuptools-scm's version with
    a +cu130 suffix (unless VLLM_SKIP_VERSION_SUFFIX=1), beside [tool.setuptools_scm]."""
    setup = files["setup.py"].replace(
        "        setup(\n",
        "        from setuptools_scm import get_version\n\n"
        "        def get_vllm_version():\n"
        "            version = get_version()\n"
        '            if not os.environ.get("VLLM_SKIP_VERSION_SUFFIX"):\n'
        '                version += "+cu130"\n'
        "            return version\n\n"
        "        setup(\n            version=get_vllm_version(),\n",
    )
    return {**files, "setup.py": setup}


def test_a_version_setup_py_passes_comes_before_setuptools_scm(tmp_path: Path) -> None:
    """vLLM 0.34.0: setup(version=...) beside [tool.setuptools_scm]. setuptools-scm sets the
    version only where setup() gives none, so setuptools' wheel is 0.34.0+cu130; wheelforge took
    setuptools-scm's 0.34.0. init now writes setup()'s, and the matrix takes it."""
    pytest.importorskip("setuptools_scm")
    root = _tree(tmp_path / "p", _vllm_suffixed(VLLM_LIKE))
    run = wheelforge("init", "--archs", "8.0", "--torch", "2.13.0", cwd=root)
    assert run.code == 0, run.err + run.out
    package = load_matrix(root / "matrix.yaml").package
    assert package.version == "0.34.0+cu130"
    ours = core_metadata(package, ">=3.10", version=package.version, torch_requirement=None)
    theirs = _setuptools_metadata(root, tmp_path)
    assert "Version: 0.34.0+cu130" in theirs
    _same(theirs, ours)


SCM_AND_SETUP_CFG = {
    "demo/__init__.py": '__version__ = "7.0"\n',
    "PKG-INFO": "Metadata-Version: 2.4\nName: demo-scm\nVersion: 5.0\n",
    "setup.py": "from setuptools import setup\nsetup()\n",
    "pyproject.toml": """\
        [build-system]
        requires = ["setuptools>=77", "setuptools-scm>=8"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "demo-scm"
        requires-python = ">=3.10"
        dynamic = ["version"]

        [tool.setuptools_scm]

        [tool.setuptools]
        packages = ["demo"]
        """,
}


@pytest.mark.parametrize(
    ("cfg", "version"),
    [
        ("[metadata]\nversion = 3.0\n", "3.0"),  # setuptools-scm reads it and sets none
        ("[metadata]\nversion = attr: demo.__version__\n", "5.0"),  # scm's, set first
        ("[metadata]\nname = demo-scm\n", "5.0"),
    ],
)
def test_setup_cfg_version_beside_setuptools_scm(tmp_path: Path, cfg: str, version: str) -> None:
    """setuptools-scm sets the version only where setup.cfg [metadata] gives none (an attr: one
    counting as none), as setuptools' own metadata hook shows."""
    pytest.importorskip("setuptools_scm")
    root = _tree(tmp_path / "p", {**SCM_AND_SETUP_CFG, "setup.cfg": cfg})
    ours = _ours(root)
    theirs = _setuptools_metadata(root, tmp_path)
    assert f"Version: {version}\n" in theirs
    _same(theirs, ours)


MAINTAINED = {
    "maintained/__init__.py": "",
    "csrc/ops.cu": "#include <torch/extension.h>\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}\n",
    "setup.py": """\
        import os

        from setuptools import setup
        from torch.utils.cpp_extension import BuildExtension, CUDAExtension

        setup(
            name="maintained",
            version="1.2.0",
            author="Jane Roe",
            author_email="jane@example.org",
            maintainer="Jane Roe",  # equal to the author: setuptools writes both all the same
            maintainer_email="team@example.org",
            packages=["maintained"],
            python_requires=">=3.10",
            ext_modules=[] if os.environ.get("NO_EXT") else [CUDAExtension("maintained._C", ["csrc/ops.cu"])],
            cmdclass={"build_ext": BuildExtension},
        )
        """,
}


def test_setup_py_maintainer_reaches_the_wheel(tmp_path: Path) -> None:
    """setup(maintainer=, maintainer_email=): METADATA's Maintainer and Maintainer-email, which
    init left out."""
    root = _tree(tmp_path / "p", MAINTAINED)
    run = wheelforge("init", "--archs", "8.0", "--torch", "2.13.0", cwd=root)
    assert run.code == 0, run.err + run.out
    package = load_matrix(root / "matrix.yaml").package
    assert package.maintainers == ("Jane Roe", "team@example.org")
    ours = core_metadata(package, ">=3.10", version=package.version, torch_requirement=None)
    theirs = _setuptools_metadata(root, tmp_path)
    assert "Maintainer: Jane Roe\n" in theirs and "Maintainer-email: team@example.org\n" in theirs
    _same(theirs, ours)
