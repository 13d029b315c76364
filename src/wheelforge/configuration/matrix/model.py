"""The matrix.yaml model: frozen dataclasses for what a matrix says (the top level, package,
the extensions and their sources, header libraries, generate steps, tests, wheel-variants), and
the one description of its keys. Each
field's metadata (matrix/keys.key) names its YAML key, its shape in YAML when that differs from
the Python type, its default and a one-line doc; configuration/matrix/load.py reads the file by these fields,
matrix/schema.py turns them into data/matrix.schema.json and the key tables of docs/matrix.md.
Derived fields (``internal``) are not keys."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.utils import canonicalize_name

from wheelforge.configuration.abi import STABLE, AbiName
from wheelforge.configuration.archs import ArchSet, ArchSpec, is_arch_list_id
from wheelforge.configuration.bytesizes import DEFAULT_SIZE_BUDGET, SIZE_PATTERN
from wheelforge.configuration.matrix.keys import (
    ARCH_LIST_REF,
    ARCH_SET_NAME_RE,
    COMPILE_CACHES,
    HEADER_LIBRARY_RE,
    INTERNAL,
    LIMITED_API_RE,
    MODULE_RE,
    NAME_RE,
    PYTHON_ABI_RE,
    STEP_NAME_RE,
    Scalar,
    Scalars,
    Strings,
    key,
    pattern_schema,
)
from wheelforge.configuration.matrix.torchspec import TorchSpec


@dataclass(frozen=True, kw_only=True)
class PackageConfig:
    """The distribution: its name, version, metadata and the Python packages of the wheel."""

    name: str = field(
        metadata=key(
            (
                "the distribution name (letters, digits, `-`, `_`, `.`); required unless "
                "pyproject.toml [project] gives it"
            ),
            shape=pattern_schema(NAME_RE),
            required=False,
        )
    )
    version: str = field(
        metadata=key(
            'a PEP 440 version; write `"1.10"` or `1.10`, both stay `1.10`; required unless pyproject.toml [project] gives it',
            shape=Scalar,
            required=False,
        )
    )
    summary: str = field(default="", metadata=key("METADATA `Summary`"))
    license: str | None = field(default=None, metadata=key("METADATA `License`", shape=str))
    requires_python: str | None = field(
        default=None,
        metadata=key(
            "METADATA `Requires-Python`",
            name="requires-python",
            shape=str,
            default_words="`>=3.<minor of python-abi>`",
        ),
    )
    dependencies: tuple[str, ...] = field(
        default=(),
        metadata=key("extra `Requires-Dist` entries; torch must not be listed", shape=Strings),
    )
    authors: tuple[str, ...] = field(
        default=(),
        metadata=key(
            (
                "METADATA `Author-email` entries, `Name <email>` (or `Author` for a name alone), as"
                " setup(author=, author_email=) gives them"
            ),
            shape=Strings,
        ),
    )
    maintainers: tuple[str, ...] = field(
        default=(),
        metadata=key(
            (
                "METADATA `Maintainer` (names) and `Maintainer-email` (addresses), as"
                " setup(maintainer=, maintainer_email=) gives them"
            ),
            shape=Strings,
        ),
    )
    urls: tuple[tuple[str, str], ...] = field(
        default=(),
        metadata=key(
            "METADATA `Project-URL` entries: labels to URLs (`Homepage: https://...`)",
            shape={"type": "object", "additionalProperties": {"type": "string"}},
            words="mapping of labels to URLs",
        ),
    )
    home_page: str | None = field(
        default=None,
        metadata=key(
            "METADATA `Home-page`, as setup(url=...) gives it (setuptools keeps it beside pyproject.toml [project])",
            name="home-page",
            shape=str,
            words="URL",
        ),
    )
    download_url: str | None = field(
        default=None,
        metadata=key(
            "METADATA `Download-URL`, as setup(download_url=...) gives it",
            name="download-url",
            shape=str,
            words="URL",
        ),
    )
    classifiers: tuple[str, ...] = field(
        default=(), metadata=key("METADATA `Classifier` entries (trove classifiers)", shape=Strings)
    )
    keywords: tuple[str, ...] = field(
        default=(), metadata=key("METADATA `Keywords`", shape=Strings)
    )
    optional_dependencies: tuple[tuple[str, tuple[str, ...]], ...] = field(
        default=(),
        metadata=key(
            (
                "extras: each extra's requirements (`test: [pytest>=8]`), METADATA "
                '`Provides-Extra` and `Requires-Dist: ...; extra == "test"`, as '
                "setup(extras_require=...) gives them"
            ),
            name="optional-dependencies",
            shape={
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
            words="mapping of extras to lists",
        ),
    )
    readme: str | None = field(
        default=None,
        metadata=key(
            (
                "the file whose text is METADATA's long description (`Description-Content-Type` "
                "from its suffix: .md markdown, .rst reStructuredText, else plain text)"
            ),
            shape=str,
            words="file",
        ),
    )
    packages: tuple[Path, ...] = field(
        default=(),
        metadata=key(
            (
                "Python packages (an `__init__.py`, or a namespace package holding one); their "
                "`.py`/`.pyi` files and `package-data` go into the wheel"
            ),
            shape=Strings,
            default_words="the extension's top-level package, else every top-level package folder",
        ),
    )
    modules: tuple[Path, ...] = field(
        default=(),
        metadata=key(
            (
                "top-level Python modules (`.py` files) shipped at the wheel's root, as "
                "setup(py_modules=...) ships them"
            ),
            shape=Strings,
            words="list of files",
        ),
    )
    package_data: tuple[str, ...] = field(
        default=(),
        metadata=key(
            "files (globs relative to each package folder) shipped beside the Python files",
            name="package-data",
            shape=Strings,
            words="list of globs",
        ),
    )
    exclude: tuple[str, ...] = field(
        default=(),
        metadata=key("files (globs) left out of the wheel", shape=Strings, words="list of globs"),
    )
    pyproject: str | None = field(
        default=None,
        metadata=key(
            "the pyproject.toml whose [project] gives the metadata, or `false` for none",
            shape={"anyOf": [{"type": "string"}, {"type": "boolean"}]},
            words="path or `false`",
            default_words="`pyproject.toml` beside the matrix, if any",
        ),
    )
    # From pyproject.toml's [project]: core-metadata headers (Classifier, Project-URL, ...).
    extra_metadata: tuple[tuple[str, str], ...] = field(default=(), metadata=INTERNAL)
    description: str | None = field(default=None, metadata=INTERNAL)  # the readme: METADATA's body
    metadata_version: str = field(default="2.1", metadata=INTERNAL)
    license_files: tuple[Path, ...] = field(default=(), metadata=INTERNAL)  # .dist-info/licenses/

    @property
    def wheel_name(self) -> str:
        """The distribution name as it appears in a wheel's file name."""
        return canonicalize_name(self.name).replace("-", "_")


