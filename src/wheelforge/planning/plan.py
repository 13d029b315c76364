"""Plan one variant: every path, flag and step decided up front, in an immutable object that
the ninja writer, the packer and the report read. Nothing here runs a tool."""

from __future__ import annotations

import functools
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.version import Version

from wheelforge.configuration.archs import ArchSet, ArchSpec
from wheelforge.configuration.matrix.model import Matrix
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem
from wheelforge.planning import reproducible
from wheelforge.planning.variants import Variant
from wheelforge.toolchain.torchprobe import TorchEnv

Rule = Literal["cxx", "cc", "nvcc"]
_RULES: dict[str, Rule] = {".cu": "nvcc", ".cpp": "cxx", ".cc": "cxx", ".cxx": "cxx", ".c": "cc"}


@dataclass(frozen=True, kw_only=True)
class CompileStep:
    source: Path
    object: Path
    rule: Rule
    arch_set: ArchSet | None = None  # for a source with arch limits: what it is compiled for
    gencode: str | None = None  # its own -gencode flags then; else the plan's (the arch set's)
    flags: str = ""  # per-source flags: the source's path-free name for seeds (reproducible.py)


@dataclass(frozen=True, kw_only=True)
class GeneratedFile:
    path: Path
    text: str


@dataclass(frozen=True, kw_only=True)
class VariantPlan:
    variant: Variant
    matrix: Matrix
    torch: TorchEnv
    build_dir: Path
    out_dir: Path
    cxx: str
    cc: str
    # Compiler launchers (ccache, sccache, distcc): words run in front of the compiler.
    cxx_launcher: tuple[str, ...]
    cc_launcher: tuple[str, ...]
    cuda_launcher: tuple[str, ...]
    nvcc_host: str  # the host compiler nvcc runs (-ccbin): one the toolkit accepts
    cxx_flags: str
    cc_flags: str
    nvcc_flags: str
    gencode: str  # the arch set's -gencode flags; a limited source has its own
    ldflags: str
    compile_steps: tuple[CompileStep, ...]
    left_out: tuple[Path, ...]  # limited sources with no arch in common with the arch set
    generated: tuple[GeneratedFile, ...]
    library: Path  # the linked extension module in the build dir
    export_map: Path  # the linker version script (export_map())
    wheel_library_path: str  # where it goes inside the wheel, e.g. pkg/_C.abi3.so
    abi_tag: str  # e.g. cp310-abi3
    version: str  # the wheel's version: the package's, plus the variant's local label if any
    torch_requirement: str  # stable: torch>=target; unstable: the torch it was built against
    # nvcc before CUDA 12.9: the fixed-pid library it runs with (reproducible.py); None: none
    nvcc_preload: Path | None = None
    # every folder the compiles read from, and its path-free name (reproducible.prefix_maps)
    input_folders: tuple[tuple[Path, str], ...] = ()
    nvcc_threads: int | None = None  # nvcc --threads, given through NVCC_APPEND_FLAGS (ninja.py)

    def command_path(self, path: Path) -> str:
        """*path* as the compile commands name it (reproducible.spelling): relative to the build
        folder (where ninja runs them) when it lies in the build folder, or in the project while
        the build folder does too; absolute for nvcc before CUDA 12.9, which runs from /."""
        return self._spelling(path)

    @functools.cached_property
    def _spelling(self) -> Callable[[Path], str]:
        root = self.matrix.root.resolve()
        return reproducible.spelling(self.build_dir, root, self.variant.toolkit.version)


def _sources(matrix: Matrix) -> dict[Path, tuple[ArchSpec, ...] | None]:
    """Every source and its arch limits; an entry with ``archs`` wins over a plain glob."""
    found: dict[Path, tuple[ArchSpec, ...] | None] = {}
    limited_by: dict[Path, str] = {}
    for spec in matrix.extension.sources:
        matches = sorted(p.resolve() for p in matrix.root.glob(spec.pattern) if p.is_file())
        if not matches:
            raise ConfigError(f"{matrix.path}: extension.sources: '{spec.pattern}' matches no file")
        for m in matches:
            if spec.archs is None:
                found.setdefault(m, None)
                continue
            if m in limited_by and limited_by[m] != spec.pattern:
                raise ConfigError(
                    f"{matrix.path}: extension.sources: {m.name} is limited by both '{limited_by[m]}' and "
                    f"'{spec.pattern}'; give each source one arch limit"
                )
            limited_by[m] = spec.pattern
            found[m] = spec.archs
    return found


