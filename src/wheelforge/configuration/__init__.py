"""What the user asked for: matrix.yaml's model (keys, docs table and JSON schema derive from
it) and the settings chain (defaults, matrix, env, flags). The library entries are
:func:`load_matrix` and :func:`resolve` (to BuildSettings)."""

from typing import TYPE_CHECKING

from wheelforge.foundation import lazy

if TYPE_CHECKING:
    from wheelforge.configuration.matrix.load import load_matrix
    from wheelforge.configuration.settings import resolve

__all__ = ["load_matrix", "resolve"]
__getattr__ = lazy.exports(
    __name__,
    {
        "load_matrix": "wheelforge.configuration.matrix.load",
        "resolve": "wheelforge.configuration.settings",
    },
)
