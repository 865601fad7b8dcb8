"""The stdlib script a user would write instead of `git genjob ask` for a replay hit (issue 24).

Usage: python askreplay.py MODEL PROMPT_FILE OUT_FILE STORE_DIR   (exit 0: answered from the
store; exit 3: no recorded answer). `record(...)` writes one answer, as the script's miss path
would after calling the model.

It normalizes the prompt (CRLF to LF, trailing whitespace, blank lines at either end), takes the
sha256 of the model and prompt as the fingerprint, reads the last line of
`STORE_DIR/<fingerprint>.jsonl` and writes that line's answer: no signature, no history, no
sharing, which is what git-genjob adds for its price.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys


def normalize(text: str) -> str:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def fingerprint(model: str, prompt: str) -> str:
    return hashlib.sha256(
        json.dumps({"model": model, "prompt": normalize(prompt)}, sort_keys=True).encode()
    ).hexdigest()


def record(store: str, model: str, prompt: str, answer: str) -> None:
    os.makedirs(store, exist_ok=True)
    with open(os.path.join(store, fingerprint(model, prompt) + ".jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"answer": answer}) + "\n")


def main(argv: list[str]) -> int:
    model, prompt_file, out_file, store = argv
    with open(prompt_file, encoding="utf-8") as fh:
        fp = fingerprint(model, fh.read())
    try:
        with open(os.path.join(store, fp + ".jsonl"), "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 65536))
            last = fh.read().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    except FileNotFoundError:
        return 3
    with open(out_file, "w", encoding="utf-8") as fh:
        fh.write(json.loads(last)["answer"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