def _object_name(source: Path, root: Path) -> str:
    """The source's path in the project (its object's name, and its seed name)."""
    try:
        rel = source.relative_to(root)
    except ValueError:
        rel = Path("_abs", *source.parts[1:])
    return rel.as_posix()


def _generated(
    matrix: Matrix,
    abi: AbiFlavour,
    variant: Variant,
    gen: Path,
    *,
    sources: dict[Path, tuple[ArchSpec, ...] | None],
    exports: GeneratedFile,
) -> tuple[list[GeneratedFile], Path | None]:
    """The generated files (the ABI's, the export map, the module init, which joins *sources*,
    and the fixed-pid library's source) and the library nvcc preloads, if any."""
    ext = matrix.extension
    generated = [*abi.generated, exports]
    if ext.module_init:
        init = GeneratedFile(path=gen / f"{ext.leaf}_module_init.c", text=module_init_source(ext.leaf))  # fmt: skip
        generated.append(init)
        sources[init.path] = None
    preload = None
    if reproducible.needs_fixed_pid(variant.toolkit.version):  # nvcc before CUDA 12.9
        preload = gen / reproducible.FIXED_PID_LIBRARY
        generated.append(GeneratedFile(path=preload.with_suffix(".c"), text=reproducible.FIXED_PID_SOURCE))  # fmt: skip
    return generated, preload


def module_init_source(module_leaf: str) -> str:
    """``PyInit_<leaf>`` returning an empty module, so ``import pkg._C`` loads the library and
    runs its STABLE_TORCH_LIBRARY registrations. Written for the limited API (abi3)."""
    return (
        "// Generated by wheelforge: makes the extension importable as a Python module.\n"
        "#include <Python.h>\n\n"
        f'static struct PyModuleDef wheelforge_module = {{PyModuleDef_HEAD_INIT, "{module_leaf}", '
        "NULL, -1, NULL, NULL, NULL, NULL, NULL};\n\n"
        f"PyMODINIT_FUNC PyInit_{module_leaf}(void) {{ return PyModule_Create(&wheelforge_module); }}\n"
    )


@dataclass(frozen=True, kw_only=True)
class AbiFlavour:
    """What the ABI decides about a build: how sources see torch and Python, what the link adds,
    and how the module and wheel are named and pinned."""

    defines: tuple[str, ...]
    includes: tuple[str, ...]
    force_include: tuple[str, ...]  # -include of the weak-shims header (stable only)
    generated: tuple[GeneratedFile, ...]
    extra_ldflags: tuple[str, ...]
    abi_tag: str  # cp310-abi3, or cp311-cp311
    module_suffix: str  # .abi3.so, or CPython's extension suffix
    torch_requirement: str


Rel = Callable[[Path], str]  # a path as the compile commands name it (command_path)


def _stable_abi(matrix: Matrix, torch: TorchEnv, weak: GeneratedFile, rel: Rel) -> AbiFlavour:
    """One binary for every torch from the target up: torch's stable headers hide what is newer
    than the target, Python's limited API keeps the abi3 tag true."""
    ext = matrix.extension
    return AbiFlavour(
        defines=(
            # The stable-ABI version this binary targets: major << 56 | minor << 48 (torch/csrc/stable/version.h).
            f"-DTORCH_TARGET_VERSION={matrix.torch.target_macro}",
            f"-DPy_LIMITED_API={matrix.limited_api_macro}",
            f"-DTORCH_EXTENSION_NAME={ext.leaf}",
        ),
        # Python's headers too: a source may include <Python.h> (Py_LIMITED_API still holds).
        includes=tuple(
            f"-I{rel(d)}" for d in (*ext.include_dirs, torch.include_dir, torch.python_include)
        ),
        force_include=("-include", rel(weak.path)),
        generated=(weak,),
        extra_ldflags=(),
        abi_tag=f"{matrix.python_abi}-abi3",
        module_suffix=".abi3.so",
        torch_requirement=matrix.torch.requirement,
    )


def _unstable_abi(matrix: Matrix, torch: TorchEnv, _weak: GeneratedFile, rel: Rel) -> AbiFlavour:
    """torch's full C++ API, as torch.utils.cpp_extension compiles it: every include folder,
    Python's headers (pybind11), the C++ ABI libtorch was built with; one torch, one CPython."""
    ext = matrix.extension
    cp = "cp" + torch.python_version.replace(".", "")
    return AbiFlavour(
        defines=(
            f"-DTORCH_EXTENSION_NAME={ext.leaf}",
            "-DTORCH_API_INCLUDE_EXTENSION_H",
            f"-D_GLIBCXX_USE_CXX11_ABI={torch.cxx11_abi}",
        ),
        includes=tuple(
            f"-I{rel(d)}" for d in (*ext.include_dirs, *torch.include_dirs, torch.python_include)
        ),
        force_include=(),
        generated=(),
        extra_ldflags=("-ltorch_python",),  # pybind11 bindings of torch's types
        abi_tag=f"{cp}-{cp}",  # the full Python C API: one CPython only
        module_suffix=torch.ext_suffix,
        torch_requirement=f"torch=={torch.version.major}.{torch.version.minor}.*",
    )


