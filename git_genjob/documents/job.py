"""The frozen job (SPEC §2.1): mint, digest, key, field-level diff."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from git_genjob.documents.canonical import canonical_bytes, digest, is_digest, parse_strict, sha256_hex
from git_genjob.documents.display import DECEPTIVE, deceptive
from git_genjob.documents.errors import BadInput, Refused
from git_genjob.documents.paths import check_distinct, check_path

if TYPE_CHECKING:  # keys loads PyNaCl: only the functions that sign or verify pay for it
    from git_genjob.documents.keys import SigningKey, TrustedKey

SCHEMA = "genjob.job/v1"
_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,127}$")


def is_key(key: str) -> bool:
    """A key names a ref: 1-128 of [a-z0-9._-], starting alnum, no '..', no '.'/'.lock' end."""
    return bool(_KEY_RE.match(key)) and ".." not in key and not key.endswith((".", ".lock"))


def check_key(key: str) -> str:
    """`key` if it is a valid job key (`is_key`), else BadInput saying what one is."""
    if not is_key(key):
        raise BadInput(
            f"key {key!r} is not a valid job key",
            "use 1 to 128 of [a-z0-9._-], lowercase, starting with a letter or digit, "
            "no '..', not ending in '.' or '.lock'",
        )
    return key


# What a terminal acts on rather than prints: C0 controls but tab and newline (ESC starts every
# escape sequence; CR and BS overwrite what was shown), DEL, C1 controls, and the bidi embeddings,
# overrides and isolates that reorder what is shown. `git log` prints a commit message raw.
# With them, what shows a reader other than what is there (display.DECEPTIVE: bidi marks,
# zero-width characters and invisible fillers, line and paragraph separators; SPEC §12.2).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(sorted(DECEPTIVE)) + "]")


def _joins(text: str, at: int) -> bool:
    """Whether text[at] is a joiner doing its work: ZWNJ or ZWJ between two non-ASCII visible
    characters (Persian and Indic words, emoji sequences like 👩‍💻). Between ASCII letters
    (`ap\u200cproved`) it only hides a difference, and is refused."""
    if text[at] not in "\u200c\u200d" or at == 0 or at + 1 >= len(text):
        return False
    before, after = text[at - 1], text[at + 1]
    return all(not c.isascii() and c.isprintable() and c not in DECEPTIVE for c in (before, after))


def check_instruction_text(instruction: str) -> str:
    """`instruction` if it holds no control character, else BadInput naming the first one: an
    instruction becomes the applied commit's message, which `git log` prints raw."""
    m = next((m for m in _CONTROL.finditer(instruction) if not _joins(instruction, m.start())), None)
    if m is None:
        return instruction
    line = instruction.count("\n", 0, m.start()) + 1
    column = m.start() - (instruction.rfind("\n", 0, m.start()) + 1) + 1
    name = {"\x1b": " (ESC, which starts a terminal escape)", "\r": " (CR: a file with CRLF line endings?)"}
    kind = deceptive(m.group())
    what = f"U+{ord(m.group()):04X} ({kind})" if kind else f"the control character U+{ord(m.group()):04X}"
    raise BadInput(
        f"the instruction contains {what}{name.get(m.group(), '')} at line {line}, column {column}",
        "remove it (tabs and newlines are fine): the instruction becomes the commit message, and git log "
        "would send it to every terminal raw",
    )


def default_key(instruction: str, inputs: dict[str, str | None]) -> str:
    return sha256_hex(canonical_bytes({"instruction": instruction, "inputs": inputs}))[:32]