@dataclass(frozen=True, kw_only=True)
class SourceSpec:
    """A glob of sources limited to some archs (a Hopper-only kernel: 9.0a), or compiled with
    flags of their own (vLLM's marlin kernels: ``-static-global-template-stub=false``)."""

    # relative to the matrix's folder
    pattern: str = field(metadata=key("a glob of sources", name="files", words="glob"))
    archs: tuple[ArchSpec, ...] | None = field(
        default=None,
        metadata=key(
            "compile these sources only for these archs (rule in toolkits.md)",
            shape=ARCH_LIST_REF,
            words="arch list",
        ),
    )
    flags: tuple[str, ...] = field(
        default=(),
        metadata=key(
            (
                "flags appended to these sources' compiles alone, after the extension's (the "
                "compiler's of each: nvcc's for a `.cu`)"
            ),
            shape=Strings,
        ),
    )


_SOURCES = Strings | tuple[str | SourceSpec, ...]


# What a shared object is to Python: a module imported by name (``import pkg._C`` runs its
# PyInit), a library of operators loaded with ``torch.ops.load_library`` (no PyInit), or a plain
# shared library the package loads with ctypes/cffi (its own C exports, no torch link).
ExtensionKind = Literal["module", "library", "plain"]


@dataclass(frozen=True, kw_only=True)
class ExtensionConfig:
    """One compiled shared object of the wheel: its name, kind, sources and flags."""

    name: str = field(  # dotted module name, e.g. wheelforge_kernels._C
        metadata=key(
            (
                "where it lands: `pkg._C` → `pkg/_C.abi3.so` (a `library` or `plain` one: "
                "`pkg/_C.so`); a top-level name lands at the wheel's root"
            ),
            shape=pattern_schema(MODULE_RE),
            words="module name",
        )
    )
    kind: ExtensionKind = field(
        default="module",
        metadata=key(
            "`module`: imported by name (`import pkg._C`); `library`: a library of operators "
            "loaded with `torch.ops.load_library` (no `PyInit`), named `<leaf>.so`; `plain`: a "
            "shared library loaded with ctypes/cffi (`pkg.libfoo` → `pkg/libfoo.so`): no "
            "`PyInit`, no torch link, every symbol its sources export stays exported"
        ),
    )
    sources: tuple[SourceSpec, ...] = field(
        metadata=key(
            (
                "each glob must match at least one file, all of them sources; `archs` limits a "
                "source to those archs (rule in toolkits.md); `{step}/GLOB` names outputs of a "
                "`generate` step"
            ),
            shape=_SOURCES,
            words="list of globs, or `{files: GLOB, archs: LIST, flags: LIST}`",
        )
    )
    archs: tuple[ArchSpec, ...] | None = field(
        default=None,
        metadata=key(
            (
                "compile this extension's CUDA sources only for these archs (the rule of a "
                "source's `archs`, which wins over it): two shared objects of one wheel built for "
                "different archs"
            ),
            shape=ARCH_LIST_REF,
            words="arch list",
        ),
    )
    # Py_LIMITED_API of this shared object, older than python-abi (CMake's USE_SABI 3)
    limited_api: str | None = field(
        default=None,
        metadata=key(
            (
                "the limited API this shared object compiles against (`Py_LIMITED_API`): "
                '`"3"` (as CMake\'s `USE_SABI 3` writes it, the same as 3.2) or `"3.N"`, no '
                "newer than `python-abi`, whose tag the wheel keeps; under `abi: unstable` "
                "added to the build's defines"
            ),
            name="limited-api",
            shape=pattern_schema(LIMITED_API_RE),
            default_words="`python-abi`'s",
        ),
    )
    torch_target: tuple[int, int] | None = field(
        default=None,
        metadata=key(
            (
                "the stable-ABI torch this shared object targets (`-DTORCH_TARGET_VERSION`), "
                "within the `torch` range: two shared objects of one wheel built for different "
                'torch (`"2.10"`, `"2.11"`); the wheel requires the highest; refused for '
                "`abi: unstable`"
            ),
            name="torch-target",
            shape=Scalar,
            words="version",
            default_words="the lowest `torch`",
        ),
    )
    include_dirs: tuple[Path, ...] = field(
        default=(),
        metadata=key(
            (
                "`-I` for every compile of this extension (before the header libraries' and "
                "torch's); `{step}` names a `generate` step's output folder"
            ),
            name="include-dirs",
            shape=Strings,
        ),
    )
    cxx_flags: tuple[str, ...] = field(
        default=(),
        metadata=key(
            "appended after wheelforge's own flags to the C++ compile",
            name="cxx-flags",
            shape=Strings,
        ),
    )
    nvcc_flags: tuple[str, ...] = field(
        default=(),
        metadata=key(
            "appended after wheelforge's own flags to the nvcc compile",
            name="nvcc-flags",
            shape=Strings,
        ),
    )
    link_flags: tuple[str, ...] = field(
        default=(), metadata=key("appended to the link", name="link-flags", shape=Strings)
    )
    libraries: tuple[str, ...] = field(
        default=(), metadata=key("`-l<name>` for each", shape=Strings)
    )
    library_dirs: tuple[Path, ...] = field(
        default=(), metadata=key("`-L<folder>` for each folder", name="library-dirs", shape=Strings)
    )
    # generate PyInit_<name> so the module imports from Python
    module_init: bool = field(
        default=True,
        metadata=key(
            (
                "compile a generated `PyInit_<leaf>` (limited API) so `import pkg._C` loads the "
                "library and runs its `STABLE_TORCH_LIBRARY` registrations; `false` if your sources"
                " define it; a `library` has none"
            ),
            name="module-init",
        ),
    )
    size_budget: int | None = field(
        default=None,
        metadata=key(
            (
                "the largest this shared object may be, as a file in the wheel (uncompressed): "
                "`20MiB`, `450MB` or bytes; over it fails the variant (exit 4), like the wheel's "
                "`size-budget`"
            ),
            name="size-budget",
            shape={
                "anyOf": [
                    {"type": "string", "pattern": SIZE_PATTERN},
                    {"type": "number", "exclusiveMinimum": 0},
                ]
            },
            words="size",
        ),
    )

    @property
    def leaf(self) -> str:
        return self.name.rsplit(".", 1)[-1]

    @property
    def generates_init(self) -> bool:
        """Whether wheelforge compiles a ``PyInit_<leaf>`` into it (a module, unless its
        sources define one)."""
        return self.kind == "module" and self.module_init

    @property
    def links_torch(self) -> bool:
        """Whether it compiles against torch and links libtorch: every kind but ``plain`` (a
        ctypes/cffi library compiles as its own build does, with no torch header or library;
        planning/planner.py)."""
        return self.kind != "plain"

    @property
    def package_path(self) -> str:
        """Folder of the module inside the wheel, e.g. ``wheelforge_kernels``; empty for a
        top-level module (``causal_conv1d_cuda``)."""
        return self.name.rsplit(".", 1)[0].replace(".", "/") if "." in self.name else ""

    def wheel_path(self, filename: str) -> str:
        return f"{self.package_path}/{filename}" if self.package_path else filename


