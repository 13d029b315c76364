"""What the module-init rule reads (rules/module_init.py): whether a Python extension module
exports a defined, global ``PyInit_<leaf>`` named after its file, without which ``import`` fails
with "dynamic module does not define module export function". Read from the ELF symbol tables,
in-process."""

from __future__ import annotations

import re
from dataclasses import dataclass

from wheelforge.binaries import elf
from wheelforge.foundation.errors import BinaryFormatError

# File names that only a Python extension module has (PEP 3149 / PEP 384 suffixes). A bare
# ``name.so`` may as well be a library loaded with torch.ops.load_library: not judged.
_MODULE_RE = re.compile(r"(?:^|/)([A-Za-z_]\w*)\.(?:abi3|cpython-[^/]+)\.so$")


@dataclass(frozen=True, kw_only=True)
class InitExport:
    leaf: str
    exported: bool  # a defined, global (or weak), default-visibility PyInit_<leaf>
    local: bool  # defined, but not exported (LOCAL binding or hidden visibility)

    @property
    def symbol(self) -> str:
        return f"PyInit_{self.leaf}"


def module_leaf(member: str) -> str | None:
    """``pkg/_C.abi3.so`` → ``_C``; None for a file that is not named like an extension module."""
    match = _MODULE_RE.search(member)
    return match[1] if match else None


def _symbol_state(image: elf.ElfImage, section: str, name: str) -> str | None:
    from wheelforge.binaries.symbols import symbol_table

    for sym in symbol_table(image, section) or []:
        if sym.name != name or not sym.defined:
            continue
        return "exported" if sym.exported else "local"
    return None


def init_export(image: elf.ElfImage, *, leaf: str) -> InitExport:
    from wheelforge.binaries.symbols import parse_errors

    try:
        dynamic = _symbol_state(image, ".dynsym", f"PyInit_{leaf}")
        # .symtab (every symbol, a table far larger) only explains a missing export.
        static = (
            None if dynamic == "exported" else _symbol_state(image, ".symtab", f"PyInit_{leaf}")
        )
    except parse_errors() as exc:
        raise BinaryFormatError(image.name, None, f"not a readable ELF file: {exc}") from None
    return InitExport(
        leaf=leaf,
        exported=dynamic == "exported",
        local=dynamic != "exported" and static is not None,
    )


def message(display: str, found: InitExport) -> str:
    """Why *display* will not import, and what to do about it."""
    if found.local:
        why = (
            f"defines {found.symbol} but does not export it (a local or hidden symbol: "
            "-fvisibility=hidden without PyMODINIT_FUNC, or a version script that hides it)"
        )
    else:
        why = f"does not define {found.symbol}"
    return (
        f"{display} {why}, so 'import' fails with \"dynamic module does not define module export "
        f'function ({found.symbol})"; define it with PyMODINIT_FUNC (or let wheelforge generate '
        "it: extension.module-init: true), and name the file after the module"
    )
