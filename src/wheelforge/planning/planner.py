"""Planning a variant: from PlanInputs, the variant and the torch it compiles against, its
sources and their arch limits, every compile and link flag, one compile step per source with its
-gencode flags, the generated files, the wheel's names and the nvcc threads (make_plan, which
runs no tool); plan_variant adds the two probes a plan needs, and is the one planning call (the
build calls it again with torch's confirmed answer, the twin with its own inputs)."""

from __future__ import annotations

import fnmatch
import os
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from wheelforge.configuration import abi as abis
from wheelforge.configuration.archs import ArchSpec
from wheelforge.configuration.matrix.keys import GENERATED_RE
from wheelforge.configuration.matrix.model import ExtensionConfig, GenerateStep, Matrix
from wheelforge.configuration.settings import BuildSettings
from wheelforge.foundation.errors import ConfigError, EnvironmentProblem
from wheelforge.planning import parallelism, reproducible
from wheelforge.planning.abi import Rel
from wheelforge.planning.abi import flavour as abi_flavour
from wheelforge.planning.plan import (
    AbiFlavour,
    CompilePlan,
    CompileStep,
    FlagSet,
    GeneratedFile,
    GenerateEdge,
    LinkPlan,
    PlanInputs,
    Rule,
    VariantPlan,
    WheelPlan,
    wheel_version,
)
from wheelforge.planning.variants import Variant
from wheelforge.toolchain import compilecache, envs, headerlibs, toolkit, torchprobe
from wheelforge.toolchain.compilecache import CompileCache
from wheelforge.toolchain.headerlibs import HeaderLibrary
from wheelforge.toolchain.torchprobe import TorchEnv

_RULES: dict[str, Rule] = {".cu": "nvcc", ".cpp": "cxx", ".cc": "cxx", ".cxx": "cxx", ".c": "cc"}


def _sources(
    matrix: Matrix, ext: ExtensionConfig, generated: Callable[[str], Path]
) -> dict[Path, tuple[ArchSpec, ...] | None]:
    """Every source of *ext* and its arch limits; an entry with ``archs`` wins over a plain
    glob. A glob of a generate step's outputs (``{step}/GLOB``) matches its declared outputs
    in *generated*'s folder for it: they do not exist before the step runs."""
    found: dict[Path, tuple[ArchSpec, ...] | None] = {}
    limited_by: dict[Path, str] = {}
    for spec in ext.sources:
        if (ref := GENERATED_RE.match(spec.pattern)) is not None:
            step = matrix.step(ref[1])
            outputs = fnmatch.filter(step.outputs, ref[2] or "*") if step else []
            matches = [generated(ref[1]) / name for name in sorted(outputs)]
        else:
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


def _module_init(ext: ExtensionConfig, gen: Path) -> GeneratedFile | None:
    """The generated ``PyInit_<leaf>`` of a module that does not define its own."""
    if not ext.generates_init:
        return None
    return GeneratedFile(path=gen / f"{ext.leaf}_module_init.c", text=module_init_source(ext.leaf))


def _fixed_pid(variant: Variant, gen: Path) -> GeneratedFile | None:
    """The fixed-pid library's source, for nvcc before CUDA 12.9 (reproducible.py)."""
    if not reproducible.needs_fixed_pid(variant.toolkit.version):
        return None
    preload = gen / reproducible.FIXED_PID_LIBRARY
    return GeneratedFile(path=preload.with_suffix(".c"), text=reproducible.FIXED_PID_SOURCE)


def header_stamp(libraries: Sequence[HeaderLibrary], gen: Path) -> GeneratedFile | None:
    """A file whose text is the header libraries' names, versions and content digests: every
    compile depends on it, so another commit (or an edited header ninja's depfiles would miss
    by its mtime) recompiles, and the same content keeps the file as it is."""
    if not libraries:
        return None
    lines = [f"{lib.name} {lib.version or '-'} {lib.digest or '-'}" for lib in libraries]
    return GeneratedFile(path=gen / "header-libraries.txt", text="\n".join(lines) + "\n")


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