@dataclass(frozen=True, kw_only=True)
class HeaderLibraryConfig:
    """A header library the sources include (CUTLASS/CuTe, ...): from a folder of the project
    (a git submodule's commit is read from its checkout) or from a PyPI package that ships the
    headers. Its include folders join every compile; its version or commit goes into the SBOM
    and the build info; a change to its content recompiles what includes it."""

    name: str = field(
        metadata=key(
            "what the SBOM and the build info call it (`cutlass`)",
            shape=pattern_schema(HEADER_LIBRARY_RE),
        )
    )
    path: Path | None = field(
        default=None,
        metadata=key(
            (
                "its folder, relative to matrix.yaml (a git submodule such as `csrc/cutlass`: its "
                "commit is read from the checkout, no network)"
            ),
            shape=str,
            words="folder",
        ),
    )
    pypi: str | None = field(
        default=None,
        metadata=key(
            (
                'a PyPI requirement pinned with `==` whose wheel ships the headers (`"nvidia-cutlass'
                '==4.2.0.0"`); downloaded once into the user cache (not with `--offline`)'
            ),
            shape=str,
            words="requirement",
        ),
    )
    include: tuple[str, ...] = field(
        default=("include",),
        metadata=key(
            (
                "its include folders, relative to `path` (or to the unpacked wheel: "
                "`cutlass_library/source/include`); each must exist"
            ),
            shape=Strings,
            words="list of folders",
        ),
    )
    version: str | None = field(
        default=None,
        metadata=key(
            (
                "its version as the SBOM names it (`3.9.2`); default: the git commit of `path`, the"
                " pinned version of `pypi`"
            ),
            shape=Scalar,
            words="version",
        ),
    )


