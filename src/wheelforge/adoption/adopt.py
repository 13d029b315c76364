"""``wheelforge init``: a project's build captured through its front door (adoption/
doors/), with what this machine knows (the toolkit a build would use, the build Python and
its torch), written as matrix.yaml by the one writer.

Which front door: ``--from`` names one; else a kernel-builder ``build.toml``, else ``setup.py``
(run, or read with ``--no-run``), else a ``CMakeLists.txt``, else the sources. A setup.py that
builds its extensions with CMake (or builds none beside a CMakeLists.txt) hands over to the
CMake door, keeping its own metadata and packages; ``--from cmake`` beside a setup.py takes
setup.py's metadata (run in the sandbox as its door runs it: a version setup() computes)."""

from __future__ import annotations

import dataclasses
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from wheelforge.adoption.doors import buildtoml, cmake, packagedata, setupcapture, sourcescan
from wheelforge.adoption.doors.staticsetup import read_setup
from wheelforge.adoption.record.captured import CapturedBuild
from wheelforge.adoption.writer import files
from wheelforge.adoption.writer.matrixfile import InitChoices, InitResult, abi_of, render
from wheelforge.configuration.archs import parse_arch_list
from wheelforge.foundation import fence, log, readers
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem, ToolError
from wheelforge.toolchain import torchprobe
from wheelforge.toolchain.toolkits import Toolkit, discover

Door = Literal["setup.py", "cmake", "build.toml", "sources"]
DOORS: tuple[Door, ...] = ("setup.py", "cmake", "build.toml", "sources")


@dataclass(frozen=True, kw_only=True)
class InitRequest:
    root: Path
    force: bool = False
    torch: tuple[str, ...] = ()
    archs: str | None = None
    run: bool = True  # False: --no-run (setup.py read, never run)
    door: Door | None = None  # --from
    python: Path  # the build Python (--python)
    cmake_args: tuple[str, ...] = ()  # --cmake-arg
    cache: Path | None = None  # the user cache (probes, provisioned toolkits)
    sandbox: fence.Choice = "auto"  # --sandbox: what fences the project's code init runs


def choose_door(root: Path) -> Door:
    if buildtoml.is_kernel_builder(root / "build.toml"):
        return "build.toml"
    if os.path.lexists(root / "setup.py"):  # a FIFO or a device there is refused by name
        return "setup.py"
    if (root / "CMakeLists.txt").is_file():
        return "cmake"
    return "sources"


def _toolkit(env: Mapping[str, str], cache: Path | None) -> Toolkit | None:
    try:
        found = discover(env, cache=cache)
    except ConfigError:
        return None
    return found[0] if found else None


def _build_torch(request: InitRequest, build: CapturedBuild) -> str | None:
    """The build Python's torch: as setup.py saw it, else asked when the matrix needs it (an
    unstable-ABI build without --torch)."""
    unstable = any(abi_of(build.root, e).per_torch for e in build.extensions)
    if build.torch_seen or request.torch or not unstable:
        return build.torch_seen
    try:
        return str(torchprobe.probe_torch(request.python, cache=request.cache).version)
    except (EnvironmentProblem, ToolError):
        return None


