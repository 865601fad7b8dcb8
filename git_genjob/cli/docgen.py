"""docs/cli.md and the man page, generated from the click commands (one source, no hand-kept copy)."""

from __future__ import annotations

import inspect

import click

from git_genjob.storage.layout import RECEIPTS_REF, REPLAYS_REF, job_ref

EXAMPLES = {
    "init": "git genjob init --hooks",
    "keygen": "git genjob keygen --name w1",
    "trust add": "git genjob trust add w1 ~/.config/git-genjob/keys/w1.pub --valid-before 2027-12-31",
    "submit": 'git genjob submit -m "Add a timeout to fetch_user" src/user.py --create tests/test_timeout.py',
    "status": "git genjob status --state queued --json",
    "show": "git genjob show 3f0c9a… --json",
    "bundle": "git genjob bundle 3f0c9a… -o job.tar",
    "work": "git genjob work --generator 'exec:aider --yes-always --no-git "
    '--message-file "$GENJOB_INSTRUCTION_FILE"\' --signing-key ~/.config/git-genjob/keys/w1 --once',
    "receipt": "git genjob receipt 3f0c9a… --outputs out/ --signing-key ~/.config/git-genjob/keys/w1",
    "recover": "git genjob recover --remote origin",
    "retry": "git genjob retry 3f0c9a…",
    "drop": 'git genjob drop 3f0c9a… --why "superseded"',
    "verify": "git genjob verify 3f0c9a… --json",
    "apply": "git genjob apply 3f0c9a…\ngit genjob apply --all --json\n"
    "git genjob apply 3f0c9a… --branch genjob/3f0c9a…",
    "resubmit": "git genjob resubmit 3f0c9a…",
    "log": "git genjob log main~10..main",
    "audit": "git genjob audit origin/main..HEAD",
    "push": "git genjob push origin",
    "fetch": "git genjob fetch origin",
    "ask": "git genjob ask --endpoint http://127.0.0.1:8080/model --prompt-file p.txt --out-file a.txt\n"
    "git genjob ask --endpoint openai:http://127.0.0.1:8080/v1 --model smollm2 --prompt-file p.txt --out-file a.txt",
    "cache drift": "git genjob cache drift <fingerprint>",
    "demo": "git genjob demo --keep",
    "ci init": "git genjob ci init github --workers 8 --max-jobs 3 --schedule '*/30 * * * *'\n"
    "git genjob ci init gitlab --generator 'exec:aider --yes-always --no-git "
    '--message-file "$GENJOB_INSTRUCTION_FILE"\' --work-option=--allow-host=api.openai.com',
}


