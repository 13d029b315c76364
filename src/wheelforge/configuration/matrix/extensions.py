"""Reading the extensions: ``extension`` (one) or ``extensions`` (a list), never both, and each
one's keys whose conversion is special (its name, sources and their arch limits, include
folders, flags, size budget); the checks across the list (no two shared objects at one path, no
module init for a library). The rest of matrix.yaml is read by configuration/matrix/load.py, which builds
on this."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

import yaml

from wheelforge.configuration.archs import ArchSpec, parse_arch_list
from wheelforge.configuration.bytesizes import parse_size
from wheelforge.configuration.matrix import yamlio
from wheelforge.configuration.matrix.keys import (
    GENERATED_RE,
    LIMITED_API_RE,
    MODULE_RE,
    SOURCE_SUFFIXES,
)
from wheelforge.configuration.matrix.model import ExtensionConfig, SourceSpec
from wheelforge.configuration.matrix.modelreader import KeyReader, ModelReader, Section
from wheelforge.foundation import readers
from wheelforge.foundation.errors import ConfigError


class ExtensionsReader(ModelReader):
    """The extensions' keys, and the list's checks."""

    # Globs of generate steps' outputs ({step}/GLOB) the sources name: (node, glob, where),
    # collected while the extensions are read, checked once the steps are (steps.py).
    generated_refs: list[tuple[yaml.Node, str, str]]

    def readers(self, model: type) -> Mapping[str, KeyReader]:
        if model is ExtensionConfig:
            return {
                "name": self.checked_scalar(
                    lambda v: bool(MODULE_RE.match(v)),
                    "must be a module name, e.g. 'mypkg._C' (or 'mypkg_cuda' at the top level)",
                ),
                "sources": self.sources,
                "archs": self.parsed(lambda text, w: parse_arch_list(text, source=w)),
                "torch_target": self.parsed(parse_torch_target),
                "limited_api": self.checked_scalar(
                    lambda v: bool(LIMITED_API_RE.match(v)),
                    "must be a limited API version, '3' (as CMake's USE_SABI 3 writes it) or "
                    "'3.N', e.g. '3.8'",
                ),
                "include_dirs": self.checked_list(self.include_folder),
                "size_budget": self.size,
                "cxx_flags": self.flag_list,
                "nvcc_flags": self.flag_list,
                "link_flags": self.flag_list,
                "libraries": self.flag_list,
                "library_dirs": self.checked_list(self.folder),
            }
        if model is SourceSpec:
            return {"archs": self.parsed(lambda text, w: parse_arch_list(text, source=w))}
        return super().readers(model)

    def size(self, node: yaml.Node, where: str) -> int | None:
        return self.parsed(lambda text, w: parse_size(text, where=w))(node, where)

    def include_folder(self, node: yaml.Node, value: str, where: str) -> Path | None:
        """A folder of the project, or ``{step}`` (a generate step's output folder, checked
        against the steps once all are read): kept relative, as written."""
        if GENERATED_RE.match(value):
            return Path(value)
        return self.folder(node, value, where)

    def sources(self, node: yaml.Node, where: str) -> tuple[SourceSpec, ...] | None:
        """Each glob must match files, all of them sources; None if none is good. A glob of a
        generate step's outputs (``{step}/GLOB``) is checked once the steps are read."""
        if isinstance(node, yaml.SequenceNode) and not node.value:
            # ninja is given a build edge without inputs (`build.ninja: expected target name`)
            self.problems.add(
                node,
                f"{where} is empty; list the files the extension compiles (globs such as "
                "'csrc/*.cu'), or remove the extension",
            )
            return None
        out = []
        for item, pattern, archs, flags in self.source_entries(node, where):
            if GENERATED_RE.match(pattern):
                self.generated_refs.append((item, pattern, where))
                out.append(SourceSpec(pattern=pattern, archs=archs, flags=flags))
                continue
            if Path(pattern).is_absolute():
                self.problems.add(
                    item, f"{where}: '{pattern}' must be relative to {self.problems.display}"
                )
                continue
            matches = list(self.root.glob(pattern))
            if not matches:
                self.problems.add(item, f"{where}: '{pattern}' matches no file")
                continue
            if not any(m.is_file() for m in matches):
                self.problems.add(
                    item,
                    f"{where}: '{pattern}' names a folder, not source files; "
                    f"write a glob such as '{pattern.rstrip('/')}/*.cu'",
                )
                continue
            if odd := next(((m, k) for m in matches if (k := _not_regular(m))), None):
                # A compiler given a FIFO waits for the build's whole deadline, a device never ends.
                self.problems.add(
                    item,
                    f"{where}: '{pattern}' matches {odd[0].name}, which is {odd[1]}; "
                    "sources must be regular files",
                )
                continue
            if undecodable := next((m for m in matches if not _is_utf8(m)), None):
                # ninja's file, the compile cache's keys and the report are UTF-8 (a traceback)
                shown = os.fsencode(undecodable).decode("utf-8", errors="backslashreplace")
                self.problems.add(
                    item,
                    f"{where}: '{pattern}' matches {shown}, whose name is not UTF-8 (the bytes "
                    "written \\xNN); rename it",
                )
                continue
            bad = [m for m in matches if m.is_file() and m.suffix not in SOURCE_SUFFIXES]
            if bad:
                self.problems.add(
                    item,
                    f"{where}: '{pattern}' matches {bad[0].name}, which is not a source ({', '.join(SOURCE_SUFFIXES)})",
                )
                continue
            out.append(SourceSpec(pattern=pattern, archs=archs, flags=flags))
        return tuple(out) or None

    def source_entries(
        self, node: yaml.Node, where: str
    ) -> list[tuple[yaml.Node, str, tuple[ArchSpec, ...] | None, tuple[str, ...]]]:
        """``sources``: globs, or mappings ``{files: GLOB, archs: LIST, flags: LIST}`` limiting
        their archs or adding flags of their own."""
        if not isinstance(node, yaml.SequenceNode):
            return [(n, v, None, ()) for n, v in yamlio.string_list(node, self.problems, where)]
        out: list[tuple[yaml.Node, str, tuple[ArchSpec, ...] | None, tuple[str, ...]]] = []
        for i, item in enumerate(node.value):
            entry_where = f"{where}[{i}]"
            if not isinstance(item, yaml.MappingNode):
                value = self.scalar(item, entry_where)
                if value is not None:
                    out.append((item, value, None, ()))
                continue
            read = self.section(item, SourceSpec, entry_where)
            spec = self.build(SourceSpec, read)
            if read is not None and spec is not None:
                out.append((read.items["files"][1], spec.pattern, spec.archs, spec.flags))
        return out

    def extension_list(self, read: Section) -> tuple[ExtensionConfig, ...]:
        """``extension`` (one) or ``extensions`` (a list), never both: what goes into the
        model's ``extensions``. Two of them may not share a name nor land at one path."""
        one, many = read.values.get("extension"), read.values.get("extensions")
        if "extension" in read.items and "extensions" in read.items:
            self.problems.add(
                read.items["extensions"][0],
                "the top level has both 'extension' and 'extensions'; write one extension under "
                "'extension', or every one of them as a list under 'extensions'",
            )
            return ()
        if "extension" not in read.items and "extensions" not in read.items:
            return ()  # a pure-Python wheel (py3-none-any): nothing to compile
        found: tuple[ExtensionConfig, ...] = (one,) if one is not None else (many or ())
        if "extensions" in read.items and not many and not self.problems.items:
            self.problems.add(
                read.items["extensions"][1], "extensions is empty; list at least one extension"
            )
        self.check_libraries_have_no_init(read, found)
        seen: dict[str, int] = {}
        for i, extension in enumerate(found):
            wheel_path = extension.wheel_path(extension.leaf)
            if wheel_path in seen:
                self.problems.add(
                    read.items["extensions"][1],
                    f"extensions[{i}]: '{extension.name}' lands where extensions[{seen[wheel_path]}] "
                    f"does ({wheel_path}.*); give each shared object its own name",
                )
            seen.setdefault(wheel_path, i)
        read.values["extensions"] = found
        return found

    def check_libraries_have_no_init(
        self, read: Section, found: tuple[ExtensionConfig, ...]
    ) -> None:
        """``module-init: true`` on a library of operators asks for what it cannot have."""
        key = "extension" if "extension" in read.items else "extensions"
        node = read.items[key][1]
        items = node.value if isinstance(node, yaml.SequenceNode) else [node]
        for i, (item, extension) in enumerate(zip(items, found, strict=False)):
            init = yamlio.key_node(item, "module-init")
            if extension.kind != "module" and init is not None and extension.module_init:
                where = key if key == "extension" else f"extensions[{i}]"
                loaded = (
                    "torch.ops.load_library" if extension.kind == "library" else "ctypes or cffi"
                )
                self.problems.add(
                    init,
                    f"{where}.module-init: a library (kind: {extension.kind}) is loaded with "
                    f"{loaded} and has no PyInit; remove module-init, or make it kind: module",
                )


def parse_torch_target(text: str, where: str) -> tuple[int, int]:
    """``torch-target``: a torch release as ``major.minor`` (what TORCH_TARGET_VERSION encodes)."""
    match = _TARGET_RE.match(text.strip())
    if match is None:
        raise ConfigError(
            f"{where}: '{text}' is not a torch release as major.minor (the target version has no "
            "patch); write e.g. '2.10'"
        )
    return (int(match[1]), int(match[2]))


_TARGET_RE = re.compile(r"^(\d{1,3})\.(\d{1,3})$")


def _not_regular(path: Path) -> str | None:
    """What *path* is when it is neither a regular file nor a folder (a FIFO, a device, a
    socket, a link to nothing), else None."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return None if stat.S_ISDIR(mode) else readers.kind_of(mode)


def _is_utf8(path: Path) -> bool:
    """Whether *path*'s name is text (a name of other bytes reads as surrogate escapes)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