def capture(request: InitRequest, door: Door, env: Mapping[str, str]) -> CapturedBuild:
    root = request.root
    if door == "build.toml":
        return buildtoml.read_build_toml(root)
    if door == "sources":
        build = sourcescan.guess_extension(root)
        if build is None:
            raise ConfigError(
                f"{root}: found no setup.py, CMakeLists.txt or build.toml, and no source that registers "
                "ops (STABLE_TORCH_LIBRARY, PYBIND11_MODULE); write matrix.yaml from docs/your-extension.md"
            )
        return build
    if door == "setup.py" and not os.path.lexists(root / "setup.py"):
        raise ConfigError(f"{root}: --from setup.py, but there is no setup.py")
    if door == "setup.py":  # what setup.py is, before anything reads or runs it
        readers.read_bytes(root / "setup.py", cap=readers.CONFIG_CAP)
    if door == "setup.py" and not request.run:
        return read_setup(root)
    if door == "setup.py":
        setupcapture.check_parses(root)  # before the sandbox is asked for: no process at all
    # The sandbox chosen (or refused with its fix) before any of the project's code runs.
    kind = fence.choose(request.sandbox, what=f"the project's code ({root})")
    if kind is None:
        log.warning(f"--sandbox off: the project's code runs {fence.describe(kind)}")
    toolkit = _toolkit(env, request.cache)
    cmake_context = cmake.CMakeContext(
        python=request.python,
        nvcc=toolkit.nvcc if toolkit else None,
        archs=request.archs or env.get("TORCH_CUDA_ARCH_LIST"),
        args=_with_cuda_architectures(
            (*shlex.split(env.get("CMAKE_ARGS", "")), *request.cmake_args), request.archs
        ),
        sandbox=request.sandbox,
    )
    added = {}
    if request.archs and not env.get("TORCH_CUDA_ARCH_LIST"):
        added["TORCH_CUDA_ARCH_LIST"] = request.archs  # what torch would compile for
    if toolkit is not None and not env.get("CUDA_HOME"):
        added["CUDA_HOME"] = str(toolkit.root)
    context = setupcapture.CaptureContext(
        python=request.python,
        cuda_home=toolkit.root if toolkit else None,
        cuda_version=toolkit.release if toolkit else None,
        torch_version=request.torch[0] if request.torch else "2.10.0",
        env=tuple(added.items()),
        sandbox=request.sandbox,
    )
    if door == "cmake":
        log.info(
            f"configuring {root / 'CMakeLists.txt'} (configure only: the project's CMake code "
            f"runs {fence.describe(kind)}, nothing is built or downloaded)"
        )
        built = _with_package_data(cmake.capture_cmake(root, cmake_context))
        if not os.path.lexists(root / "setup.py"):
            return built
        return _with_setup_metadata(built, context, fenced=fence.describe(kind))
    log.info(
        f"running {root / 'setup.py'} with {request.python} to capture its build: this runs the "
        f"project's own code {fence.describe(kind)}, no compiler started; 'wheelforge init "
        "--no-run' reads it without running it"
    )
    build = setupcapture.capture_setup(root, context)
    if not build.extensions and (root / "CMakeLists.txt").is_file():
        # setup() gets no extension and CMake builds the library beside it (bitsandbytes:
        # scikit-build-core's setuptools plugin, cmake_source_dir="."): the CMake door.
        log.info(
            f"setup.py builds no extension and {root / 'CMakeLists.txt'} is there: configuring "
            "it (configure only)"
        )
        return _with_cmake(build, cmake.capture_cmake(root, cmake_context))
    if not build.extensions or any(e.sources for e in build.extensions):
        return build
    modules = {str(e.name).rsplit(".", 1)[-1]: str(e.name) for e in build.extensions if e.name}
    # setup.py's build_ext configures CMake in a folder of its own (NATTEN's csrc/, after
    # its autogen scripts ran in the capture's sandbox): that folder, with its -D arguments.
    configure = cmake.setup_configure(root, build.refusals)
    if configure is not None:
        lists = configure.folder / "CMakeLists.txt"
        log.info(
            f"setup.py's build_ext ({configure.where}) configures {lists}: configuring it "
            f"(configure only) with its arguments {' '.join(configure.args)}"
        )
        given = dataclasses.replace(cmake_context, args=(*configure.args, *cmake_context.args))
        built = cmake.capture_cmake(root, given, modules=modules, folder=configure.folder)
        return _with_cmake(build, built)
    if (root / "CMakeLists.txt").is_file():
        log.info(
            f"setup.py hands its extensions to CMake: configuring {root / 'CMakeLists.txt'} "
            "(configure only)"
        )
        return _with_cmake(build, cmake.capture_cmake(root, cmake_context, modules=modules))
    return build