def _compile_flags(
    abi: AbiFlavour,
    variant: Variant,
    ext: ExtensionConfig,
    torch: TorchEnv,
    *,
    nvcc_host: str,
    rel: Rel,
    maps: tuple[str, ...],
    includes: Sequence[Path],
) -> FlagSet:
    """One extension's C++, C and nvcc flags (without -gencode: that is per compile step).
    Default visibility everywhere: what the module exports is decided at link time
    (export_map()). The prefix maps of *folders* keep them out of the binaries
    (reproducible.py). *includes*: the extension's include folders, then the header
    libraries', before torch's."""
    defines = (*abi.defines, f"-DTORCH_EXTENSION_NAME={ext.leaf}")
    own_includes = tuple(f"-I{rel(d)}" for d in includes)
    # The variant's own toolkit headers (cuda_runtime.h) for C/C++ sources, as nvcc adds them
    # for .cu ones; after the matrix's and torch's folders.
    cuda_includes = [f"-I{d}" for d in variant.toolkit.include_dirs]
    cxx_flags = [
        "-std=c++17",
        "-O3",
        "-fPIC",
        *maps,
        *defines,
        *own_includes,
        *abi.includes,
        *cuda_includes,
        *abi.force_include,
        *ext.cxx_flags,
    ]
    cc_flags = [
        "-O2",
        "-fPIC",
        *maps,
        *defines,
        f"-I{rel(torch.python_include)}",
        *cuda_includes,
    ]
    nvcc_flags = [
        "-std=c++17",
        "-O3",
        f"-ccbin={nvcc_host}",
        *reproducible.NVCC_FLAGS,
        # nvcc passes these to the host compiler; -fPIC is required for a shared object.
        "-Xcompiler=-fPIC",
        *(f"-Xcompiler={m}" for m in maps),
        # The CUDA-only shim declarations (aoti_torch_get_current_cuda_stream, ...) sit behind USE_CUDA.
        "-DUSE_CUDA",
        *defines,
        *own_includes,
        *abi.includes,
        *abi.force_include,
        *ext.nvcc_flags,
    ]
    return FlagSet(cxx=shlex.join(cxx_flags), cc=shlex.join(cc_flags), nvcc=shlex.join(nvcc_flags))


def _link_flags(
    abi: AbiFlavour, variant: Variant, ext: ExtensionConfig, torch: TorchEnv, exports: Path
) -> list[str]:
    toolkit = variant.toolkit
    if toolkit.cudart_static is None:
        raise EnvironmentProblem(
            f"CUDA {toolkit.version} at {toolkit.root} has no libcudart_static.a; install the CUDA runtime "
            "development files (PyPI: nvidia-cuda-runtime) so the extension carries its own cudart"
        )
    return [
        # cudart linked statically, and its symbols kept out of our dynamic symbol table.
        str(toolkit.cudart_static),
        "-ldl",
        "-lrt",
        "-lpthread",
        "-Wl,--exclude-libs,ALL",
        *(f"-L{d}" for d in torch.library_dirs),
        # Keep libtorch even though no symbol comes from it directly: on a CUDA torch it pulls in
        # libtorch_cuda, where the CUDA shims (the current stream, ...) are defined.
        "-Wl,--no-as-needed",
        "-lc10",
        "-ltorch",
        "-ltorch_cpu",
        "-Wl,--as-needed",
        *abi.extra_ldflags,
        f"-Wl,--version-script={exports}",
        *(f"-L{d}" for d in ext.library_dirs),
        *(f"-l{name}" for name in ext.libraries),
        *ext.link_flags,
    ]


_StepKey = tuple[Path, str, str, str | None]  # source, rule, its flags, its -gencode


