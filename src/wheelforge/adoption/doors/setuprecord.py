"""What a setup.py gave ``setup()`` and its Extension classes (the SetupRun of
record/setuprun.py: recorded by child/setup_child.py, or read statically by staticsetup.py), as
a CapturedBuild: the extensions' sources, folders and
flags sorted (flags.py), per-source archs from a replaced ninja writer, the packages, the
metadata, and what the script tried that init refused."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from wheelforge.adoption.doors import generators, packagedata
from wheelforge.adoption.doors.buildsteps import BuildSteps, ninja_rules
from wheelforge.adoption.doors.cmake import setup_configure
from wheelforge.adoption.doors.flags import (
    LIBRARY_FLAGS,
    SortedFlags,
    arch_text,
    merge_archs,
    sort_flags,
    split_folders,
)
from wheelforge.adoption.doors.projectpaths import ProjectPaths, rel_to
from wheelforge.adoption.doors.testsuite import find_tests
from wheelforge.adoption.record.captured import (
    CapturedBuild,
    CapturedExtension,
    CapturedSource,
    FrontDoor,
    ProjectMetadata,
)
from wheelforge.adoption.record.setuprun import ExtensionArgs, SetupArgs, SetupRun
from wheelforge.configuration.archs import ArchSpec
from wheelforge.foundation.errors import ConfigError

_DEFINE_RE = re.compile(r"^-[DU]\w")


class _Reading:
    def __init__(self, root: Path, record: SetupRun) -> None:
        self.root = root
        self.record = record
        self.hand: list[str] = []
        self.done: list[str] = []
        self.missing: list[str] = []
        self.package_folders: dict[str, str] = {}
        self.folders = ProjectPaths(root, hand=self.hand, done=self.done, missing=self.missing)

    # -- extensions ------------------------------------------------------------------------

    def paths(self, values: Iterable[str], what: str, *, must_exist: bool) -> list[str]:
        return self.folders.paths(values, what, must_exist=must_exist)

    def check_cuda(self, extensions: Iterable[CapturedExtension]) -> None:
        """No extension compiles CUDA though the project has .cu files: a setup.py that asks
        for a GPU before it builds its CUDA extensions."""
        built = [e for e in extensions if e.sources]
        if not built or any(cuda_sources(s.path for s in e.sources) for e in built):
            return
        if any(p for p in self.root.glob("**/*.cu") if "hip" not in p.as_posix()):
            names = ", ".join(str(e.name) for e in built)
            self.hand.append(
                f"{names} compile(s) no CUDA source, though the project has .cu files: its setup.py may choose "
                "CUDA by asking for a GPU (torch.cuda.is_available()); set the switch it reads (FORCE_CUDA=1, "
                "or --archs, which sets TORCH_CUDA_ARCH_LIST for it) and run init again"
            )

    def check_sources(self, label: str, sources: list[str]) -> None:
        """An extension with no sources: another tool builds it."""
        configure = setup_configure(self.root, self.record.refused) if not sources else None
        if not sources and configure is not None:
            lists = (configure.folder / "CMakeLists.txt").relative_to(self.root).as_posix()
            self.done.append(
                f"{label} has no sources: setup.py's build_ext ({configure.where}) hands its "
                f"build to CMake ({lists})"
            )
        elif not sources and (self.root / "CMakeLists.txt").is_file():
            self.done.append(
                f"{label} has no sources: setup.py hands its build to CMake (CMakeLists.txt)"
            )
        elif not sources:
            # A matrix entry without sources would be refused (extension.sources is empty):
            # say now what builds it, and where its CMake project lies, in one line.
            builder = next(
                (
                    f"{c.name}={c.class_name} ({c.where})"
                    for c in self.record.cmdclass
                    if c.name == "build_ext"
                ),
                "a cmdclass of setup.py",
            )
            found = sorted(
                p.relative_to(self.root).as_posix() for p in self.root.glob("*/CMakeLists.txt")
            )
            where = f"; its CMake project is {', '.join(found)}" if found else ""
            raise ConfigError(
                f"{self.root}: setup.py's {label} lists no sources: {builder} builds it another way"
                f"{where}. wheelforge init reads a CMake project at the project's top (--from cmake)"
                " or a setup.py that lists its sources; write matrix.yaml with extension.sources "
                "by hand (docs/your-extension.md)"
            )

    def include_dirs(self, ext: ExtensionArgs, label: str, flagged: list[str]) -> list[str]:
        """Its include_dirs and the folders its compile flags name with ``-I``, relative to the
        project (a copy of it in another folder builds)."""
        given = self.paths(ext.include_dirs, f"{label}: include_dirs", must_exist=False)
        from_flags = self.paths(flagged, f"{label}: its -I flags", must_exist=False)
        if from_flags:
            self.done.append(
                f"{label}: the -I folders of its compile flags written as include-dirs "
                f"({', '.join(from_flags[:3])}{' ...' if len(from_flags) > 3 else ''}), relative "
                "to the project"
            )
        folders = list(dict.fromkeys([*given, *from_flags]))
        for folder in folders:
            if not (self.root / folder).is_dir():
                self.hand.append(
                    f"{label}: include folder '{folder}' does not exist (a git submodule not checked out? "
                    "'git submodule update --init'); the build needs it"
                )
        return folders

    def flags(
        self, ext: ExtensionArgs, label: str, sources: list[str]
    ) -> tuple[SortedFlags, SortedFlags, list[str], list[str]]:
        """The C++ and nvcc flags sorted (torch's own nvcc flags first, as BuildExtension puts
        them), the defines both compilers get, and the include folders the flags name."""
        kind = ext.kind
        macros = [
            f"-D{name}" + (f"={value}" if value is not None else "")
            for name, value in ext.define_macros
        ] + [f"-U{m}" for m in ext.undef_macros]
        cxx_includes, cxx_raw = split_folders(list(ext.cxx_args))
        nvcc_includes, nvcc_raw = split_folders(list(ext.nvcc_args))
        cuda = kind == "CUDAExtension" or bool(cuda_sources(sources))
        torch_flags = list(self.record.torch_nvcc_flags) if kind == "CUDAExtension" else []
        if torch_flags and cuda_sources(sources):
            self.done.append(
                f"{label}: kept {' '.join(torch_flags)}: torch's BuildExtension puts them "
                "before every nvcc compile"
            )
        cxx, nvcc = sort_flags(cxx_raw), sort_flags([*torch_flags, *nvcc_raw] if cuda else [])
        self.say_sorted(label, nvcc, cxx)
        shared = (f for f in cxx.kept if _DEFINE_RE.match(f) and (f in nvcc.kept or not cuda))
        includes = list(dict.fromkeys([*cxx_includes, *(nvcc_includes if cuda else [])]))
        return cxx, nvcc, list(dict.fromkeys([*macros, *shared])), includes

    def link_inputs(self, ext: ExtensionArgs, label: str) -> None:
        for key, why, given in (
            ("extra_objects", "objects linked in", ext.extra_objects),
            ("runtime_library_dirs", "run-time library folders", ext.runtime_library_dirs),
        ):
            if given:
                self.hand.append(
                    f"{label}: {key} ({why}) {given}: add them to link-flags if the build "
                    "needs them"
                )
        if ext.dlink and not any(
            f.startswith(("-rdc=true", "--relocatable-device-code=true")) or f in ("-dc", "-rdc")
            for f in ext.nvcc_args
        ):
            self.hand.append(
                f"{label}: dlink=True asks for a device-link step, which wheelforge runs when "
                "nvcc-flags ask for relocatable device code (-rdc=true or -dc); they do not"
            )

    def extension(self, ext: ExtensionArgs, ninja: str | None) -> CapturedExtension:
        label = ext.label
        sources = self.paths(ext.sources, f"{label}: sources", must_exist=True)
        self.check_sources(label, sources)
        cxx, nvcc, defines, flagged = self.flags(ext, label, sources)
        link_dirs, link_flags = split_folders(list(ext.extra_link_args), LIBRARY_FLAGS)
        per_source = self.ninja_archs(ninja, label) if ninja else {}
        archs = merge_archs(nvcc.archs, *per_source.values()) if per_source else nvcc.archs
        self.link_inputs(ext, label)
        return CapturedExtension(
            name=ext.name,
            kind=ext.kind,
            where=ext.where,
            sources=tuple(
                CapturedSource(path=s, archs=self.own_archs(per_source.get(s), archs))
                for s in sources
            ),
            include_dirs=tuple(self.include_dirs(ext, label, flagged)),
            defines=tuple(defines),
            cxx_flags=tuple(f for f in cxx.kept if f not in defines),
            nvcc_flags=tuple(f for f in nvcc.kept if f not in defines),
            archs=archs,
            libraries=ext.libraries,
            library_dirs=tuple(
                dict.fromkeys(
                    self.paths(
                        [*ext.library_dirs, *link_dirs],
                        f"{label}: library_dirs",
                        must_exist=False,
                    )
                )
            ),
            link_flags=tuple(link_flags),
            torch_target=nvcc.torch_target or cxx.torch_target,
            limited_api=cxx.limited_api or nvcc.limited_api,
        )

    def say_sorted(self, label: str, nvcc: SortedFlags, cxx: SortedFlags) -> None:
        if nvcc.archs:
            self.done.append(
                f"{label}: its nvcc arch flags name {arch_text(nvcc.archs)}: written as archs "
                "(arch-sets, unless --archs), not as nvcc flags"
            )
        owned = list(dict.fromkeys([*nvcc.owned, *cxx.owned]))
        if owned:
            self.done.append(
                f"{label}: left out {', '.join(owned)}: wheelforge sets these itself (from the "
                "matrix)"
            )
        for flag in dict.fromkeys([*nvcc.problems, *cxx.problems]):
            self.hand.append(
                f"{label}: '{flag}' names no fixed arch (it depends on the machine or the "
                "toolkit); choose the arch sets"
            )
        if nvcc.ptx_only:
            self.done.append(
                f"{label}: {', '.join(nvcc.ptx_only)} (PTX without SASS) written as +PTX "
                "entries, which add SASS too"
            )

    def ninja_archs(self, ninja: str, label: str) -> dict[str, tuple[ArchSpec, ...]]:
        """Each source's archs from the rules of the project's own ninja writer."""
        per_source = ninja_rules(ninja)
        out: dict[str, tuple[ArchSpec, ...]] = {}
        for source, command in per_source.items():
            rel, inside = rel_to(self.root, source)
            if inside and rel is not None and rel.endswith(".cu"):  # archs are nvcc's alone
                out[rel] = sort_flags(command).archs
        if out:
            where = self.record.ninja_replaced_at or "setup.py"
            self.done.append(
                f"{label}: setup.py replaces torch's ninja writer ({where}); each source's "
                "archs were read from the rules it writes"
            )
        return out

    @staticmethod
    def own_archs(
        mine: tuple[ArchSpec, ...] | None, everyone: tuple[ArchSpec, ...]
    ) -> tuple[ArchSpec, ...] | None:
        return mine if mine and mine != everyone else None

    # -- setup() -----------------------------------------------------------------------------

    def metadata(self, args: SetupArgs) -> ProjectMetadata:
        deps, torch_req = [], None
        for line in args.install_requires:
            dep = line.split(" #", 1)[0].strip()
            if not dep or dep.startswith("#"):
                continue  # setuptools skips blank and comment lines (a requirements.txt read whole)
            try:
                req = Requirement(dep)
            except InvalidRequirement:
                self.hand.append(f"install_requires: '{dep}' is not a requirement; left out")
                continue
            if canonicalize_name(req.name) == "torch":
                torch_req = dep
            else:
                deps.append(dep)
        keywords = args.keywords
        return ProjectMetadata(
            name=args.name,
            version=args.version,
            summary=args.description,
            license=args.license,
            requires_python=args.python_requires,
            dependencies=tuple(deps),
            torch_requirement=torch_req,
            author=args.author,
            author_email=args.author_email,
            maintainer=args.maintainer,
            maintainer_email=args.maintainer_email,
            url=args.url,
            download_url=args.download_url,
            project_urls=args.project_urls,
            classifiers=args.classifiers,
            keywords=tuple(
                k.strip() for k in keywords.split(",") if k.strip()
            )  # setuptools splits a string on commas
            if isinstance(keywords, str)
            else keywords,
            extras=args.extras_require,
            readme_sha256=args.long_description_sha256,
        )

    def modules(self, args: SetupArgs) -> tuple[str, ...]:
        """setup(py_modules=...): each module's file, where setuptools finds it."""
        base = dict(args.package_dir).get("", ".")
        out = []
        for name in args.py_modules:
            rel, inside = rel_to(self.root, os.path.join(base, *name.split(".")) + ".py")  # noqa: PTH118
            if inside and rel is not None and (self.root / rel).is_file():
                out.append(rel)
            else:
                self.hand.append(
                    f"py_modules: '{name}' has no file at {rel}; name it in package.modules"
                )
        return tuple(out)

    def packages(self, args: SetupArgs) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The top-level package folders and the package-data globs."""
        names = args.packages
        dirs = dict(args.package_dir)
        base = dirs.get("", ".")
        folders: dict[str, str] = {}
        for name in names:
            if name.rpartition(".")[0] in names:
                continue  # a subpackage: wheelforge packs a package's folder whole
            folder = dirs.get(name, os.path.join(base, *name.split(".")))  # noqa: PTH118
            rel, inside = rel_to(self.root, folder)
            if not inside or rel is None or not (self.root / rel / "__init__.py").is_file():
                self.hand.append(
                    f"packages: '{name}' has no folder with an __init__.py at {folder}; name "
                    "its folder"
                )
                continue
            folders[name] = rel
        self.package_folders = folders
        shipped = self.record.package_files
        if shipped is not None:  # setuptools' own build_py listed them: exactly those
            data_globs, elsewhere = packagedata.package_data_globs(
                str(self.root), folders, list(shipped)
            )
            if data_globs:
                self.done.append(
                    f"package-data: the {len(shipped)} files setuptools ships beside the modules "
                    "(package_data, MANIFEST.in with include_package_data), as its build_py "
                    "lists them"
                )
            for file in elsewhere[:3]:
                self.hand.append(
                    f"package data {file} lies in no package folder of package.packages; name "
                    "its package's folder there"
                )
            self._unsupported(args)
            return tuple(folders.values()), data_globs
        if self.record.package_files_error:
            self.hand.append(
                "package data: setuptools could not list it "
                f"({self.record.package_files_error}); package-data has setup(package_data=) "
                "only: check what the wheel needs"
            )
        data: list[str] = []
        for pkg, globs in args.package_data:
            top = next((t for t in folders if pkg == t or pkg.startswith(t + ".")), None)
            prefix = "/".join(pkg.split(".")[1:]) if top and pkg != top else ""
            data += [f"{prefix}/{g}" if prefix else g for g in globs]
        if args.include_package_data and (self.root / "MANIFEST.in").is_file():
            self.hand.append(
                "include_package_data: the files MANIFEST.in adds to the packages were not "
                "listed (setup.py was not run); add them to package-data"
            )
        self._unsupported(args)
        return tuple(folders.values()), tuple(dict.fromkeys(data))

    def _unsupported(self, args: SetupArgs) -> None:
        """The setup() arguments matrix.yaml has no key for, each a note for the hand."""
        for key, why, given in (
            ("entry_points", "entry points", args.entry_points),
            ("scripts", "scripts", args.scripts),
            ("data_files", "data files outside the packages", args.data_files),
        ):
            if given:
                self.hand.append(
                    f"setup({key}={given!r}): matrix.yaml has no key for {why}; leave them "
                    "out or move them into a package"
                )


def cuda_sources(sources: Iterable[str]) -> list[str]:
    return [s for s in sources if s.endswith(".cu")]


def read_record(root: Path, record: SetupRun, *, front_door: FrontDoor) -> CapturedBuild:
    """A CapturedBuild from the setup.py capture's record (the child's, or the static reading's)."""
    reading = _Reading(root, record)
    args = record.setup or SetupArgs()
    ninja = dict(record.ninja)
    extensions = tuple(reading.extension(e, ninja.get(e.name or "")) for e in record.extensions)
    reading.check_cuda(extensions)
    generated_sources = generators.from_record(root, record, extensions)
    extensions = generated_sources.extensions
    packages, package_data = reading.packages(args)
    exclude = packagedata.unpacked_modules(str(root), reading.package_folders, args.packages)
    if exclude:
        reading.done.append(
            "package.exclude: the Python files in the package folders that are in none of "
            "setup()'s packages (setuptools leaves them out of its wheel)"
        )
    steps = BuildSteps(root, record)
    generated = steps.extra_files(reading.package_folders, extensions)
    package_data += tuple(
        g.path.rpartition("/")[2] for g in generated if not g.path.endswith(".py")
    )
    torch = record.torch
    if torch is not None and torch.shown_as:
        reading.done.append(
            f"torch {torch.version} (a CPU build) was shown to setup.py as "
            f"{torch.shown_as}, the CUDA build wheelforge compiles with"
        )
    if torch is not None and not torch.real:
        reading.done.append(
            f"the build Python has no torch: setup.py saw wheelforge's stand-in torch {torch.version}"
            + (f" ({record.torch_error})" if record.torch_error else "")
        )
    for name, where in stand_in_misses(record):
        reading.hand.append(
            f"{where or 'setup.py'} asked for {shown_name(name)}, which the stand-in torch lacks (it went "
            "on without it); pass --python with a Python that has torch to see what it does then"
        )
    reading.done += generators.writes_said(record)
    return CapturedBuild(
        root=root,
        front_door=front_door,
        extensions=extensions,
        metadata=reading.metadata(args),
        packages=packages,
        package_data=package_data,
        exclude=exclude,
        modules=reading.modules(args),
        torch_seen=torch.version.split("+")[0] if torch is not None and torch.real else None,
        tests=find_tests(root),
        refusals=tuple(steps.refusals()),
        generated=tuple(generated),
        missing=tuple(dict.fromkeys(reading.missing)),
        steps=generated_sources.steps,
        hand=tuple(reading.hand + steps.hand) + generated_sources.hand,
        done=tuple(reading.done + steps.done) + generated_sources.done,
    )


def stand_in_misses(record: SetupRun) -> list[tuple[str, str]]:
    """The names setup.py asked of the stand-in torch that it lacks, each once, with the line
    that first asked (``setup.py:12``; "" where no line of the project's was on the stack)."""
    seen: dict[str, str] = {}
    for miss in record.stub_missing:
        seen.setdefault(miss.name, miss.where)
    return list(seen.items())


def shown_name(name: str) -> str:
    """A name the stand-in lacks, as the screen says it: ``the module torch.nn`` for an import,
    ``torch.cuda.nccl`` for an attribute."""
    return f"the module {name.removeprefix('import ')}" if name.startswith("import ") else name
