"""The type stubs pass `mypy --strict` on a small usage program (typing/usage.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_stubs_pass_mypy_strict(tmp_path: Path) -> None:
    usage = Path(__file__).parent / "typing" / "usage.py"
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path), str(usage)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert run.returncode == 0, run.stdout
    assert "Success" in run.stdout