class _Steps:
    """The compile steps of every extension: a source two extensions compile with the same
    flags and -gencode is compiled once (the first one's object), otherwise each extension's
    objects lie in a folder of its own (objects of different extensions never collide)."""

    def __init__(self, variant: Variant, matrix: Matrix, build_dir: Path, gen: Path) -> None:
        self.variant, self.matrix, self.build_dir, self.gen = variant, matrix, build_dir, gen
        self.steps: list[CompileStep] = []
        self.left_out: list[Path] = []
        self.by_key: dict[_StepKey, CompileStep] = {}

    def add(
        self,
        index: int,
        sources: dict[Path, tuple[ArchSpec, ...] | None],
        flags: FlagSet,
        objects: Path,
    ) -> list[Path]:
        """The steps of extension *index* (its objects under *objects*), and its objects, one
        per source, each with the -gencode flags it compiles with (the one place they are
        decided); a limited source with no arch in common with the arch set is left out."""
        linked = []
        variant = self.variant
        for source, limits in sources.items():
            rule = _RULES[source.suffix]
            limited = (
                variant.arch_set.limit(limits) if limits is not None and rule == "nvcc" else None
            )
            if limited is not None and not limited.specs:
                if source not in self.left_out:
                    self.left_out.append(source)
                continue
            gencode = shlex.join(limited.gencode_flags()) if limited is not None else None
            key = (source, rule, getattr(flags, rule), gencode)
            if (known := self.by_key.get(key)) is not None:
                linked.append(known.object)
                continue
            name = _object_name(source, self._root_of(source))
            seeds = (
                reproducible.nvcc_source_flags(name, variant.toolkit.version)
                if rule == "nvcc"
                else reproducible.host_source_flags(name)
            )
            step = CompileStep(
                source=source,
                object=objects / (name + ".o"),
                rule=rule,
                arch_set=limited,
                gencode=gencode,
                flags=shlex.join(seeds),
                flag_set=index,
            )
            self.by_key[key] = step
            self.steps.append(step)
            linked.append(step.object)
        return linked

    def _root_of(self, source: Path) -> Path:
        """What an object is named relative to: the generated files' folder, the build folder
        (a generate step's output), else the project."""
        if source.is_relative_to(self.gen):
            return self.gen
        if source.is_relative_to(self.build_dir):
            return self.build_dir
        return self.matrix.root


def export_map(ext: ExtensionConfig) -> str:
    """A linker version script that exports ``PyInit_<leaf>`` of a module and nothing else (a
    library exports nothing: torch.ops.load_library runs its registrations as it loads).
    Sources compile with default visibility, so the export never depends on how user code
    spells the init function (``PyMODINIT_FUNC`` or a bare ``PyObject* PyInit__C(void)``);
    everything else, static cudart included, stays local, which is what
    ``-fvisibility=hidden`` was for."""
    if ext.kind == "library":
        return "/* Generated by wheelforge: an operator library exports nothing. */\n{\n  local:\n    *;\n};\n"
    return (
        "/* Generated by wheelforge: the extension module's only export. */\n"
        f"{{\n  global:\n    PyInit_{ext.leaf};\n  local:\n    *;\n}};\n"
    )


def _generate_edges(
    inputs: PlanInputs, build_dir: Path
) -> tuple[tuple[GenerateEdge, ...], Callable[[str], Path]]:
    """The generate steps as ninja edges, and each step's output folder by name."""
    matrix = inputs.matrix

    def folder(name: str) -> Path:
        return build_dir / "generated" / name

    def fill(word: str, step: GenerateStep) -> str:
        values = {
            "python": str(inputs.python or sys.executable),
            "project": str(matrix.root.resolve()),
            "out": str(folder(step.name)),
            **{s.name: str(folder(s.name)) for s in matrix.generate},
        }
        for name, value in values.items():
            word = word.replace(f"{{{name}}}", value)
        return word

    edges = []
    for step in matrix.generate:
        read: list[Path] = []
        for pattern in step.inputs:
            if (ref := GENERATED_RE.match(pattern)) is not None:
                read.append(folder(ref[1]) / (ref[2] or ""))
            else:
                read += sorted(p.resolve() for p in matrix.root.glob(pattern) if p.is_file())
        edges.append(
            GenerateEdge(
                name=step.name,
                command=tuple(fill(w, step) for w in step.run),
                folder=folder(step.name),
                inputs=tuple(read),
                outputs=tuple(folder(step.name) / o for o in step.outputs),
                timeout=step.timeout,
            )
        )
    return tuple(edges), folder


