"""One error type per exit code of the contract (SPEC §5), each with a hint."""

from __future__ import annotations

from collections.abc import Callable

from git_genjob import __version__

Painter = Callable[[str, str], str]  # (text, colour) -> text: the cli colours, everything else is plain


def plain(text: str, colour: str) -> str:
    return text


EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_CONFLICT = 4
EXIT_BUG = 70  # EX_SOFTWARE: an unexpected exception, never a verdict


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


# Errors of one plane or another, defined here so every module and the hooks raise the same
# types; each keeps the base class (and so the `except` clauses that catch it) it always had.


class NoSuchJob(GenjobError):
    """No live or archived job has that key (exit 2)."""

    exit_code = EXIT_USAGE


class NotARepository(GenjobError):
    """Not inside a git repository, or one pygit2 cannot open (exit 2)."""

    exit_code = EXIT_USAGE


class RefMoved(Conflict):
    """A compare-and-swap lost: the ref no longer holds the value read (exit 4; a retry may win)."""


class LockHeld(Conflict):
    """A lock file (a ref's, or git's index.lock) stayed held past the brief wait (exit 4,
    naming the file, since when, who holds it and how to clear it). Never retried as a lost race."""


class StaleLock(LockHeld):
    """A ref lock whose holder is gone (exit 4, naming the file and how to clear it)."""


class RemoteUnavailable(GenjobError):
    """A remote could not be reached (exit 3)."""

    exit_code = EXIT_UNAVAILABLE


class GeneratorUnavailable(GenjobError):
    """The generator could not answer. `sent` says whether the request may have reached it."""

    exit_code = EXIT_UNAVAILABLE

    def __init__(self, message: str, *, sent: bool, hint: str | None = None):
        super().__init__(message, hint)
        self.sent = sent


class HttpStatusError(GeneratorUnavailable):
    """An HTTP endpoint answered with an error status (never recorded, never sent)."""

    def __init__(self, status: int, body: str, url: str):
        super().__init__(
            f"{url} answered HTTP {status}: {body[:200]}",
            sent=False,
            hint="check the endpoint and model; nothing was recorded",
        )
        self.status, self.body = status, body


def crash_log_path() -> str:
    import os

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "git-genjob", "crash.log")


def report_crash(exc: BaseException, argv: list[str]) -> int:
    """The one funnel for an unexpected exception: one line on stderr, the traceback in a log file.

    Its exit code (70) is no verdict of the contract's: a script can tell "refused" (1) and
    "bad input" (2) from "git-genjob has a bug".
    """
    import os
    import sys
    import time
    import traceback

    path = crash_log_path()
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} git-genjob {__version__}\n")
            fh.write(f"argv: {argv!r}\n{text}\n")
        where = f"the traceback is in {path}"
    except OSError:
        where = "the traceback follows:\n" + text
    sys.stderr.write(f"error: git-genjob hit an unexpected {type(exc).__name__}: {exc}; {where}\n")
    sys.stderr.write("hint: this is a bug in git-genjob, not a verdict; please report it with that log\n")
    return EXIT_BUG


def format_error(err: GenjobError) -> str:
    """The human text of an error; a message may quote a hostile name, so nothing in it
    reaches the terminal unescaped but the message's own line breaks."""
    from git_genjob.documents.display import printable  # here, not at the top: hooks import errors

    lines = [f"error: {printable(err.message, keep=chr(10))}"]
    lines += [f"  - {printable(d)}" for d in err.details]
    if err.hint:
        lines.append(f"hint: {printable(err.hint)}")
    return "\n".join(lines)
