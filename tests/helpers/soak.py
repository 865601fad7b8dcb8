"""One soak process: random submit / work / recover / apply / ask against a repository until a deadline.

Run by tests/contract/test_soak.py as `python -m tests.helpers.soak REPO KEY GEN SECONDS SEED LOG STUB_URL MODE`
(MODE `local`, or `remote` for a clone that publishes through `origin`). Every command is the
real CLI in its own process; each line of LOG is `op exit-code key`, and stderr that holds a
traceback is logged as `crash`.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import uuid


def genjob(repo: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "git_genjob", *args], cwd=repo, capture_output=True, text=True, timeout=120
    )


def main(argv: list[str]) -> int:
    repo, key, gen, seconds, seed, log_path, stub, mode = argv
    rng = random.Random(int(seed))
    remote = ["--remote", "origin"] if mode == "remote" else []
    deadline = time.monotonic() + float(seconds)
    with open(log_path, "a", encoding="utf-8") as log:

        def record(op: str, proc: subprocess.CompletedProcess[str], k: str = "-") -> None:
            crashed = "Traceback" in proc.stderr or proc.returncode not in (0, 1, 2, 3, 4)
            log.write(f"{'crash' if crashed else op} {proc.returncode} {k} {proc.stderr.strip()[-300:]!r}\n")
            log.flush()

        while time.monotonic() < deadline:
            op = rng.choices(["submit", "work", "recover", "apply", "ask"], [3, 3, 1, 2 if not remote else 0, 1])[0]
            if op == "submit":
                name = uuid.uuid4().hex[:12]
                args = ["submit", "--json", "-m", f"soak {name}", "--create", f"soak/{name}.txt"]
                proc = genjob(repo, *args, *(["--push"] if remote else []))
                k = json.loads(proc.stdout)["key"] if proc.returncode == 0 else "-"
                record("submit", proc, k)
            elif op == "work":
                args = ["work", "--generator", f"exec:{sys.executable} {gen}", "--signing-key", key, "--once"]
                record("work", genjob(repo, *args, "--lease", "20s", "--worker-id", f"soak{seed}", *remote))
            elif op == "recover":
                record("recover", genjob(repo, "recover", *remote))
            elif op == "apply":
                rows = json.loads(genjob(repo, "status", "--state", "done", "--json").stdout or "[]")
                if rows:
                    k = rng.choice(rows)["key"]
                    record("apply", genjob(repo, "apply", k), k)
            else:
                with open(f"{repo}/.git/soak-prompt-{seed}", "w", encoding="utf-8") as fh:
                    fh.write(f"question {rng.randrange(5)}\n")
                args = [
                    "ask",
                    "--endpoint",
                    f"openai:{stub}/v1",
                    "--model",
                    "m",
                    "--prompt-file",
                    f".git/soak-prompt-{seed}",
                ]
                record("ask", genjob(repo, *args, "--out-file", f".git/soak-answer-{seed}"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
