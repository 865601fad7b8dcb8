"""HTTP plumbing shared by the model generators and `ask`: one POST, errors sorted by whether it was sent.

It imports nothing of the repository, so the generators may use it (tests/test_architecture.py).
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.request
from typing import Any

from git_genjob.documents.errors import GeneratorUnavailable, HttpStatusError


def post_json(url: str, doc: dict[str, Any], timeout: float, headers: dict[str, str] | None = None) -> str:
    """POST JSON; return the body text. Before an answer: sent=False; timeout or cut answer: sent=True."""
    data = json.dumps(doc, ensure_ascii=False).encode("utf-8")
    req = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
            length = resp.headers.get("Content-Length")
            if length is not None and int(length) != len(body):
                raise GeneratorUnavailable(f"{url}: answer cut short", sent=True)
            return bytes(body).decode("utf-8")
    except urllib.error.HTTPError as exc:
        raise HttpStatusError(exc.code, exc.read().decode("utf-8", "replace"), url) from None
    except TimeoutError:
        raise GeneratorUnavailable(
            f"{url}: timed out after {timeout:g}s with the request sent",
            sent=True,
            hint="the outcome is unknown; the owner decides: git genjob retry KEY",
        ) from None
    except http.client.IncompleteRead:
        raise GeneratorUnavailable(f"{url}: answer cut short", sent=True) from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, (TimeoutError, socket.timeout)):
            raise GeneratorUnavailable(f"{url}: timed out", sent=True) from None
        raise GeneratorUnavailable(
            f"{url}: {reason}", sent=False, hint="start the model server or fix the URL"
        ) from None
    except (ConnectionError, http.client.HTTPException, OSError) as exc:
        raise GeneratorUnavailable(f"{url}: {exc}", sent=True) from None
    except UnicodeDecodeError:
        raise GeneratorUnavailable(f"{url}: answer is not UTF-8", sent=True) from None