K = "3f0c9a…"
D = "sha256:…"
JSON_SHAPES = {
    "init": {
        "created": [".genjob/allowed_signers"],
        "config": ["notes.displayRef=refs/notes/genjo[b]"],
        "hooks": [],
        "planner": ["created planner key …/keys/planner (signs the jobs you submit)"],
    },
    "submit": {"key": K, "digest": D, "state": "queued", "created": True, "archived": False, "warnings": []},
    "status": [
        {
            "key": K,
            "state": "queued",
            "digest": D,
            "epoch": 0,
            "attempts": 0,
            "created_at": "…Z",
            "allowed_paths": ["src/user.py"],
            "instruction": "first line",
            "archived": False,
            "result": None,
            "planner": "trusted",
        }
    ],
    "show": {
        "key": K,
        "state": "done",
        "digest": D,
        "epoch": 1,
        "attempts": 1,
        "created_at": "…Z",
        "allowed_paths": ["src/user.py"],
        "instruction": "first line",
        "archived": False,
        "result": "ok",
        "job": {"schema": "genjob.job/v1"},
        "meta": {"job_id": "j-…"},
        "attempt_records": [{"n": 1}],
        "events": [{"commit": "…", "event": "claimed", "state": "claimed", "epoch": 1, "time": 0}],
        "outputs": ["src/user.py"],
        "receipt": {"payloadType": "application/vnd.in-toto+json"},
        "ended": {"status": "ok", "reason": None, "worker_id": "w1"},
        "signer": {"name": "w1", "keyid": "SHA256:…", "verified": True},
        "landed": None,
    },
    "bundle": {"key": K, "file": "job.tar", "bytes": 10240, "digest": D},
    "keygen": {
        "private_key": "…/keys/w1",
        "public_key": "…/keys/w1.pub",
        "public_line": "ssh-ed25519 AAAA… w1",
        "keyid": "SHA256:…",
    },
    "trust list": [
        {
            "name": "w1",
            "keyid": "SHA256:…",
            "namespaces": ["genjob-receipt", "genjob-replay"],
            "valid_after": None,
            "valid_before": None,
            "revoked": False,
        }
    ],
    "work": {"jobs": [{"key": K, "result": "ok", "reason": "", "attempt": 1, "replayed": []}], "exit_code": 0},
    "receipt": {"key": K, "result": "ok", "reason": "", "attempt": 1, "replayed": []},
    "recover": {"requeued": [], "unknown": [K], "lost": [], "archived": [], "locks": [], "forged": []},
    "ci init": {
        "forge": "github",
        "written": [".github/workflows/genjob-workers.yml"],
        "unchanged": [],
        "next_steps": ["git genjob keygen --name ci-worker …"],
    },
    "retry": {"key": K, "state": "queued", "epoch": 3, "refresh": False},
    "drop": {"key": K, "state": "dropped"},
    "resubmit": {"old": K, "new": "8d1e…", "digest": D, "state": "queued", "already": False},
    "verify": {
        "key": K,
        "ok": False,
        "signer": "SHA256:…",
        "planner": "SHA256:…",
        "receipt": D,
        "checks": [{"check": 2, "code": "signature", "ok": False, "detail": "…"}],
    },
    "apply": {
        "key": K,
        "commit": "…",
        "branch": "refs/heads/main",
        "already": False,
        "reconciled": False,
        "kept": [],
        "merged_onto": None,
    },
    "log": [
        {
            "commit": "…",
            "subject": "genjob: …",
            "key": K,
            "receipt": D,
            "signer": "SHA256:…",
            "signer_name": "w1",
            "worker": "w1",
            "ok": True,
            "problems": [],
            "unchecked": [],
            "provenance": "verified",
            "facts": [],
            "note": [f"genjob {K} ok: signed by w1 (SHA256:…), receipt {D}", "  instruction: …"],
            "forged_note": None,
            "envelope_ref": RECEIPTS_REF,
            "jobs": [K],
        }
    ],
    "audit": {"commits": ["(as log)"], "failing": 0, "unchecked": 0},
    "push": {
        "pushed": [job_ref(K)],
        "created": [],
        "updated": [],
        "merged": [],
        "dropped": [],
        "diverged": [],
        "kept": [],
    },
    "fetch": {
        "created": [K],
        "updated": [],
        "merged": [REPLAYS_REF],
        "dropped": [],
        "diverged": [],
        "pushed": [],
        "kept": [],
    },
    "ask": {"fingerprint": "64 hex", "source": "replay", "out_file": "a.txt"},
    "cache ls": [{"fingerprint": "64 hex", "served": "64 hex", "pending": [], "events": 1, "ignored": 0}],
    "cache drift": {"fingerprint": "64 hex", "served": "64 hex", "pending": ["64 hex"]},
    "cache explain": {"fingerprint": "64 hex", "request": {"v": 1}, "rewrites": ["home directory: …"]},
    "demo": {"repository": None, "key": K, "commit": "…", "verify": ["ok 1 envelope …"]},
}


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    out: list[tuple[str, click.Command]] = []
    for name in sorted(group.commands):
        cmd = group.commands[name]
        if cmd.hidden:
            continue
        full = f"{prefix}{name}"
        out.append((full, cmd))
        if isinstance(cmd, click.Group):
            out += _commands(cmd, full + " ")
    return out