@dataclass(frozen=True)
class Job:
    """An immutable work order. Its digest covers meaning only."""

    instruction: str
    inputs: tuple[tuple[str, str | None], ...]
    key: str

    @classmethod
    def mint(cls, instruction: str, inputs: dict[str, str | None], key: str | None) -> Job:
        """A new job (submit): its instruction may hold no control character."""
        return cls._build(check_instruction_text(instruction), inputs, key)

    @classmethod
    def _build(cls, instruction: str, inputs: dict[str, str | None], key: str | None) -> Job:
        for path in inputs:
            check_path(path, what="allowed path")
        check_distinct(list(inputs))
        ordered = dict(sorted(inputs.items()))
        return cls(instruction, tuple(ordered.items()), check_key(key or default_key(instruction, ordered)))

    @property
    def message_text(self) -> str:
        """The instruction as a commit message carries it: stripped, and any control character
        (in a job minted elsewhere: submit refuses them) written as its escape, since git log
        prints a message raw."""
        text = self.instruction.strip()
        return _CONTROL.sub(
            lambda m: m.group() if _joins(text, m.start()) else m.group().encode("unicode_escape").decode("ascii"),
            text,
        )

    @property
    def allowed_paths(self) -> list[str]:
        return [p for p, _ in self.inputs]

    @property
    def input_map(self) -> dict[str, str | None]:
        return dict(self.inputs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "instruction": self.instruction,
            "allowed_paths": self.allowed_paths,
            "inputs": self.input_map,
            "key": self.key,
        }

    def canonical(self) -> bytes:
        return canonical_bytes(self.to_dict())

    @property
    def digest(self) -> str:
        return digest(self.canonical())

    @classmethod
    def from_bytes(cls, data: bytes) -> Job:
        """Parse and validate stored job.json; anything off is BadInput."""
        doc = parse_strict(data, "job.json")
        if not isinstance(doc, dict) or set(doc) != {"schema", "instruction", "allowed_paths", "inputs", "key"}:
            raise BadInput("job.json does not have exactly the fields of genjob.job/v1")
        if doc["schema"] != SCHEMA:
            raise BadInput(f"job.json schema is {doc['schema']!r}, expected {SCHEMA!r}")
        if not isinstance(doc["instruction"], str) or not isinstance(doc["key"], str):
            raise BadInput("job.json instruction and key must be strings")
        inputs = _stored_inputs(doc["inputs"], doc["allowed_paths"])
        # A stored job is read as it is (a control character in one minted elsewhere is shown
        # escaped and kept out of commit messages), so it can still be listed and dropped.
        return cls._build(doc["instruction"], inputs, doc["key"])


def _stored_inputs(inputs: object, paths: object) -> dict[str, str | None]:
    """A stored job's inputs: path -> sha256 digest or null, its paths sorted, unique, and allowed_paths."""
    if not isinstance(inputs, dict) or not isinstance(paths, list):
        raise BadInput("job.json inputs must be an object and allowed_paths a list")
    if paths != sorted(set(paths)) or paths != sorted(inputs):
        raise BadInput("job.json allowed_paths must be sorted, unique and equal the inputs' paths")
    for path, value in inputs.items():
        if value is not None and not is_digest(value):
            raise BadInput(f"job.json input {path!r} is not a sha256 digest or null")
    return inputs


def describe_difference(old: Job, new: Job) -> list[str]:
    """Which fields differ between two jobs with the same key, for a conflict message."""
    out: list[str] = []
    if old.instruction != new.instruction:
        out.append("instruction differs")
    added = sorted(set(new.allowed_paths) - set(old.allowed_paths))
    removed = sorted(set(old.allowed_paths) - set(new.allowed_paths))
    if added:
        out.append("allowed paths added: " + ", ".join(added))
    if removed:
        out.append("allowed paths removed: " + ", ".join(removed))
    old_in, new_in = old.input_map, new.input_map
    for path in sorted(set(old_in) & set(new_in)):
        if old_in[path] != new_in[path]:
            out.append(f"input {path} changed from {old_in[path]} to {new_in[path]}")
    return out


def seal_job(job_bytes: bytes, key: SigningKey) -> bytes:
    """The planner's signature over the exact stored job.json bytes (SPEC §11)."""
    from git_genjob.documents.signing import JOB_TYPE, seal

    return seal(JOB_TYPE, job_bytes, key)


def job_signer(
    job_bytes: bytes, envelope: bytes | None, signers: list[TrustedKey], revoked: set[bytes], when: float
) -> TrustedKey:
    """Check 9: the job's envelope signs exactly `job_bytes` with a key trusted for genjob-job.

    Returns that key; Refused (unsigned, untrusted) or BadInput (a malformed envelope) otherwise."""
    from git_genjob.documents.keys import NS_JOB
    from git_genjob.documents.signing import JOB_TYPE, signer_of, unseal

    if envelope is None:
        raise Refused("the job is unsigned", "its planner must submit it again with a key: git genjob init")
    sealed = unseal(envelope, JOB_TYPE, "job")
    if sealed.payload != job_bytes:
        raise BadInput("the job's envelope signs another document than its job.json")
    return signer_of(sealed, signers, revoked, when, NS_JOB, "job")