DEFAULT_GENERATE_TIMEOUT = 600  # seconds one generate step may run


@dataclass(frozen=True, kw_only=True)
class GenerateStep:
    """A program that writes sources before anything compiles (FA3's generate_kernels.py,
    vLLM's marlin generators): a ninja edge of its own, run in its output folder inside the
    variant's build folder, and again only when an input or the command changes."""

    name: str = field(
        metadata=key(
            "the step's name: sources and include-dirs name its output folder as `{name}`",
            shape=pattern_schema(STEP_NAME_RE),
        )
    )
    run: tuple[str, ...] = field(
        metadata=key(
            (
                "the command, one word each; `{python}` is the build Python, `{project}` the "
                "folder of matrix.yaml, `{out}` this step's output folder (its working folder), "
                "`{other}` another step's"
            ),
            shape=Strings,
            words="list of words",
        )
    )
    inputs: tuple[str, ...] = field(
        default=(),
        metadata=key(
            (
                "files (globs relative to matrix.yaml, or `{other}/FILE` of another step) whose "
                "change runs it again; list the generator script and what it reads"
            ),
            shape=Strings,
            words="list of globs",
        ),
    )
    outputs: tuple[str, ...] = field(
        metadata=key(
            (
                "the files it writes, relative to its output folder (no globs: ninja must know them"
                " before it runs); a declared output it does not write fails the step"
            ),
            shape=Strings,
            words="list of files",
        )
    )
    timeout: int = field(
        default=DEFAULT_GENERATE_TIMEOUT,
        metadata=key(
            "seconds it may run; past them it is stopped and the build fails naming it",
            shape={"type": "integer", "minimum": 1},
            words="seconds",
        ),
    )


