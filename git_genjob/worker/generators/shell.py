"""What `sh -c` makes of a command's first words, as the exec generator and its sandbox read them:
the words it runs without a file on PATH, and the `NAME=value` assignments before a program."""

from __future__ import annotations

import re

# What `sh -c` runs without a file on PATH: its keywords and special/regular built-ins.
SH_WORDS = frozenset(
    [
        "!",
        "{",
        "(",
        "if",
        "for",
        "while",
        "until",
        "case",
        ".",
        ":",
        "[",
        "alias",
        "bg",
        "break",
        "cd",
        "command",
        "continue",
        "echo",
        "eval",
        "exec",
        "exit",
        "export",
        "false",
        "fg",
        "getopts",
        "hash",
        "jobs",
        "kill",
        "printf",
        "pwd",
        "read",
        "readonly",
        "return",
        "set",
        "shift",
        "test",
        "times",
        "trap",
        "true",
        "type",
        "ulimit",
        "umask",
        "unalias",
        "unset",
        "wait",
    ]
)
# A `NAME=value` word before the program: an assignment, not the program.
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
