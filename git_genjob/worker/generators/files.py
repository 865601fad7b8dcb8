"""Writing a model's answer into the scratch tree (paths checked; outside-allowed paths are named later)."""

from __future__ import annotations

import os

from git_genjob.documents.errors import BadInput
from git_genjob.documents.paths import check_path
from git_genjob.worker.generators.base import GenResult


def write_answer(scratch: str, files: dict[str, object]) -> GenResult:
    for path, content in files.items():
        try:
            check_path(path, what="answer path")
        except BadInput as exc:
            return GenResult("rejected", exc.message)
        if not isinstance(content, str):
            return GenResult("rejected", f"answer for {path} is not a string")
        target = os.path.join(scratch, path)
        if os.path.islink(target):
            os.unlink(target)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8") as fh:
            fh.write(content)
    return GenResult("ok")
