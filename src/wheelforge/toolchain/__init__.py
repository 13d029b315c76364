"""The tools a build runs: CUDA toolkits found or provisioned, torch probed, test
environments, the compile cache. The library entry is :func:`discover` (toolchain/toolkits.py);
toolchain/catalog.py lists and installs toolkits for ``wheelforge toolkit``."""

from typing import TYPE_CHECKING

from wheelforge.foundation import lazy

if TYPE_CHECKING:
    from wheelforge.toolchain.catalog import list_toolkits
    from wheelforge.toolchain.toolkits import discover

__all__ = ["discover", "list_toolkits"]
__getattr__ = lazy.exports(
    __name__,
    {
        "discover": "wheelforge.toolchain.toolkits",
        "list_toolkits": "wheelforge.toolchain.catalog",
    },
)