_ABI_FLAVOURS = {"stable": _stable_abi, "unstable": _unstable_abi}


def _compile_flags(
    abi: AbiFlavour, variant: Variant, matrix: Matrix, torch: TorchEnv, *, nvcc_host: str, rel: Rel,
    maps: tuple[str, ...],
) -> tuple[list[str], list[str], list[str]]:  # fmt: skip
    """The C++, C and nvcc flags (without -gencode: that is per compile step). Default
    visibility everywhere: what the module exports is decided at link time (export_map()). The
    prefix maps of *folders* keep them out of the binaries (reproducible.py)."""
    ext = matrix.extension
    # The variant's own toolkit headers (cuda_runtime.h) for C/C++ sources, as nvcc adds them
    # for .cu ones; after the matrix's and torch's folders.
    cuda_includes = [f"-I{d}" for d in variant.toolkit.include_dirs]
    cxx_flags = [
        "-std=c++17", "-O3", "-fPIC", *maps,
        *abi.defines, *abi.includes, *cuda_includes, *abi.force_include, *ext.cxx_flags,
    ]  # fmt: skip
    cc_flags = [
        "-O2",
        "-fPIC",
        *maps,
        *abi.defines,
        f"-I{rel(torch.python_include)}",
        *cuda_includes,
    ]
    nvcc_flags = [
        "-std=c++17", "-O3", f"-ccbin={nvcc_host}", *reproducible.NVCC_FLAGS,
        # nvcc passes these to the host compiler; -fPIC is required for a shared object.
        "-Xcompiler=-fPIC", *(f"-Xcompiler={m}" for m in maps),
        # The CUDA-only shim declarations (aoti_torch_get_current_cuda_stream, ...) sit behind USE_CUDA.
        "-DUSE_CUDA", *abi.defines, *abi.includes, *abi.force_include,
    ]  # fmt: skip
    nvcc_flags += list(ext.nvcc_flags)
    return cxx_flags, cc_flags, nvcc_flags


def _link_flags(
    abi: AbiFlavour, variant: Variant, matrix: Matrix, torch: TorchEnv, exports: Path
) -> list[str]:
    toolkit = variant.toolkit
    if toolkit.cudart_static is None:
        raise EnvironmentProblem(
            f"CUDA {toolkit.version} at {toolkit.root} has no libcudart_static.a; install the CUDA runtime "
            "development files (PyPI: nvidia-cuda-runtime) so the extension carries its own cudart"
        )
    ext = matrix.extension
    cuda_libs = (
        # as torch.utils.cpp_extension.CUDAExtension links them (classic extensions use c10::cuda)
        ["-lc10_cuda", "-ltorch_cuda"] if matrix.abi == "unstable" and torch.cuda else []
    )
    return [
        # cudart linked statically, and its symbols kept out of our dynamic symbol table.
        str(toolkit.cudart_static), "-ldl", "-lrt", "-lpthread", "-Wl,--exclude-libs,ALL",
        *(f"-L{d}" for d in torch.library_dirs),
        # Keep libtorch even though no symbol comes from it directly: on a CUDA torch it pulls in
        # libtorch_cuda, where the CUDA shims (the current stream, ...) are defined.
        "-Wl,--no-as-needed", "-lc10", "-ltorch", "-ltorch_cpu", "-Wl,--as-needed",
        *abi.extra_ldflags, *cuda_libs,
        f"-Wl,--version-script={exports}",
        *(f"-L{d}" for d in ext.library_dirs), *(f"-l{name}" for name in ext.libraries),
        *ext.link_flags,
    ]  # fmt: skip


