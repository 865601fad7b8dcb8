"""Canonical JSON bytes and digests (SPEC §2): one byte form for hashing and signing."""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from git_genjob.documents.errors import BadInput


def _check(value: Any, where: str = "$") -> None:
    if value is None or isinstance(value, (int, str)):  # bool is an int
        if isinstance(value, str):
            value.encode("utf-8")  # lone surrogates raise here
        return
    if isinstance(value, float):
        raise BadInput(f"canonical JSON has no floats (found {value!r} at {where})")
    if isinstance(value, dict):
        _check_object(value, where)
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check(v, f"{where}[{i}]")
        return
    raise BadInput(f"cannot encode {type(value).__name__} at {where} as canonical JSON")


def _check_object(value: dict[Any, Any], where: str) -> None:
    for k, v in value.items():
        if not isinstance(k, str):
            raise BadInput(f"canonical JSON keys are strings (found {k!r} at {where})")
        _check(v, f"{where}.{k}")


def canonical_bytes(value: Any) -> bytes:
    """Keys sorted by code point, `,`/`:` separators, UTF-8, no floats."""
    _check(value)
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(data: bytes) -> str:
    """`sha256:<64 hex>` of bytes."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def is_digest(value: object) -> bool:
    if not isinstance(value, str) or not value.startswith("sha256:") or len(value) != 71:
        return False
    return all(c in "0123456789abcdef" for c in value[7:])


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def _no_float(text: str) -> Any:
    raise ValueError(f"float {text} is not allowed")


def _no_constant(text: str) -> Any:
    raise ValueError(f"{text} is not allowed")


def parse_strict(data: bytes, what: str = "document") -> Any:
    """Parse JSON, refusing duplicate keys, floats, NaN and invalid UTF-8."""
    try:
        text = data.decode("utf-8")
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_float=_no_float,
            parse_constant=_no_constant,
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadInput(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:  # a hostile document of 100,000 nested brackets packs into a few bytes
        raise BadInput(f"{what} is nested too deeply to be a genjob document") from None


def utc_now() -> str:
    """RFC 3339 UTC with milliseconds: 2026-12-02T14:27:23.000Z."""
    return format_time(time.time())


def format_time(ts: float) -> str:
    ms = int(round(ts * 1000))
    secs, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{millis:03d}Z"


def parse_time(text: str) -> float:
    import calendar

    try:
        base, frac = text.rstrip("Z").split(".") if "." in text else (text.rstrip("Z"), "0")
        secs = calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S"))
        return secs + int(frac[:3].ljust(3, "0")) / 1000
    except ValueError:
        raise BadInput(f"not an RFC 3339 UTC time: {text!r}") from None
