"""`wheelforge test --json`: every run with its counts, and why one did not pass."""

from __future__ import annotations

from wheelforge.documents.test_schema import torch_tests_document
from wheelforge.foundation.document import to_document
from wheelforge.packaging.testwheels import Outcome


def test_a_run_that_did_not_pass_says_why() -> None:
    ran = Outcome(env="torch 2.11.0", torch="2.11.0+cu130", cuda=False, variant="v-torch211",
                  status="passed", passed=3)  # fmt: skip
    pinned = Outcome(env="torch 2.11.0", torch="2.11.0+cu130", cuda=False, variant="v-torch212",
                     status="unavailable", detail="the wheel needs torch==2.12.*")  # fmt: skip
    runs = to_document(torch_tests_document([ran, pinned]))["runs"]
    assert isinstance(runs, list)
    assert [(r["status"], r["detail"]) for r in runs] == [
        ("passed", None),
        ("unavailable", "the wheel needs torch==2.12.*"),
    ]
