"""Every JSON document wheelforge prints or writes, one module per schema
(``check_schema.py`` for ``data/check.schema.json``), and the generator of the shipped
schemas: ``python -m wheelforge.documents.schemas``."""

from typing import TYPE_CHECKING

from wheelforge.foundation import lazy

if TYPE_CHECKING:
    from wheelforge.documents.schemas import KINDS

__all__ = ["KINDS"]
__getattr__ = lazy.exports(
    __name__,
    {
        "KINDS": "wheelforge.documents.schemas",
    },
)
