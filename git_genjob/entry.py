"""Process entry: the hook fast path without click, everything else through cli."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    from git_genjob.cli import run

    return run(args)