def _usage(name: str, cmd: click.Command) -> str:
    ctx = click.Context(cmd, info_name=f"git genjob {name}", help_option_names=["-h", "--help"])
    return " ".join(cmd.collect_usage_pieces(ctx))


def _option_help(name: str, cmd: click.Command, p: click.Option) -> str:
    """The option's help as `-h` prints it: with its default and choices."""
    ctx = click.Context(cmd, info_name=f"git genjob {name}", help_option_names=["-h", "--help"])
    record = p.get_help_record(ctx)
    return record[1] if record else (p.help or "")


def markdown(root: click.Group) -> str:
    lines = [
        "# Commands",
        "",
        "Generated from the code by `git genjob man --markdown` (the man page comes from the",
        "same source). Every command accepts `-h`; most accept `--json` for one JSON document on stdout.",
        "Exit codes: 0 done, 1 refused, 2 bad input, 3 generator unavailable, 4 conflict.",
        "",
        "Output follows git: colour per `color.genjob`, else `color.ui` (`never`, `always`, or `auto`:",
        "on a terminal whose `TERM` is not `dumb`), never with `NO_COLOR` set; a reader that closes",
        "the pipe early (`git genjob log | head -1`) ends the command quietly with exit 141, as git does.",
        "",
    ]
    for name, cmd in _commands(root):
        lines += _markdown_section(name, cmd)
    return "\n".join(lines).rstrip() + "\n"


def _markdown_section(name: str, cmd: click.Command) -> list[str]:
    """One command's section: usage, help, example, JSON shape and the table of options."""
    lines = [f"## git genjob {name}", "", f"`git genjob {name} {_usage(name, cmd)}`".replace(" `", "`"), ""]
    lines += [inspect.cleandoc(cmd.help or ""), ""]
    if name in EXAMPLES:
        lines += ["```sh", EXAMPLES[name], "```", ""]
    if name in JSON_SHAPES:
        import json

        lines += ["With `--json`:", "", "```json", json.dumps(JSON_SHAPES[name], ensure_ascii=False), "```", ""]
    return lines + _options_table(name, cmd)


def _options_table(name: str, cmd: click.Command) -> list[str]:
    """The command's visible options as a Markdown table (none: no table)."""
    opts = [p for p in cmd.params if isinstance(p, click.Option) and not p.hidden]
    if not opts:
        return []
    lines = ["| option | meaning |", "|---|---|"]
    for p in opts:
        flags = ", ".join(f"`{o}`" for o in p.opts + p.secondary_opts)
        lines.append(f"| {flags} | {_option_help(name, cmd, p).replace('|', '/')} |")
    return [*lines, ""]


def _roff(text: str) -> str:
    return text.replace("\\", "\\\\").replace("-", "\\-").replace("\n.", "\n\\&.")


def manpage(root: click.Group, version: str) -> str:
    out = [
        f'.TH GIT-GENJOB 1 "" "git-genjob {version}" "Git Manual"',
        ".SH NAME",
        "git-genjob \\- model calls as keyed, replayable, signed writes recorded in git",
        ".SH SYNOPSIS",
        ".B git genjob",
        ".I COMMAND",
        "[\\fIOPTIONS\\fR]",
        ".SH DESCRIPTION",
        _roff((root.help or "").strip()),
        ".SH COMMANDS",
    ]
    for name, cmd in _commands(root):
        out += [
            ".TP",
            f".B git genjob {_roff(name)} {_roff(_usage(name, cmd))}",
            _roff(inspect.cleandoc(cmd.help or "")),
        ]
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.hidden:
                flags = _roff(", ".join(p.opts + p.secondary_opts))
                out += [".RS", ".TP", f"\\fB{flags}\\fR", _roff(_option_help(name, cmd, p)), ".RE"]
    out += [
        ".SH EXIT STATUS",
        "0 done; 1 refused; 2 bad input, nothing written; 3 generator unavailable; 4 conflict.",
        ".SH SEE ALSO",
        "git(1), git-notes(1), ssh-keygen(1)",
    ]
    return "\n".join(out) + "\n"