def _include_folders(
    ext: ExtensionConfig, libraries: Sequence[HeaderLibrary], generated: Callable[[str], Path]
) -> list[Path]:
    """-I folders of *ext*: its own (a ``{step}`` one in the build folder), then the header
    libraries'."""
    own = []
    for folder in ext.include_dirs:
        ref = GENERATED_RE.match(folder.as_posix()) if not folder.is_absolute() else None
        own.append(generated(ref[1]) / (ref[2] or "") if ref else folder)
    return [*own, *(d for lib in libraries for d in lib.include_dirs)]


def _nvcc_threads(inputs: PlanInputs, variant: Variant, steps: Sequence[CompileStep]) -> int:
    """NVCC_THREADS when given, else enough nvcc threads for the nvcc jobs to fill the cores."""
    if inputs.nvcc_threads is not None:
        return inputs.nvcc_threads
    nvcc = [s for s in steps if s.rule == "nvcc"]
    targets = max((len((s.arch_set or variant.arch_set).specs) for s in nvcc), default=1)
    return parallelism.auto_nvcc_threads(
        cores=inputs.cores, jobs=inputs.jobs, nvcc_sources=len(nvcc), targets=targets
    )


def make_plan(
    inputs: PlanInputs, variant: Variant, torch: TorchEnv, *, weak_header: str, nvcc_host: str
) -> VariantPlan:
    """The plan of *variant* compiled against *torch*; *weak_header* is the weak-shims header of
    that torch and *nvcc_host* the host compiler its toolkit accepts (plan_variant probes both)."""
    matrix = inputs.matrix
    build_dir = (inputs.build_root / variant.id).resolve()
    gen = build_dir / "gen"
    weak = GeneratedFile(path=gen / "wheelforge_weak_shims.h", text=weak_header)
    rel: Rel = reproducible.spelling(build_dir, matrix.root.resolve(), variant.toolkit.version)
    abi = abi_flavour(matrix, torch, weak, rel)
    edges, generated_folder = _generate_edges(inputs, build_dir)
    libraries = inputs.header_libraries
    generated = [*abi.generated]
    preload = _fixed_pid(variant, gen)
    stamp = header_stamp(libraries, gen)
    generated += [g for g in (preload, stamp) if g is not None]
    folders = reproducible.input_folders(matrix.root.resolve(), build_dir, torch, variant.toolkit)
    for lib in libraries:  # deeper than the project when it lies in it: named after itself
        folders[lib.root] = reproducible.header_library_name(lib.name)
    maps = reproducible.prefix_maps(reproducible.spelled(folders, rel))
    several = len(matrix.extensions) > 1
    steps = _Steps(variant, matrix, build_dir, gen)
    flag_sets, links = [], []
    for index, ext in enumerate(matrix.extensions):
        # With several extensions each has folders of its own; one keeps the layout it had.
        own_gen = gen / ext.name if several else gen
        sources = _sources(matrix, ext, generated_folder)
        init = _module_init(ext, own_gen)
        if init is not None:
            generated.append(init)
            sources[init.path] = None
        exports = GeneratedFile(path=own_gen / "exports.map", text=export_map(ext))
        generated.append(exports)
        flags = _compile_flags(
            abi,
            variant,
            ext,
            torch,
            nvcc_host=nvcc_host,
            rel=rel,
            maps=maps,
            includes=_include_folders(ext, libraries, generated_folder),
        )
        flag_sets.append(flags)
        objects = steps.add(
            index, sources, flags, build_dir / "obj" / ext.name if several else build_dir / "obj"
        )
        suffix = abi.module_suffix if ext.kind == "module" else ".so"
        filename = f"{ext.leaf}{suffix}"
        links.append(
            LinkPlan(
                extension=ext,
                objects=tuple(objects),
                ldflags=shlex.join(_link_flags(abi, variant, ext, torch, exports.path)),
                library=build_dir / "lib" / ext.wheel_path(filename)
                if several
                else build_dir / filename,
                export_map=exports.path,
                wheel_path=ext.wheel_path(filename),
            )
        )
    return VariantPlan(
        variant=variant,
        torch=torch,
        abi=abi,
        project=matrix.root,
        matrix_path=matrix.path,
        build_dir=build_dir,
        out_dir=inputs.out_dir,
        compile=CompilePlan(
            cxx=inputs.compilers.cxx,
            cc=inputs.compilers.cc,
            nvcc=variant.toolkit.nvcc,
            nvcc_host=nvcc_host,
            launchers=compilecache.launchers(inputs.compile_cache, inputs.compilers.launchers),
            compile_cache=inputs.compile_cache,
            flag_sets=tuple(flag_sets),
            gencode=shlex.join(variant.arch_set.gencode_flags()),
            steps=tuple(steps.steps),
            left_out=tuple(steps.left_out),
            generated=tuple(generated),
            generate=edges,
            header_libraries=libraries,
            header_stamp=stamp,
            nvcc_preload=preload.path.with_suffix(".so") if preload else None,
            input_folders=tuple(folders.items()),
            jobs=inputs.jobs,
            nvcc_threads=_nvcc_threads(inputs, variant, steps.steps),
        ),
        links=tuple(links),
        wheel=WheelPlan(
            package=matrix.package,
            requires_python=matrix.requires_python,
            version=wheel_version(matrix, variant),
        ),
    )


