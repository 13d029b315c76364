"""How a matrix key is described, and the grammar of its values: the field-metadata helper
``key`` and the YAML shapes (type forms for foundation/schemagen) the model
(matrix/model.py) is written in, and what modules outside the model need without loading it:
the patterns names and versions must match, the suffixes of source files (``init`` finds
sources by them), the compile caches (``--compile-cache``'s choices)."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

NAME_RE = re.compile(r"^([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9._-]*[A-Za-z0-9])$")  # PEP 508
MODULE_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
ARCH_SET_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.]*$")
PYTHON_ABI_RE = re.compile(r"^cp3([0-9]{1,2})$")
# Py_LIMITED_API as a version: "3" (Python's docs: the same as 3.2) or "3.N"
LIMITED_API_RE = re.compile(r"^3(?:\.([0-9]{1,2}))?$")
CUDA_RE = re.compile(r"^[0-9]{1,3}\.[0-9]{1,3}$")
# What ends a line for some parser: email's (\r, \n) and str.splitlines' others.
LINE_BREAK_RE = re.compile("[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
HEADER_LIBRARY_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]*$")
STEP_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
# A path that starts in a generate step's output folder: ``{kernels}/flash_*.cu``.
GENERATED_RE = re.compile(r"^\{([a-z][a-z0-9_]*)\}(?:/(.*))?$")
# What a source file may end in (extension.sources).
SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")

# YAML shapes (type forms for foundation/schemagen). A plain scalar is read as written, so
# `version: 1.10` (a YAML number) is the string '1.10'; a single value counts as a list of one.
Scalar = str | float
Strings = str | tuple[str, ...]
Scalars = Scalar | tuple[Scalar, ...]
# An arch list: "8.0 9.0+PTX", ["8.0", "9.0a"] or 9.0 (TORCH_CUDA_ARCH_LIST's grammar); named in
# the schema's $defs by configuration/matrix/schema.py.
ARCH_LIST: Any = Scalars
ARCH_LIST_REF: dict[str, Any] = {"$ref": "#/$defs/ArchList"}


def pattern_schema(regex: re.Pattern[str]) -> dict[str, Any]:
    return {"type": "string", "pattern": regex.pattern}


def key(
    doc: str,
    *,
    name: str | None = None,
    shape: Any = None,
    words: str | None = None,
    default: Any = dataclasses.MISSING,
    default_words: str | None = None,
    required: bool | None = None,
) -> dict[str, Any]:
    """A field's metadata as a matrix key.

    ``name``: the YAML key (default: the attribute); ``shape``: its YAML type form or schema
    when that is not the Python type; ``words``: the type as docs/matrix.md says it, where
    schema._words does not derive it (bool, a Literal, a tuple of str or Path);
    ``default``: the YAML spelling of the default, where the dataclass default is not it;
    ``default_words``: a default that is computed, in words.
    """
    meta: dict[str, Any] = {"doc": doc}
    if name is not None:
        meta["key"] = name
    if shape is not None:
        meta["schema"] = shape
    if words is not None:
        meta["words"] = words
    if default is not dataclasses.MISSING:
        meta["default"] = default
    if default_words is not None:
        meta["default_words"] = default_words
    if required is not None:
        meta["required"] = required
    return meta


INTERNAL: dict[str, Any] = {"internal": True}
COMPILE_CACHES = ("auto", "sccache", "ccache", "none")  # compile-cache, --compile-cache
