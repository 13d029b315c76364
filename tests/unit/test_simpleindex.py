"""An index folder's PEP 503 pages: what pip reads from --index-url file:///…/dist/cu124."""

from __future__ import annotations

import hashlib
from pathlib import Path

from wheelforge.packaging import simpleindex


def test_the_project_page_links_every_wheel_with_its_digest(tmp_path: Path) -> None:
    for name in ("demo_ops-1.0-cp310-abi3-manylinux_2_28_x86_64.whl", "demo_ops-1.1-cp310-abi3-manylinux_2_28_x86_64.whl"):  # fmt: skip
        (tmp_path / name).write_bytes(name.encode())
    (tmp_path / "other-1.0-py3-none-any.whl").write_bytes(b"x")
    page = simpleindex.write(tmp_path, "demo-ops", "demo_ops")
    assert page == tmp_path / "demo-ops" / "index.html"
    text = page.read_text()
    digest = hashlib.sha256(b"demo_ops-1.0-cp310-abi3-manylinux_2_28_x86_64.whl").hexdigest()
    assert f'href="../demo_ops-1.0-cp310-abi3-manylinux_2_28_x86_64.whl#sha256={digest}"' in text
    assert "demo_ops-1.1-" in text and "other-1.0" not in text
    assert '<a href="demo-ops/">demo-ops</a>' in (tmp_path / "index.html").read_text()
    assert simpleindex.normalized("Demo__Ops.x") == "demo-ops-x"
