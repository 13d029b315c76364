"""Plan, then run: variants (arch set × toolkit [× torch]) turned into frozen plans and
their ninja files before anything compiles. The library entry is :func:`plan_all`
(planning/planner.py)."""

from typing import TYPE_CHECKING

from wheelforge.foundation import lazy

if TYPE_CHECKING:
    from wheelforge.planning.planner import plan_all

__all__ = ["plan_all"]
__getattr__ = lazy.exports(
    __name__,
    {
        "plan_all": "wheelforge.planning.planner",
    },
)
