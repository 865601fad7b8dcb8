"""One error type per exit code of the contract (SPEC §5), each with a hint."""

from __future__ import annotations

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_CONFLICT = 4


class GenjobError(Exception):
    """Base error: a message for the user, an exit code and what to do next."""

    exit_code = EXIT_REFUSED

    def __init__(self, message: str, hint: str | None = None, *, details: list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details or []

    def to_json(self) -> dict[str, object]:
        return {
            "error": self.message,
            "exit_code": self.exit_code,
            "hint": self.hint,
            "details": self.details,
        }


class Refused(GenjobError):
    """Verification failed, a hook said no, stale or dirty inputs (exit 1)."""

    exit_code = EXIT_REFUSED


class BadInput(GenjobError):
    """Bad usage or bad input; nothing was written (exit 2)."""

    exit_code = EXIT_USAGE


class Unavailable(GenjobError):
    """A generator or model was unavailable (exit 3)."""

    exit_code = EXIT_UNAVAILABLE


class Conflict(GenjobError):
    """Key reused with another digest, claim lost, fenced writer (exit 4)."""

    exit_code = EXIT_CONFLICT


def format_error(err: GenjobError) -> str:
    lines = [f"error: {err.message}"]
    lines += [f"  - {d}" for d in err.details]
    if err.hint:
        lines.append(f"hint: {err.hint}")
    return "\n".join(lines)