def plan_inputs(
    settings: BuildSettings, compile_cache: CompileCache | None = None, *, download: bool = True
) -> PlanInputs:
    """A build's planning inputs, compiling through *compile_cache* when given; its header
    libraries found (a PyPI one downloaded into the cache unless not *download* or offline)."""
    libraries = headerlibs.resolve(
        settings.matrix.header_libraries,
        root=settings.matrix.root,
        cache=settings.cache_dir,
        download=download and not settings.offline,
        offline=settings.offline,
    )
    return PlanInputs(
        matrix=settings.matrix,
        build_root=settings.build_root,
        out_dir=settings.out_dir,
        compilers=settings.compilers,
        compile_cache=compile_cache,
        jobs=settings.jobs,
        nvcc_threads=settings.nvcc_threads,
        cores=len(os.sched_getaffinity(0)),
        cache_dir=settings.cache_dir,
        header_libraries=libraries,
        python=settings.python,
    )


def plan_variant(inputs: PlanInputs, variant: Variant, torch: TorchEnv) -> VariantPlan:
    """The plan of *variant* against *torch*, with the two probes it needs (cached): the
    weak-shims header of torch's CUDA-only shims, the host compiler the toolkit accepts."""
    shims = torchprobe.cuda_only_shims(torch.include_dir, cache=inputs.cache_dir)
    return make_plan(
        inputs,
        variant,
        torch,
        weak_header=torchprobe.weak_shims_header(shims),
        nvcc_host=toolkit.host_compiler(
            variant.toolkit, inputs.compilers.cxx, cache=inputs.cache_dir
        ),
    )


def _build_torch(variant: Variant, settings: BuildSettings, *, early: bool) -> TorchEnv:
    tests = settings.matrix.tests
    return envs.build_torch(
        variant.torch,
        python=settings.python,
        requires=tests.requires if tests else (),
        cache=settings.cache_dir,
        early=early,
    )


def plan_all(
    settings: BuildSettings, chosen: Sequence[Variant], inputs: PlanInputs, *, early: bool = False
) -> list[VariantPlan]:
    """A plan per variant of *chosen* (each with its toolkit on disk), torch probed once per
    torch. *early*: torch may be read from its files, to be confirmed before packing
    (torchprobe.probe_torch); a build does that, a dry run does not."""
    flavour = abis.of(settings.matrix.abi)
    plans = []
    probed: dict[str | None, TorchEnv] = {}
    for variant in chosen:
        if variant.torch not in probed:
            torch = probed[variant.torch] = _build_torch(variant, settings, early=early)
            if flavour.torch_target:
                torchprobe.check_target(torch, settings.matrix.torch.lowest)
        plans.append(plan_variant(inputs, variant, probed[variant.torch]))
    return plans
