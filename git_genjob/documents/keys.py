"""Ed25519 keys in OpenSSH formats, the allowed_signers trust store, revocation (the only PyNaCl importer)."""

from __future__ import annotations

import base64
import calendar
import hashlib
import os
import re
import stat
import struct
import time
from dataclasses import dataclass

import nacl.exceptions
import nacl.signing

from git_genjob.documents.errors import BadInput

NAMESPACE = "genjob-receipt"  # receipts, signed by workers
NS_JOB = "genjob-job"  # jobs and drops, signed by their planner (SPEC §11)
NS_REPLAY = "genjob-replay"  # recorded, refresh and drift events of the replay cache, signed by who paid
NS_REVIEW = "genjob-review"  # accepted and rejected events, signed by a reviewer
NAMESPACES = (NAMESPACE, NS_JOB, NS_REPLAY, NS_REVIEW)
# What `trust add --as ROLE` grants; `init` trusts the planner's own key as planner.
ROLES = {"worker": (NAMESPACE, NS_REPLAY), "planner": (NS_JOB, NS_REVIEW), "reviewer": (NS_REVIEW,)}
KEYTYPE = b"ssh-ed25519"
PEM_BEGIN = "-----BEGIN OPENSSH PRIVATE KEY-----"
PEM_END = "-----END OPENSSH PRIVATE KEY-----"


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise BadInput("truncated OpenSSH key data")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def uint32(self) -> int:
        return int(struct.unpack(">I", self.take(4))[0])

    def string(self) -> bytes:
        return self.take(self.uint32())


def public_blob(pk: bytes) -> bytes:
    return _string(KEYTYPE) + _string(pk)


def fingerprint(pk: bytes) -> str:
    """OpenSSH `SHA256:` fingerprint (as `ssh-keygen -lf` prints it)."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(public_blob(pk)).digest()).decode().rstrip("=")


def public_line(pk: bytes, comment: str) -> str:
    return f"ssh-ed25519 {base64.b64encode(public_blob(pk)).decode()} {comment}".rstrip()


def parse_public_key(text: str) -> tuple[bytes, str]:
    """`ssh-ed25519 AAAA… comment` -> (32-byte key, comment)."""
    parts = text.strip().split(None, 2)
    if len(parts) < 2 or parts[0] != "ssh-ed25519":
        raise BadInput("not an ssh-ed25519 public key line", "give the line keygen printed, or its .pub file")
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except ValueError:
        raise BadInput("the public key is not valid base64") from None
    return _ed25519_public(blob), parts[2] if len(parts) > 2 else ""


def _ed25519_public(blob: bytes) -> bytes:
    """The 32-byte key of an OpenSSH ssh-ed25519 public key blob, refused unless it is exactly one."""
    r = _Reader(blob)
    if r.string() != KEYTYPE:
        raise BadInput("the public key blob is not ssh-ed25519")
    pk = r.string()
    if len(pk) != 32 or r.pos != len(blob):
        raise BadInput("the ssh-ed25519 public key has the wrong length")
    return pk


@dataclass(frozen=True)
class SigningKey:
    seed: bytes
    comment: str

    @property
    def public(self) -> bytes:
        return bytes(nacl.signing.SigningKey(self.seed).verify_key)

    @property
    def keyid(self) -> str:
        return fingerprint(self.public)

    def sign(self, message: bytes) -> bytes:
        return bytes(nacl.signing.SigningKey(self.seed).sign(message).signature)

    def private_pem(self) -> str:
        pk = self.public
        check = os.urandom(4)
        private = (
            check + check + _string(KEYTYPE) + _string(pk) + _string(self.seed + pk) + _string(self.comment.encode())
        )
        pad = 1
        while len(private) % 8:
            private += bytes([pad])
            pad += 1
        body = (
            b"openssh-key-v1\x00"
            + _string(b"none")
            + _string(b"none")
            + _string(b"")
            + struct.pack(">I", 1)
            + _string(public_blob(pk))
            + _string(private)
        )
        b64 = base64.b64encode(body).decode()
        lines = [b64[i : i + 70] for i in range(0, len(b64), 70)]
        return "\n".join([PEM_BEGIN, *lines, PEM_END]) + "\n"


def generate(comment: str) -> SigningKey:
    return SigningKey(bytes(nacl.signing.SigningKey.generate()), comment)


def parse_private_key(text: str) -> SigningKey:
    p = _private_section(_openssh_body(text))
    if p.string() != KEYTYPE:
        raise BadInput("the private key is not ssh-ed25519")
    pk, sk, comment = p.string(), p.string(), p.string()
    if len(sk) != 64 or sk[32:] != pk:
        raise BadInput("the ssh-ed25519 private key is malformed")
    key = SigningKey(sk[:32], comment.decode("utf-8", "replace"))
    if key.public != pk:
        raise BadInput("the private key does not match its public half")
    return key


def _openssh_body(text: str) -> bytes:
    """The PEM-armoured openssh-key-v1 body, past its magic."""
    lines = [ln.strip() for ln in text.strip().splitlines()]
    if not lines or lines[0] != PEM_BEGIN or lines[-1] != PEM_END:
        raise BadInput("not an OpenSSH private key", "create one with: git genjob keygen; git genjob doctor")
    try:
        body = base64.b64decode("".join(lines[1:-1]), validate=True)
    except ValueError:
        raise BadInput("the private key is not valid base64") from None
    if not body.startswith(b"openssh-key-v1\x00"):
        raise BadInput("not an openssh-key-v1 private key")
    return body[len(b"openssh-key-v1\x00") :]


def _private_section(body: bytes) -> _Reader:
    """A reader on the one unencrypted private key the body holds, past its check bytes."""
    r = _Reader(body)
    cipher, kdf, _ = r.string(), r.string(), r.string()
    if cipher != b"none" or kdf != b"none":
        raise BadInput("the private key is passphrase-protected", "workers need an unencrypted key file (mode 0600)")
    if r.uint32() != 1:
        raise BadInput("the key file must hold exactly one key")
    r.string()
    p = _Reader(r.string())
    if p.uint32() != p.uint32():
        raise BadInput("the private key is corrupt (check bytes differ)")
    return p


def read_signing_key(path: str) -> SigningKey:
    """Read a private key file, refusing one that group or others can read."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise BadInput(
            f"cannot read signing key {path}: {exc.strerror}", "create one with: git genjob keygen; git genjob doctor"
        ) from None
    with open(path, encoding="utf-8", errors="replace") as fh:
        head = fh.read(200)
    if head.startswith(("ssh-ed25519 ", "ssh-rsa ", "ecdsa-", "sk-ssh-")):
        private = path[: -len(".pub")] if path.endswith(".pub") else "the file without .pub"
        raise BadInput(
            f"{path} is a public key; signing needs the private key",
            f"pass the private key file: --signing-key {private}",
        )
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise BadInput(
            f"signing key {path} is readable by others (mode {stat.S_IMODE(st.st_mode):04o})",
            f"chmod 600 {path}; git genjob doctor",
        )
    with open(path, encoding="utf-8") as fh:
        return parse_private_key(fh.read())


_KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def check_key_name(name: str) -> str:
    """A key name becomes a file name under the keys folder: one plain component."""
    if not _KEY_NAME.match(name) or name.endswith((".pub", ".lock")):
        raise BadInput(
            f"key name {name!r} is not a plain name",
            "use 1 to 64 of [A-Za-z0-9._-], starting with a letter or digit (or pass --out FILE)",
        )
    return name


def default_key_path(name: str) -> str:
    check_key_name(name)
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "git-genjob", "keys", name)


def write_key_files(key: SigningKey, path: str) -> str:
    """Write the private key (0600, never overwriting) and `<path>.pub`; returns the public line."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise BadInput(f"{path} already exists", "choose another --name or --out; keys are never overwritten") from None
    with os.fdopen(fd, "w") as fh:
        fh.write(key.private_pem())
    line = public_line(key.public, key.comment)
    with open(path + ".pub", "w", encoding="utf-8") as fh:
        fh.write(line + "\n")
    return line


# -- trust store --------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrustedKey:
    principal: str
    public: bytes
    namespaces: tuple[str, ...] | None
    valid_after: float | None
    valid_before: float | None
    line: int

    @property
    def keyid(self) -> str:
        return fingerprint(self.public)

    def problems_at(self, when: float, namespace: str = NAMESPACE) -> list[str]:
        """Why this key may not sign for `namespace` at `when` (an empty list: it may)."""
        out = []
        if self.namespaces is None:
            out.append(f'{self.principal}: no namespaces option (needs namespaces="{namespace}")')
        elif namespace not in self.namespaces:
            out.append(f"{self.principal}: namespaces do not include {namespace}")
        if self.valid_after is not None and when < self.valid_after:
            out.append(f"{self.principal}: not valid before {_fmt(self.valid_after)}")
        if self.valid_before is not None and when >= self.valid_before:
            out.append(f"{self.principal}: expired at {_fmt(self.valid_before)}")
        return out


def _fmt(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def parse_ssh_time(text: str) -> float:
    """OpenSSH YYYYMMDD[HHMM[SS]][Z]: with Z in UTC, without it in local time (as sshd reads it)."""
    utc = text[-1:] in ("Z", "z")
    digits = text[:-1] if utc else text
    if not digits.isdigit() or len(digits) not in (8, 12, 14):
        raise BadInput(f"bad time {text!r} in allowed_signers (want YYYYMMDD[HHMM[SS]][Z])")
    try:
        parsed = time.strptime(digits.ljust(14, "0"), "%Y%m%d%H%M%S")
    except ValueError:
        raise BadInput(f"bad time {text!r} in allowed_signers") from None
    return float(calendar.timegm(parsed) if utc else time.mktime(parsed))


_OPTION_NAMES = ("cert-authority", "namespaces", "valid-after", "valid-before")


def _parse_options(field: str) -> dict[str, str | None]:
    """The options field as OpenSSH's sshsigopt_parse reads it: known names, each once, case-insensitive."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(field):
        name, i = _option_name(field, i, out)
        value: str | None = None
        if name != "cert-authority":
            value, i = _option_value(field, i, name)
        out[name] = value
        i = _after_option(field, i)
    return out


