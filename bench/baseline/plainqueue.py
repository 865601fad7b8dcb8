"""The plain-file script a user would write instead of git-genjob (the seed flow), as the baseline.

A job is a JSON file in queue/; a worker claims it with rename() into claimed/ (the lock);
the receipt is unsigned JSON naming the sha256 of each output; verify re-hashes the outputs;
apply copies them into the work tree. With `durable=True` every file written is fsynced and
so is its directory, as a script that wants to survive a crash has to.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil


class PlainQueue:
    def __init__(self, root: str, worktree: str, durable: bool = True):
        self.root, self.worktree, self.durable = root, worktree, durable
        for d in ("queue", "claimed", "outputs", "receipts"):
            os.makedirs(os.path.join(root, d), exist_ok=True)

    def _write(self, path: str, data: bytes) -> None:
        tmp = path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
            if self.durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.rename(tmp, path)
        if self.durable:
            self._sync_dir(os.path.dirname(path))

    def _sync_dir(self, path: str) -> None:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def submit(self, key: str, instruction: str, paths: list[str]) -> str:
        inputs = {}
        for p in paths:
            with open(os.path.join(self.worktree, p), "rb") as fh:
                inputs[p] = hashlib.sha256(fh.read()).hexdigest()
        job = {"key": key, "instruction": instruction, "inputs": inputs}
        self._write(os.path.join(self.root, "queue", key + ".json"), json.dumps(job, sort_keys=True).encode())
        return key

    def claim_next(self) -> dict[str, object] | None:
        for name in sorted(os.listdir(os.path.join(self.root, "queue"))):
            src = os.path.join(self.root, "queue", name)
            dst = os.path.join(self.root, "claimed", name)
            try:
                os.rename(src, dst)  # the lock: exactly one renamer wins
            except FileNotFoundError:
                continue
            if self.durable:
                self._sync_dir(os.path.dirname(dst))
            with open(dst, "rb") as fh:
                job: dict[str, object] = json.load(fh)
            return job
        return None

    def receipt(self, job: dict[str, object], outputs: dict[str, bytes]) -> None:
        key = str(job["key"])
        out_dir = os.path.join(self.root, "outputs", key)
        os.makedirs(out_dir, exist_ok=True)
        digests = {}
        for path, data in outputs.items():
            target = os.path.join(out_dir, path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            self._write(target, data)
            digests[path] = hashlib.sha256(data).hexdigest()
        doc = {"key": key, "status": "ok", "outputs": digests}
        self._write(os.path.join(self.root, "receipts", key + ".json"), json.dumps(doc, sort_keys=True).encode())

    def verify(self, key: str) -> bool:
        with open(os.path.join(self.root, "receipts", key + ".json"), "rb") as fh:
            doc = json.load(fh)
        for path, want in doc["outputs"].items():
            h = hashlib.sha256()
            with open(os.path.join(self.root, "outputs", key, path), "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            if h.hexdigest() != want:
                return False
        return True

    def apply(self, key: str) -> None:
        if not self.verify(key):
            raise RuntimeError(f"{key} does not verify")
        with open(os.path.join(self.root, "receipts", key + ".json"), "rb") as fh:
            doc = json.load(fh)
        for path in doc["outputs"]:
            shutil.copyfile(os.path.join(self.root, "outputs", key, path), os.path.join(self.worktree, path))