def _with_cuda_architectures(args: tuple[str, ...], archs: str | None) -> tuple[str, ...]:
    """--archs as CMAKE_CUDA_ARCHITECTURES too (torch's CMake files read TORCH_CUDA_ARCH_LIST,
    a project's own CUDA targets this): ``80-real`` for SASS, ``90`` for SASS and PTX
    (CMake's CUDA_ARCHITECTURES); one the user gives with --cmake-arg stays."""
    if not archs or any(a.startswith("-DCMAKE_CUDA_ARCHITECTURES") for a in args):
        return args
    specs = parse_arch_list(archs, source="--archs")
    value = ";".join(str(s.arch).replace(".", "") + ("" if s.ptx else "-real") for s in specs)
    return (*args, f"-DCMAKE_CUDA_ARCHITECTURES={value}")


def _with_package_data(build: CapturedBuild) -> CapturedBuild:
    """The CMake door's build with the package data pyproject.toml's ``[tool.setuptools]``
    ships from the extensions' packages (bitsandbytes' py.typed), as its own wheel has it."""
    tops = {e.name.split(".", 1)[0] for e in build.extensions if e.name and "." in e.name}
    globs = packagedata.pyproject_package_data(build.root, sorted(tops))
    if not globs:
        return build
    done = f"package-data: {', '.join(globs)}, as pyproject.toml [tool.setuptools] package-data ships them"
    return dataclasses.replace(build, package_data=globs, done=(*build.done, done))


def _with_setup_metadata(
    built: CapturedBuild, context: setupcapture.CaptureContext, *, fenced: str
) -> CapturedBuild:
    """The CMake door's build with setup.py's metadata (a version setup() computes, its
    install_requires), setup.py run in the sandbox as its own door runs it; CMake's extensions
    stay. A setup.py that cannot be run leaves the metadata to pyproject.toml, and says so."""
    root = built.root
    log.info(
        f"running {root / 'setup.py'} with {context.python} for its metadata (version, "
        f"install_requires): the project's own code runs {fenced}"
    )
    try:
        setupcapture.check_parses(root)
        setup = setupcapture.capture_setup(root, context)
    except (ConfigError, ToolError, EnvironmentProblem) as exc:
        note = (
            f"setup.py: not run for its metadata ({exc.message}); pyproject.toml's, if any, is used"
        )
        return dataclasses.replace(built, hand=(*built.hand, note))
    done = "package: the metadata setup.py's setup() gives (version, install_requires, ...)"
    return dataclasses.replace(
        built, metadata=setup.metadata, done=(*built.done, done), torch_seen=setup.torch_seen
    )


def _with_cmake(setup: CapturedBuild, built: CapturedBuild) -> CapturedBuild:
    """setup.py's metadata and packages, CMake's extensions (vLLM, fast_rnnt)."""
    return dataclasses.replace(
        setup,
        front_door="setup.py + CMake",
        extensions=built.extensions,
        refusals=setup.refusals + built.refusals,
        hand=setup.hand + built.hand,
        done=setup.done + built.done,
    )


def init_project(request: InitRequest, env: Mapping[str, str] | None = None) -> InitResult:
    """Capture, render and write: matrix.yaml (never replaced without --force) and the files
    the project's build system would have generated."""
    env = os.environ if env is None else env
    door = request.door or choose_door(request.root)
    if door == "setup.py" and not request.run:
        log.info(f"reading {request.root / 'setup.py'} without running it (--no-run)")
    target = request.root / "matrix.yaml"
    if target.exists() and not request.force:
        raise ConfigError(f"{target} exists; pass --force to replace it")
    build = capture(request, door, env)
    choices = InitChoices(
        torch=request.torch,
        archs=request.archs,
        env_archs=env.get("TORCH_CUDA_ARCH_LIST"),
        build_torch=_build_torch(request, build),
    )
    result = render(build, choices)
    files.write(result, request.root, force=request.force)
    return result
