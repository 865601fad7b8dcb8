"""The demo's deterministic generator: adds a `timeout` parameter to the functions the instruction names.

Run as an `exec:` generator (`python -m git_genjob.cli.demo_agent`) inside the worker's scratch
directory: it reads $GENJOB_JOB, edits the allowed .py files through `ast` positions, and writes
a test for each allowed path the job may create.
"""

from __future__ import annotations

import ast
import json
import os
import re
import sys

Edit = tuple[int, int, str]  # (line, column, text inserted there)


def add_timeout(source: str, names: set[str]) -> str:
    """Insert `timeout: float = 10.0` into each named function's signature (once)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits: list[Edit] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            if any(a.arg == "timeout" for a in node.args.args + node.args.kwonlyargs):
                continue
            edits += _urlopen_edits(node)
            signature = _signature_edit(node, lines)
            if signature is not None:
                edits.append(signature)
    for i, col, text in sorted(edits, reverse=True):
        lines[i] = lines[i][:col] + text + lines[i][col:]
    return "".join(lines)


def _urlopen_edits(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[Edit]:
    """`, timeout=timeout` at the end of each urlopen call in `node` that passes none."""
    edits = []
    for call in ast.walk(node):
        if (
            isinstance(call, ast.Call)
            and call.end_lineno is not None
            and call.end_col_offset is not None
            and _untimed_urlopen(call)
        ):
            edits.append((call.end_lineno - 1, call.end_col_offset - 1, ", timeout=timeout"))
    return edits


def _untimed_urlopen(call: ast.Call) -> bool:
    return getattr(call.func, "attr", getattr(call.func, "id", "")) == "urlopen" and not any(
        k.arg == "timeout" for k in call.keywords
    )


def _signature_edit(node: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> Edit | None:
    """The timeout parameter at the signature's closing parenthesis: the last ')' before the ':'
    that opens the body."""
    body_line = node.body[0].lineno - 1
    for i in range(body_line if body_line >= node.lineno else node.lineno - 1, node.lineno - 2, -1):
        text = lines[i]
        colon = text.rfind(":")
        close = text.rfind(")", 0, colon if colon != -1 else len(text))
        if close != -1:
            opened = text[:close].rstrip().endswith("(")
            return (i, close, "timeout: float = 10.0" if opened else ", timeout: float = 10.0")
    return None


def test_for(module: str, names: set[str]) -> str:
    body = [f"import inspect\n\nfrom {module} import {', '.join(sorted(names))}\n"]
    for name in sorted(names):
        body.append(
            f"\n\ndef test_{name}_has_timeout():\n"
            f"    param = inspect.signature({name}).parameters['timeout']\n"
            f"    assert param.default == 10.0\n"
        )
    return "".join(body)


def main() -> int:
    with open(os.environ["GENJOB_JOB"], encoding="utf-8") as fh:
        job = json.load(fh)
    names = set(re.findall(r"\b([a-z_][a-z0-9_]*)\(?\b", job["instruction"])) & _defined(job)
    if os.environ.get("OPENAI_BASE_URL"):  # the worker's gateway: ask the model, as an agent would
        names = _ask_model(job["instruction"], names)
    changed = _edit_inputs(job["inputs"], names)
    if changed:
        _write_tests(job["inputs"], names, changed[0])
    print(f"demo agent: timeout added to {', '.join(sorted(names)) or 'nothing'} in {', '.join(changed) or '-'}")
    return 0


def _edit_inputs(inputs: dict[str, str | None], names: set[str]) -> list[str]:
    """Add the timeout to the named functions of each existing .py input; the paths changed."""
    changed = []
    for path, digest in inputs.items():
        if digest is not None and path.endswith(".py") and os.path.exists(path):
            with open(path, encoding="utf-8") as fh:
                old = fh.read()
            new = add_timeout(old, names)
            if new != old:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(new)
                changed.append(path)
    return changed


def _write_tests(inputs: dict[str, str | None], names: set[str], changed: str) -> None:
    """A test of the changed module's timeouts at each .py path the job may create."""
    module = changed[: -len(".py")].replace("/", ".").removeprefix("src.")
    for path, digest in inputs.items():
        if digest is None and path.endswith(".py"):
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(test_for(module, names))


def _ask_model(instruction: str, candidates: set[str]) -> set[str]:
    """One chat completion through the gateway (its URL and this attempt's token, never a key)."""
    import urllib.request

    question = f"{instruction}\n\nWhich of these functions should take a timeout? " + ", ".join(
        f"`{n}`" for n in sorted(candidates)
    )
    body = json.dumps({"model": "demo", "messages": [{"role": "user", "content": question}]}).encode()
    token = os.environ.get("OPENAI_API_KEY", "")
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        body,
        {"content-type": "application/json", "authorization": f"Bearer {token}"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        answer = json.load(resp)["choices"][0]["message"]["content"]
    print(f"demo agent: the model says {answer}")
    return set(json.loads(answer)) & candidates


def _defined(job: dict[str, object]) -> set[str]:
    out: set[str] = set()
    inputs = job["inputs"]
    assert isinstance(inputs, dict)
    for path, digest in inputs.items():
        if digest is not None and path.endswith(".py") and os.path.exists(path):
            out |= _function_names(path)
    return out


def _function_names(path: str) -> set[str]:
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


if __name__ == "__main__":
    sys.exit(main())