def _option_name(field: str, i: int, seen: dict[str, str | None]) -> tuple[str, int]:
    """The option name starting at `i` (lowercased, known, not in `seen`) and where it ends."""
    name_end = i
    while name_end < len(field) and field[name_end] not in "=,":
        name_end += 1
    name = field[i:name_end].lower()
    if name not in _OPTION_NAMES:
        raise BadInput(f"bad options: unknown key option {field[i:name_end]!r}")
    if name in seen:
        raise BadInput(f'bad options: multiple "{name}" clauses')
    return name, name_end


def _option_value(field: str, i: int, name: str) -> tuple[str, int]:
    """The ="quoted" value at `i` (backslash escapes a quote) and the index past its closing quote."""
    if field[i : i + 2] != '="':
        raise BadInput(f'bad options: {name} needs a quoted value ({name}="...")')
    i += 2
    chars = []
    while i < len(field) and field[i] != '"':
        if field[i] == "\\" and field[i + 1 : i + 2] == '"':
            i += 1
        chars.append(field[i])
        i += 1
    if i >= len(field):
        raise BadInput(f"bad options: unterminated quote in {name}")
    return "".join(chars), i + 1


def _after_option(field: str, i: int) -> int:
    """Past the ',' that must follow an option unless the field ends; a trailing ',' is refused."""
    if i < len(field):
        if field[i] != ",":
            raise BadInput("bad options: expected ',' between options")
        i += 1
        if i == len(field):
            raise BadInput("bad options: trailing ','")
    return i


def _split_options(text: str) -> tuple[str, str]:
    """Leading options field (quotes may hold spaces), then the rest."""
    i, quoted = 0, False
    while i < len(text):
        if text[i] == '"':
            quoted = not quoted
        elif text[i] in " \t" and not quoted:
            break
        i += 1
    return text[:i], text[i:].strip()


def _parse_signer_line(line: str, n: int) -> TrustedKey | None:
    """One allowed_signers line; None for a line that trusts no plain key (cert-authority)."""
    principal, _, rest = line.replace("\t", " ").partition(" ")
    rest = rest.strip()
    options: dict[str, str | None] = {}
    if not rest.startswith("ssh-"):
        field, rest = _split_options(rest)
        options = _parse_options(field)
    ns = options.get("namespaces")
    after, before = options.get("valid-after"), options.get("valid-before")
    valid_after = parse_ssh_time(after) if after is not None else None
    valid_before = parse_ssh_time(before) if before is not None else None
    pk, _ = parse_public_key(rest)
    if "cert-authority" in options:
        return None  # a CA key never signs a receipt itself
    namespaces = tuple(x.strip() for x in ns.split(",")) if ns is not None else None
    return TrustedKey(principal, pk, namespaces, valid_after, valid_before, n)


def read_allowed_signers(text: str) -> tuple[list[TrustedKey], list[str]]:
    """(trusted keys, problems): a malformed line trusts nothing and is named, as `ssh-keygen -Y` skips it."""
    keys, problems = [], []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            key = _parse_signer_line(line, n)
        except BadInput as exc:
            problems.append(f"allowed_signers line {n} ignored: {exc.message}")
            continue
        if key is not None:
            keys.append(key)
    return keys, problems


def parse_allowed_signers(text: str) -> list[TrustedKey]:
    return read_allowed_signers(text)[0]


def parse_revoked(text: str) -> set[bytes]:
    out = set()
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            try:
                out.add(parse_public_key(line)[0])
            except BadInput as exc:
                raise BadInput(f"revoked_keys line {n}: {exc.message}") from None
    return out


def verify_signature(public: bytes, message: bytes, signature: bytes) -> bool:
    try:
        nacl.signing.VerifyKey(public).verify(message, signature)
        return True
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, ValueError, TypeError):
        return False


def trust_line(
    name: str,
    public: bytes,
    valid_before: str | None,
    valid_after: str | None = None,
    namespaces: tuple[str, ...] = ROLES["worker"],
) -> str:
    opts = [f'namespaces="{",".join(namespaces)}"']
    if valid_after:
        opts.append(f'valid-after="{valid_after}"')
    if valid_before:
        opts.append(f'valid-before="{valid_before}"')
    return f"{name} {','.join(opts)} {public_line(public, '')}".rstrip()


def normalize_validity(text: str) -> str:
    """Accept YYYYMMDD[HHMM[SS]][Z] or YYYY-MM-DD[THH:MM[:SS]][Z]; return OpenSSH form with Z."""
    compact = re.sub(r"[-:T]", "", text.strip()).rstrip("Zz")
    parse_ssh_time(compact)
    return compact + "Z"
