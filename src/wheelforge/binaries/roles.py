"""What a binary is to its wheel, inferred from what it holds rather than from its name alone:
the rules that apply to it depend on it (rule.py), and a name misleads. torchaudio ships its op
libraries as ``_torchaudio.abi3.so``, which torch.ops.load_library loads and no ``import`` ever
does; a file named ``libhelper.so`` may be an extension module loaded by path.

- bundled: a dependency auditwheel grafted into ``<name>.libs/``;
- program: an executable (ET_EXEC, or a program interpreter), run rather than loaded;
- extension: a Python extension module: it exports a module init function (``PyInit_*``,
  ``PyModExport_*``), or defines its ``PyInit_<leaf>`` without exporting it (an extension whose
  export is broken), or is named like a module (``*.abi3.so``, ``*.cpython-*.so``) and holds no
  sign of being anything else;
- library: any other ELF file of the wheel's own: an op library (it registers torch operators:
  STABLE_TORCH_LIBRARY's shims, or TORCH_LIBRARY's ``torch::Library``) that
  torch.ops.load_library loads, or a library its other binaries link or ctypes loads.

torch-abi-audit draws the line between extensions and the rest the same way (a defined module
init function); the op-registration sign is what keeps a file named like a module but never
imported, and that exports no init, from being judged as a broken extension.
"""

from __future__ import annotations

from dataclasses import dataclass

from wheelforge.binaries import elf, initexport
from wheelforge.binaries.facts import Role, file_role
from wheelforge.binaries.initexport import InitExport
from wheelforge.binaries.symbols import SymbolFacts

# Undefined symbols that register torch operators: the stable ABI's (STABLE_TORCH_LIBRARY,
# STABLE_TORCH_LIBRARY_IMPL) and the classic API's (TORCH_LIBRARY constructs a torch::Library;
# the older c10::RegisterOperators).
OP_REGISTRATION = (
    "torch_library_impl",
    "aoti_torch_library_init_impl",
    "aoti_torch_library_init_def",
    "aoti_torch_library_init_fragment",
    "aoti_torch_library_impl",
    "aoti_torch_library_def",
)
CLASSIC_REGISTRATION_PREFIXES = (
    "_ZN5torch7LibraryC1E",
    "_ZN5torch7LibraryC2E",
    "_ZN3c1017RegisterOperators",
)


@dataclass(frozen=True)
class RoleVerdict:
    """A binary's role and the evidence for it, in a few words (shown by ``check``)."""

    role: Role
    reason: str


def registers_ops(symbols: SymbolFacts) -> str | None:
    """The first undefined symbol that registers torch operators, if any."""
    for name in symbols.undefined:
        if name in OP_REGISTRATION or name.startswith(CLASSIC_REGISTRATION_PREFIXES):
            return name
    return None


def infer(member: str, symbols: SymbolFacts | None, init: InitExport | None) -> RoleVerdict:
    """The role of the ELF file *member* (a wheel member's path, or a file's), from its symbols
    and its module init export (None: not read, so by its name only)."""
    if elf.is_grafted(member):
        return RoleVerdict("bundled", "grafted into .libs/ by auditwheel")
    if symbols is None:
        role = file_role(member)
        return RoleVerdict(role, "by its name")
    if symbols.program:
        return RoleVerdict("program", "an executable (it has a program interpreter)")
    if symbols.module_inits:
        return RoleVerdict("extension", f"exports {symbols.module_inits[0]}")
    if init is not None and init.local:
        return RoleVerdict("extension", f"defines {init.symbol} without exporting it")
    if op := registers_ops(symbols):
        return RoleVerdict(
            "library", f"an op library: registers torch operators ({op}), exports no PyInit"
        )
    if leaf := initexport.module_leaf(member):
        return RoleVerdict("extension", f"named like the Python module {leaf}, no other sign")
    return RoleVerdict("library", "a shared library: no module init, no torch operators")
