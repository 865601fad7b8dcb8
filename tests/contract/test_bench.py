"""bench/run is a program CI runs (.ci/run): it must complete, whatever its figures say."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.common import REPO_ROOT


def test_bench_verify_row_completes_over_the_document_limit(tmp_path: Path) -> None:
    # The quick verify row's output is 24 MiB: over the 16 MiB limit for a document, which the
    # bench must not read its outputs through (it crashed there since that limit came in).
    out = tmp_path / "results.json"
    proc = subprocess.run(
        [str(REPO_ROOT / "bench" / "run"), "--quick", "--only", "verify", "--out", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path)},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert [r["name"] for r in rows] == ["verify 24 MB (random) vs raw sha256", "verify 24 MB (text) vs raw sha256"]
    assert all(r["data"]["mb"] == 24 for r in rows)


def test_ci_runs_the_quick_bench() -> None:
    script = (REPO_ROOT / ".ci" / "run").read_text()
    assert "set -euo pipefail" in script
    assert "bench/run --quick" in script
