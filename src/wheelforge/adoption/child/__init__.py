"""What runs inside init's sandboxed setup.py child, in the build Python (which may not have
wheelforge): setup_child.py is started by its path (SCRIPT) and loads its siblings by their
paths; none of them imports wheelforge, and this file is not imported by the child."""

from __future__ import annotations

from pathlib import Path

SCRIPT = Path(__file__).with_name("setup_child.py")
