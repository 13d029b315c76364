"""A package index in an output folder: the PEP 503 "simple" pages that let pip and uv install
from an index folder (``cu124/``, ``cu130/``: one per CUDA release, as torch's
download.pytorch.org/whl/cu124) with ``--index-url file:///…/dist/cu124`` or from any static
web server the folder is copied to.

``<folder>/index.html`` lists the projects, ``<folder>/<project>/index.html`` every wheel of
the project in the folder (those other jobs built and collected there count too), each linked
as ``../<wheel>#sha256=<digest>`` so an installer checks what it downloads."""

from __future__ import annotations

import html
import re
from pathlib import Path

from wheelforge.foundation import fsutil, writers

INDEX_HTML = "index.html"


def normalized(name: str) -> str:
    """A project's name as PEP 503 spells its page: runs of -_. as one -, lower case."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _page(title: str, links: list[tuple[str, str]]) -> str:
    body = "".join(
        f'    <a href="{html.escape(href)}">{html.escape(text)}</a><br/>\n' for href, text in links
    )
    return (
        '<!DOCTYPE html>\n<html>\n  <head><meta name="pypi:repository-version" content="1.0">'
        f"<title>{html.escape(title)}</title></head>\n  <body>\n{body}  </body>\n</html>\n"
    )


def write(folder: Path, project: str, wheel_name: str) -> Path:
    """The simple pages of *folder* for *project* (its wheels' file names start with
    *wheel_name*); returns the project page. Written only when changed (write_if_changed)."""
    page = folder / normalized(project) / INDEX_HTML
    wheels = sorted(folder.glob(f"{wheel_name}-*.whl"))
    links = [(f"../{w.name}#sha256={fsutil.sha256(w)}", w.name) for w in wheels]
    writers.write_if_changed(page, _page(f"Links for {project}", links))
    projects = sorted(p.parent.name for p in folder.glob(f"*/{INDEX_HTML}"))
    writers.write_if_changed(
        folder / INDEX_HTML, _page("Simple index", [(f"{p}/", p) for p in projects])
    )
    return page
