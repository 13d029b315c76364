"""``wheelforge init``: a project's own build adopted into a matrix.yaml. The library entry is
:func:`init_project` (adoption/adopt.py); the work is in four rooms.

- doors/: the front doors, each reading how the project really builds into the one
  :class:`~wheelforge.adoption.record.captured.CapturedBuild`: setup.py run (setupcapture.py,
  which starts the child) or read (staticsetup.py, setuppy.py), CMake's compile commands
  (cmake.py), a kernel-builder build.toml (buildtoml.py), or the bare sources (sourcescan.py);
- child/: what runs inside the sandboxed setup.py child, in the build Python (setup_child.py
  and the files it loads by path: its guards, its stand-in torch, its package-data listing);
  it imports nothing from wheelforge;
- record/: the typed records: the child's JSON document parsed and checked once
  (record/setuprun.py: a SetupRun, also what the static reading gives), and the CapturedBuild
  every door gives;
- writer/: the CapturedBuild as a commented matrix.yaml (writer/matrixfile.py), read back by
  load_matrix before it is written.

Inside the package the rooms point one way: record < doors < writer; child stands alone."""

from typing import TYPE_CHECKING

from wheelforge.foundation import lazy

if TYPE_CHECKING:
    from wheelforge.adoption.adopt import InitRequest, init_project

__all__ = ["InitRequest", "init_project"]
__getattr__ = lazy.exports(
    __name__,
    {"init_project": "wheelforge.adoption.adopt", "InitRequest": "wheelforge.adoption.adopt"},
)