DEFAULT_TEST_COMMAND: tuple[str, ...] = (
    "{python}",
    "-m",
    "pytest",
    "-q",
    "-rs",
    "-p",
    "no:cacheprovider",
    "--junitxml={junitxml}",
    "{path}",
)


@dataclass(frozen=True, kw_only=True)
class TestsConfig:
    """The payload's test suite, which ``wheelforge test`` runs against each torch."""

    path: Path = field(
        metadata=key("the test suite, run against the installed wheel", shape=str, words="folder")
    )
    # installed beside the wheel (pytest, numpy, ...)
    requires: tuple[str, ...] = field(
        default=("pytest",),
        metadata=key("installed beside the wheel", shape=Strings, words="list of requirements"),
    )
    # torch versions to install and test
    torch: tuple[str, ...] = field(
        metadata=key(
            "the torches to test under",
            shape=Scalars,
            words="list of versions",
            required=False,
            default_words="the `torch` list, or the lowest version of a range",
        )
    )
    # with {python}, {path} and {junitxml} filled in
    command: tuple[str, ...] = field(
        default=DEFAULT_TEST_COMMAND,
        metadata=key(
            "`{path}` is required; without `{junitxml}` only the exit code counts", shape=Strings
        ),
    )


@dataclass(frozen=True, kw_only=True)
class WheelVariantsConfig:
    """PEP 825 variant wheels (experimental: PEP 825 is a draft). Each variant's wheel carries a
    variant label in its name and ``*.dist-info/variant.json``; ``null`` names the arch set (or
    variant id) also published as the null variant, the fallback with no properties."""

    enabled: bool = field(
        default=True,
        metadata=key("write variant wheels (the same as `wheelforge build --wheel-variants`)"),
    )
    null: str | None = field(
        default=None,
        metadata=key(
            (
                "an arch set (with one variant; `--archs 7.5 9.0+PTX` builds one named "
                "`sm75-90ptx`) or a variant id whose build is also published as the null variant "
                "(label `null`, no properties)"
            ),
            shape=str,
        ),
    )

    def null_problem(self, arch_sets: tuple[ArchSet, ...]) -> str | None:
        """What is wrong with ``null`` for these arch sets: it must name one or a variant of
        one, or an arch set of --archs / TORCH_CUDA_ARCH_LIST (named like ``sm75-80-90ptx``)."""
        names = [a.name for a in arch_sets]
        if self.null is None or is_arch_list_id(self.null):
            return None
        if any(self.null == n or self.null.startswith(f"{n}-") for n in names):
            return None
        return (
            f"wheel-variants.null: '{self.null}' is neither an arch set ({', '.join(names)}) nor "
            "a variant of one; name the build to publish as the null variant"
        )


_ARCH_SETS: dict[str, Any] = {
    "anyOf": [
        ARCH_LIST_REF,
        {
            "type": "object",
            "propertyNames": pattern_schema(ARCH_SET_NAME_RE),
            "additionalProperties": ARCH_LIST_REF,
            "minProperties": 1,
        },
    ]
}


