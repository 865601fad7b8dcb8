"""`git genjob -h` without importing click (hooks and scripts call us often; SPEC §5 start-up).

tests/cli/test_cli.py checks that this list matches the click commands one for one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

GROUPS: list[tuple[str, list[tuple[str, str]]]] = [
    (
        "plan",
        [
            ("init", "Create .genjob/, the notes display and the remote refspecs."),
            ("submit", "Mint a job for PATH... and store it under refs/genjob/jobs/KEY."),
            ("status", "The queue: one line per job (or one job's state)."),
            (
                "show",
                "One job: its work order, events, attempts and receipt; how it ended and why, who signed its "
                "receipt, and the commit it became.",
            ),
            ("bundle", "Write the exact, byte-identical bundle of job KEY as a tar."),
        ],
    ),
    (
        "work",
        [
            ("keygen", "Create an Ed25519 key (OpenSSH format, mode 0600) and print its public line."),
            ("trust", "Edit the trust store .genjob/allowed_signers."),
            ("work", "The worker loop: claim, record sending, generate, sign, store."),
            ("receipt", "Sign and store a receipt for outputs produced out of band (claims the job itself)."),
            ("recover", "Fence expired claims: requeue lapsed claims, hold lapsed sends as unknown."),
            ("retry", "The owner starts a new attempt of job KEY (same key, same digest)."),
            ("drop", "The owner ends job KEY: it moves to refs/genjob/archive."),
        ],
    ),
    (
        "apply",
        [
            ("verify", "Every check of the receipt of KEY; exit 0 only if applyable."),
            ("apply", "Verify, run the pre-apply hook, and commit the outputs of KEY."),
            ("resubmit", "A new job with the instruction of KEY on the current content; KEY ends superseded."),
            ("log", "Provenance of genjob commits in RANGE, and whether each receipt still verifies."),
            ("audit", "Re-verify every commit with Genjob-* trailers in RANGE (for CI); exit 1 on any failure."),
            ("hook", "What the installed hook scripts call (git genjob hook NAME ARGS...)."),
            ("ci", "Forge CI files: runners as workers, a land job, an audit of every pull request."),
        ],
    ),
    (
        "share and cache",
        [
            ("push", "Fast-forward from REMOTE, then push refs/genjob/* and the notes with leases."),
            ("fetch", "Fetch refs/genjob/* and the notes from REMOTE and reconcile them."),
            ("ask", "One cached model call: replay what was asked before, else ask and record."),
            ("cache", "The replay cache in refs/genjob/replays."),
            ("demo", "A full round trip in a temporary repository, with nothing to configure."),
            ("doctor", "Check the sandbox, keys, trust store, notes, hooks and remotes here; each with a fix."),
        ],
    ),
    (
        "this tool",
        [
            ("help", "This list, or COMMAND's help (the same text as git genjob COMMAND -h)."),
            ("version", "Print the version."),
            ("completion", "Print the shell completion script for bash or zsh (source it, or install.sh installs it)."),
        ],
    ),
]

COMPLETE_VAR = "_GIT_GENJOB_COMPLETE"  # click's shell completion protocol (resources/completion.*)


def names() -> list[str]:
    return [name for _, cmds in GROUPS for name, _ in cmds]


def help_command(args: list[str], run: Callable[[list[str]], int]) -> int:
    """`git genjob help [COMMAND [SUBCOMMAND]]`: this list, or the command's -h text; an
    unknown COMMAND is exit 2 with the list of commands."""
    import sys

    if not args:
        sys.stdout.write(render())
        return 0
    if args[0] not in names() or any(a.startswith("-") for a in args):
        sys.stderr.write(
            f"error: git genjob help {' '.join(args)}: no such command\n"
            f"hint: the commands: {', '.join(names())}; git genjob help COMMAND\n"
        )
        return 2
    if args[0] == "help":
        sys.stdout.write(render())
        return 0
    return run([*args, "-h"])  # the command's own -h, through the CLI its caller holds


def render() -> str:
    width = max(len(name) for _, cmds in GROUPS for name, _ in cmds)
    lines = [
        "Usage: git genjob [OPTIONS] COMMAND [ARGS]...",
        "",
        "  Model calls as keyed, replayable, signed writes recorded in git.",
        "",
        "  A planner mints an immutable job (submit), a worker claims it and returns outputs",
        "  with a signed receipt (work), and apply lands them as one commit with provenance.",
        "",
        "Options:",
        "  --version   Show the version and exit.",
        "  -h, --help  Show this message and exit.",
    ]
    for title, cmds in GROUPS:
        lines += ["", f"Commands ({title}):"]
        lines += [f"  {name:<{width}}  {text}" for name, text in cmds]
    lines += ["", "Run git genjob COMMAND -h for a command's options; git genjob --help opens the manual."]
    return "\n".join(lines) + "\n"