def _compile_steps(
    sources: dict[Path, tuple[ArchSpec, ...] | None],
    variant: Variant,
    matrix: Matrix,
    build_dir: Path,
    gen: Path,
) -> tuple[list[CompileStep], list[Path]]:
    """One step per source, with the -gencode flags it compiles with (the one place they are
    decided); a limited source with no arch in common with the arch set is left out."""
    steps = []
    left_out = []
    for source, limits in sources.items():
        rule = _RULES[source.suffix]
        obj_root = gen if source.is_relative_to(gen) else matrix.root
        limited = variant.arch_set.limit(limits) if limits is not None and rule == "nvcc" else None
        if limited is not None and not limited.specs:
            left_out.append(source)
            continue
        name = _object_name(source, obj_root)
        gencode = shlex.join(limited.gencode_flags()) if limited is not None else None
        flags = (
            reproducible.nvcc_source_flags(name, variant.toolkit.version)
            if rule == "nvcc"
            else reproducible.host_source_flags(name)
        )
        steps.append(
            CompileStep(
                source=source, object=build_dir / "obj" / (name + ".o"), rule=rule,
                arch_set=limited, gencode=gencode, flags=shlex.join(flags),
            )
        )  # fmt: skip
    return steps, left_out


def export_map(module_leaf: str) -> str:
    """A linker version script that exports ``PyInit_<leaf>`` and nothing else. Sources compile
    with default visibility, so the export never depends on how user code spells the init
    function (``PyMODINIT_FUNC`` or a bare ``PyObject* PyInit__C(void)``); everything else, static
    cudart included, stays local, which is what ``-fvisibility=hidden`` was for."""
    return (
        "/* Generated by wheelforge: the extension module's only export. */\n"
        f"{{\n  global:\n    PyInit_{module_leaf};\n  local:\n    *;\n}};\n"
    )


def wheel_version(matrix: Matrix, variant: Variant) -> str:
    """The wheel's version: the package's, plus the variant's local label if any."""
    label = variant.local_label
    return str(Version(f"{matrix.package.version}+{label}")) if label else matrix.package.version


def make_plan(
    *,
    matrix: Matrix,
    variant: Variant,
    torch: TorchEnv,
    weak_header: str,
    build_root: Path,
    out_dir: Path,
    cxx: str,
    cc: str,
    nvcc_host: str,
    nvcc_threads: int | None,
    cxx_launcher: tuple[str, ...] = (),
    cc_launcher: tuple[str, ...] = (),
    cuda_launcher: tuple[str, ...] = (),
) -> VariantPlan:
    build_dir = (build_root / variant.id).resolve()
    gen = build_dir / "gen"
    ext = matrix.extension
    weak = GeneratedFile(path=gen / "wheelforge_weak_shims.h", text=weak_header)
    rel: Rel = reproducible.spelling(build_dir, matrix.root.resolve(), variant.toolkit.version)
    abi = _ABI_FLAVOURS[matrix.abi](matrix, torch, weak, rel)
    exports = GeneratedFile(path=gen / "exports.map", text=export_map(ext.leaf))
    sources = _sources(matrix)
    generated, preload = _generated(matrix, abi, variant, gen, sources=sources, exports=exports)
    folders = reproducible.input_folders(matrix.root.resolve(), build_dir, torch, variant.toolkit)
    cxx_flags, cc_flags, nvcc_flags = _compile_flags(abi, variant, matrix, torch, nvcc_host=nvcc_host, rel=rel, maps=reproducible.prefix_maps(reproducible.spelled(folders, rel)))  # fmt: skip
    ldflags = _link_flags(abi, variant, matrix, torch, exports.path)
    steps, left_out = _compile_steps(sources, variant, matrix, build_dir, gen)
    return VariantPlan(
        variant=variant,
        matrix=matrix,
        torch=torch,
        build_dir=build_dir,
        # the variant's index folder (cu124/) when each CUDA release's wheels have their own
        out_dir=out_dir / variant.index if variant.index else out_dir,
        cxx=cxx,
        cc=cc,
        cxx_launcher=cxx_launcher,
        cc_launcher=cc_launcher,
        cuda_launcher=cuda_launcher,
        cxx_flags=shlex.join(cxx_flags),
        cc_flags=shlex.join(cc_flags),
        nvcc_host=nvcc_host,
        nvcc_flags=shlex.join(nvcc_flags),
        gencode=shlex.join(variant.arch_set.gencode_flags()),
        ldflags=shlex.join(ldflags),
        compile_steps=tuple(steps),
        left_out=tuple(left_out),
        generated=tuple(generated),
        library=build_dir / f"{ext.leaf}{abi.module_suffix}",
        export_map=exports.path,
        wheel_library_path=ext.wheel_path(f"{ext.leaf}{abi.module_suffix}"),
        torch_requirement=abi.torch_requirement,
        nvcc_preload=preload,
        input_folders=tuple(folders.items()),
        abi_tag=abi.abi_tag,
        nvcc_threads=nvcc_threads,
        version=wheel_version(matrix, variant),
    )