@dataclass(frozen=True, kw_only=True)
class Matrix:
    """The wheels to build of one project (docs/matrix.md): ``extensions`` holds every shared
    object, whether matrix.yaml wrote ``extension`` or ``extensions``."""

    path: Path = field(metadata=INTERNAL)
    root: Path = field(metadata=INTERNAL)  # the folder matrix.yaml is in; relative paths start here
    package: PackageConfig = field(
        metadata=key(
            "the distribution; optional beside a pyproject.toml with [project]",
            words="mapping",
            required=False,
        )
    )
    extension: ExtensionConfig | None = field(
        default=None,
        metadata=key(
            (
                "the compiled module, when the wheel has one (the same as `extensions` with one "
                "entry); write `extension` or `extensions`"
            ),
            shape=ExtensionConfig,
            words="mapping",
            default_words="-",
        ),
    )
    extensions: tuple[ExtensionConfig, ...] = field(
        default=(),
        metadata=key(
            (
                "the wheel's shared objects, each with its own name, sources and flags (and archs), all built "
                "for the same arch sets, toolkits and torch (one build.ninja per variant compiles "
                "them all)"
            ),
            shape=tuple[ExtensionConfig, ...],
            words="list of mappings",
            default_words="`[extension]`",
        ),
    )
    header_libraries: tuple[HeaderLibraryConfig, ...] = field(
        default=(),
        metadata=key(
            (
                "header libraries the sources include (CUTLASS, ...): their include folders join "
                "every compile, their version or commit the SBOM"
            ),
            name="header-libraries",
            shape=tuple[HeaderLibraryConfig, ...],
            words="list of mappings",
        ),
    )
    generate: tuple[GenerateStep, ...] = field(
        default=(),
        metadata=key(
            (
                "programs that write sources before compiling, in the build folder, run again only "
                "when their inputs change"
            ),
            shape=tuple[GenerateStep, ...],
            words="list of mappings",
        ),
    )
    torch: TorchSpec = field(
        metadata=key(
            (
                "the torch versions the wheel is for: a version, a range, or a list; the lowest is "
                "the stable-ABI target; `installed` (unstable ABI): the build Python's own torch, "
                "no pip; a wheel whose extensions are all `plain` (no torch used) requires it as "
                "written, with no floor, and may name torch below 2.9"
            ),
            shape=Scalars,
            words="version, range, list or `installed`",
        )
    )
    arch_sets: tuple[ArchSet, ...] = field(
        default=(),
        metadata=key(
            (
                "one wheel variant per arch set: a mapping of names to arch lists, or one arch list"
                " (named `default`); optional when `--archs` or `TORCH_CUDA_ARCH_LIST` gives the "
                "archs"
            ),
            name="arch-sets",
            shape=_ARCH_SETS,
            words="arch list, or mapping of names to arch lists",
        ),
    )
    # unstable: torch's full C++ API, one build per torch version
    abi: AbiName = field(
        default=STABLE.name,
        metadata=key(
            "`stable`: one binary for every torch from the lowest; `unstable`: one per torch"
        ),
    )
    python_abi: str = field(  # e.g. cp310
        default="cp310",
        metadata=key(
            "the oldest CPython of the abi3 wheel",
            name="python-abi",
            shape=pattern_schema(PYTHON_ABI_RE),
        ),
    )
    tests: TestsConfig | None = field(
        default=None,
        metadata=key("what `wheelforge test` runs", shape=TestsConfig, words="mapping"),
    )
    # toolkit releases ("13.0") or "auto", crossed with the arch sets
    cuda: tuple[str, ...] = field(
        default=("auto",),
        metadata=key(
            '`auto`, or CUDA releases (`"13.0"`); each arch set is built once per entry',
            shape=Scalars,
            words="`auto` or list of releases",
            default="auto",
        ),
    )
    # where the wheels of several CUDA releases go ("auto": CUDA_INDEX_AUTO)
    cuda_index: Literal["auto", "folders", "local-version"] = field(
        default="auto",
        metadata=key(
            "where wheels of several CUDA releases go: `folders` (one index folder per release, "
            "`dist/cu124/`, `dist/cu130/`, as torch publishes), `local-version` (one folder, the "
            "release in each wheel's local version, `+cu124`), `auto` (folders when the matrix's "
            "toolkits span CUDA majors, else local-version) (docs/toolkits.md)",
            name="cuda-index",
            words="`auto`, `folders` or `local-version`",
        ),
    )
    size_budget: int = field(  # bytes per wheel
        default=DEFAULT_SIZE_BUDGET,
        metadata=key(
            (
                "the largest wheel allowed: `100MiB`, `450MB`, `100KiB` or bytes; a wheel over it "
                "fails its variant (exit 4); `--size-budget` overrides it"
            ),
            name="size-budget",
            shape={
                "anyOf": [
                    {"type": "string", "pattern": SIZE_PATTERN},
                    {"type": "number", "exclusiveMinimum": 0},
                ]
            },
            words="size",
            default="100MiB",
        ),
    )
    memory_limit: int | None = field(  # bytes the compiles may use at once
        default=None,
        metadata=key(
            (
                "the memory the compiles may use at once: `24GiB`, `16GB` or bytes; the schedule "
                "keeps each moment's compiles under it (docs/performance.md); default: what the "
                "machine and its cgroups leave; `WHEELFORGE_MEMORY_LIMIT` and `--memory-limit` "
                "override it"
            ),
            name="memory-limit",
            shape={
                "anyOf": [
                    {"type": "string", "pattern": SIZE_PATTERN},
                    {"type": "number", "exclusiveMinimum": 0},
                ]
            },
            words="size",
        ),
    )
    wheel_variants: WheelVariantsConfig | None = field(
        default=None,
        metadata=key(
            (
                "**experimental** PEP 825 variant wheels instead of local version labels "
                "(docs/packaging.md)"
            ),
            name="wheel-variants",
            shape=WheelVariantsConfig,
            words="mapping",
        ),
    )

    compile_cache: str | None = field(
        default=None,  # settings.py defaults it, with the environment's
        metadata=key(
            (
                "the compile cache in front of every compiler: `auto` (ccache, else sccache, else "
                "none), `sccache`, `ccache` or `none`; `WHEELFORGE_COMPILE_CACHE` and "
                "`--compile-cache` override it (docs/performance.md)"
            ),
            name="compile-cache",
            shape={"enum": list(COMPILE_CACHES)},
            words="`auto`, `sccache`, `ccache` or `none`",
            default="auto",
        ),
    )

    def step(self, name: str) -> GenerateStep | None:
        """The generate step called *name*."""
        return next((s for s in self.generate if s.name == name), None)

    @property
    def uses_torch(self) -> bool:
        """Whether any binary of the wheel uses torch (ExtensionConfig.links_torch). A wheel
        whose binaries use none is not tied to a torch ABI: it requires the torch its matrix
        names as written, the project's own range, with no stable-ABI floor (configuration/abi.py)."""
        return any(e.links_torch for e in self.extensions)

    @property
    def variant_wheels(self) -> bool:
        """Whether the wheels are PEP 825 variant wheels."""
        return self.wheel_variants is not None and self.wheel_variants.enabled

    def torch_target_of(self, extension: ExtensionConfig) -> tuple[int, int]:
        """The stable-ABI torch *extension* compiles for: its own ``torch-target``, else the
        lowest torch (the one place this default is decided)."""
        return extension.torch_target or self.torch.target

    @property
    def limited_api_macro(self) -> str:
        """``Py_LIMITED_API`` for the python-abi floor: 0x030a0000 for cp310."""
        minor = int(self.python_abi[3:])
        return f"0x03{minor:02x}0000"

    @staticmethod
    def limited_api_of(extension: ExtensionConfig) -> str | None:
        """``Py_LIMITED_API`` of an extension's own ``limited-api``: ``3`` as written, ``3.9``
        as 0x03090000; None: the matrix's (limited_api_macro)."""
        value = extension.limited_api
        if value is None or value == "3":
            return value
        return f"0x03{int(value.partition('.')[2]):02x}0000"

    @property
    def requires_python(self) -> str:
        return self.package.requires_python or f">=3.{self.python_abi[3:]}"

    def with_wheel_variants(self, wheel_variants: WheelVariantsConfig | None) -> Matrix:
        return dataclasses.replace(self, wheel_variants=wheel_variants)
