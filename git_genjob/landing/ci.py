"""`git genjob ci init github|gitlab`: the worker, land and audit workflows of a forge, written
into the work tree from the templates in git_genjob/resources/ (docs/ci.md).

The templates hold `@@NAME@@` placeholders (forge YAML is full of `${{ }}` and `$VAR`, so no
`string.Template`); every value put in one is checked here, so a generated file is never
malformed by an option.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from git_genjob.documents.config import in_the_clear
from git_genjob.documents.errors import BadInput, Refused
from git_genjob.landing.hooks import package_parent
from git_genjob.storage.store import Store
from git_genjob.worker.gateway.dialects import DIALECTS, KEY_ENV

FORGES = ("github", "gitlab")
GITHUB_FILES = {
    ".github/workflows/genjob-workers.yml": "ci-github-workers.yml",
    ".github/workflows/genjob-land.yml": "ci-github-land.yml",
    ".github/workflows/genjob-audit.yml": "ci-github-audit.yml",
}
GITLAB_FILE = ".gitlab/genjob-ci.yml"
GITLAB_ROOT = ".gitlab-ci.yml"
GITLAB_INCLUDE = f"include:\n  - local: {GITLAB_FILE}\n"
MAX_WORKERS = 256  # GitHub's matrix limit; GitLab's `parallel` allows 200
CRON_FIELD = re.compile(r"^[0-9*/,\-A-Za-z]+$")
BRANCH = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/\-]*$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# `pip install git-genjob` (any options, extras or version range) with no source: a bare name
BARE_NAME = re.compile(
    r"\b(?:pip3?|pipx|uv(?:\s+pip|\s+tool)?)\s+install\b(?:\s+-\S+)*\s+['\"]?git[-_]genjob(?:\[[^\]]*\])?(?:[<>=!~]=?[^\s'\"]*)?['\"]?(?!\s*@)(?:\s|$)"
)
PINNED_EXAMPLE = 'python -m pip install "git-genjob @ git+https://github.com/YOU/git-genjob@COMMIT"'
# One line of shell: the push token for git alone, through git's environment config (never on
# disk, never in the generator's environment): what actions/checkout would persist in .git/config.
GIT_AUTH = (
    'GIT_CONFIG_VALUE_0="AUTHORIZATION: basic $(printf \'x-access-token:%s\' "$GENJOB_PUSH_TOKEN" | base64 -w0)"; '
    'export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0="http.$GENJOB_SERVER/.extraheader" GIT_CONFIG_VALUE_0'
)


def default_install(root: str | None = None) -> tuple[str, str]:
    """(the install line, why) when --install is not given: this git-genjob's own checkout,
    pinned by its commit, where it has a remote a runner can reach; else a line that fails the
    job, saying to pass --install. Never a bare name from a package index."""
    import subprocess

    root = root or package_parent()
    if os.path.exists(os.path.join(root, ".git")):  # a directory, or a worktree's file
        git = ["git", "-C", root]
        url = subprocess.run([*git, "remote", "get-url", "origin"], capture_output=True, text=True).stdout.strip()
        sha = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
        if url.startswith(("https://", "ssh://", "git@")) and re.fullmatch(r"[0-9a-f]{40}", sha) and not dirty.stdout:
            url = "ssh://git@" + url[4:].replace(":", "/", 1) if url.startswith("git@") else url
            line = f'python -m pip install "git-genjob @ git+{url}@{sha}"'
            return line, f"pinned to commit {sha[:12]} of the git-genjob this ci init ran from ({url})"
    line = (
        "echo 'no pinned source for git-genjob: run git genjob ci init again with --install LINE "
        "(docs/ci.md)' >&2; exit 2"
    )
    return line, (
        "no pinned source was found (this git-genjob is no clean checkout with an https or ssh origin), so the "
        f"install step fails until you run ci init again with --install, e.g. --install '{PINNED_EXAMPLE}'"
    )


def chosen_install(opts: CiOptions) -> tuple[str, str]:
    """(the install line the templates run, why): --install as given, else default_install()."""
    return (opts.install, "as --install says") if opts.install is not None else default_install()


def land_schedule(schedule: str) -> str:
    """The land workflow's cron: half an hour after the workers' tick where the minute is a number."""
    fields = schedule.split()
    if fields[0].isdigit():
        fields[0] = str((int(fields[0]) + 30) % 60)
    return " ".join(fields)


@dataclass
class CiOptions:
    forge: str
    workers: int = 4
    max_jobs: int = 5
    generator: str | None = None
    schedule: str = "17 * * * *"
    branch: str = "main"
    land_branch: str = "genjob/land"
    install: str | None = None  # None: the pinned source default_install() finds (SPEC §12.3)
    model_key_env: str = "OPENAI_API_KEY"
    gateway: str | None = None  # NAME=URL for work --gateway; None: the model_key_env's provider
    timeout_minutes: int = 60
    work_options: tuple[str, ...] = ()
    force: bool = False


@dataclass
class CiReport:
    forge: str
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "forge": self.forge,
            "written": self.written,
            "unchanged": self.unchanged,
            "next_steps": self.next_steps,
        }

    def lines(self) -> list[str]:
        out = [f"wrote {p}" for p in self.written] + [f"unchanged {p}" for p in self.unchanged]
        return out + ["next:"] + [f"  {step}" for step in self.next_steps]


Rule = tuple[bool, str, str | None]  # (holds, the refusal when it does not, its hint)


def check_options(opts: CiOptions) -> None:
    """Every value that goes into a template, refused (exit 2, nothing written) when it would not fit."""
    _refuse_first(_shape_rules(opts))
    gateway_of(opts)
    _refuse_first(_text_rules(opts))


def _refuse_first(rules: list[Rule]) -> None:
    """Raise BadInput for the first rule, in order, that does not hold."""
    for holds, message, hint in rules:
        if not holds:
            raise BadInput(message, hint)


def _shape_rules(opts: CiOptions) -> list[Rule]:
    """The forge, the counts, the schedule, the branches and the key's variable name."""
    return [
        (
            opts.forge in FORGES,
            f"unknown forge {opts.forge!r}",
            "git genjob ci init github, or git genjob ci init gitlab",
        ),
        (1 <= opts.workers <= MAX_WORKERS, f"--workers {opts.workers} is not between 1 and {MAX_WORKERS}", None),
        (
            _is_cron(opts.schedule),
            f"--schedule {opts.schedule!r} is not a cron line",
            'five fields, e.g. --schedule "17 * * * *"',
        ),
        *(
            (_is_branch(value), f"{name} {value!r} is not a branch name these files can hold", "e.g. main, genjob/land")
            for name, value in (("--branch", opts.branch), ("--land-branch", opts.land_branch))
        ),
        (
            opts.branch != opts.land_branch,
            "--land-branch must differ from --branch",
            "land proposes a pull request into --branch",
        ),
        (
            ENV_NAME.match(opts.model_key_env) is not None,
            f"--model-key-env {opts.model_key_env!r} is not an environment variable name",
            None,
        ),
    ]


def _is_cron(schedule: str) -> bool:
    """Five cron fields of the characters a cron line holds."""
    fields = schedule.split()
    return len(fields) == 5 and all(CRON_FIELD.match(f) for f in fields)


def _is_branch(value: str) -> bool:
    """A branch name git takes and a template can hold unquoted."""
    return bool(BRANCH.match(value)) and ".." not in value and not value.endswith((".lock", "/", "."))


def _text_rules(opts: CiOptions) -> list[Rule]:
    """The free text put into the workflows' shell: one line each, then --install, then --generator."""
    texts = [("--generator", opts.generator or ""), ("--install", opts.install or "")]
    texts += [("--work-option", o) for o in opts.work_options]
    one_line: list[Rule] = [
        (_is_one_line(text), f"{what} {text!r} holds a newline, '${{{{' or '@@'", "one line of shell, no expressions")
        for what, text in texts
    ]
    return one_line + _install_rules(opts.install) + _generator_rules(opts.generator)


def _is_one_line(text: str) -> bool:
    """No newline, NUL, GitHub expression or template placeholder."""
    return not any(c in text for c in "\n\r\0") and "${{" not in text and "@@" not in text


def _install_rules(install: str | None) -> list[Rule]:
    """--install, when given: not empty, and no bare package-index name for git-genjob."""
    if install is None:
        return []
    return [
        (bool(install.strip()), "--install is empty", f"e.g. --install '{PINNED_EXAMPLE}'"),
        (
            not BARE_NAME.search(install),
            f"--install {install!r} installs git-genjob by a bare name from a package index",
            "nobody publishes git-genjob there: whoever registers the name would run code beside the worker's and "
            f"the model's keys; pin a source you control, e.g. --install '{PINNED_EXAMPLE}'",
        ),
    ]


def _generator_rules(generator: str | None) -> list[Rule]:
    """--generator, when given: KIND:REST of a known kind, and openai's with a #MODEL."""
    if generator is None:
        return []
    kind, sep, rest = generator.partition(":")  # not parse_spec: its program lives on the runner
    return [
        (
            kind in ("exec", "http", "openai") and bool(sep) and bool(rest.strip()),
            f"--generator {generator!r} is malformed",
            "use exec:COMMAND, http:URL or openai:BASE_URL#MODEL",
        ),
        (
            kind != "openai" or bool(rest.partition("#")[2]),
            f"--generator {generator!r} needs a model",
            "use openai:BASE_URL#MODEL",
        ),
    ]


PROVIDERS = {
    "OPENAI_API_KEY": "openai=https://api.openai.com",
    "ANTHROPIC_API_KEY": "anthropic=https://api.anthropic.com",
}


def gateway_of(opts: CiOptions) -> str:
    """The workers' `--gateway NAME=URL` (SPEC §12.1): the model key stays in the worker's
    environment and its gateway adds it to each call; the generator never holds it."""
    text = opts.gateway or PROVIDERS.get(opts.model_key_env)
    if text is None:
        raise BadInput(
            f"--model-key-env {opts.model_key_env} names no provider the workers' gateway knows",
            f'pass --gateway NAME=URL too, with [gateway.NAME] dialect and key_env = "{opts.model_key_env}" in '
            ".genjob/config.toml",
        )
    name, sep, url = text.partition("=")
    if not sep or not _gateway_url_ok(name, url):
        raise BadInput(
            f"--gateway {text!r} is not NAME=https://URL (plain http only to a runner's own 127.0.0.1)",
            "e.g. --gateway anthropic=https://api.anthropic.com",
        )
    if name in DIALECTS and KEY_ENV[name] != opts.model_key_env:
        raise BadInput(
            f"--gateway {name}=… reads its key from {KEY_ENV[name]}, but --model-key-env is {opts.model_key_env}",
            f"--model-key-env {KEY_ENV[name]}, or another NAME with [gateway.NAME] key_env in .genjob/config.toml",
        )
    return text


def _gateway_url_ok(name: str, url: str) -> bool:
    """NAME is an identifier and URL https (plain http only to 127.0.0.1), with nothing a shell
    or the workflow's YAML would read."""
    return (
        name.isidentifier()
        and not in_the_clear(url)
        and not any(c in url for c in " '\"\\$`")
        and url.isascii()
        and url.isprintable()
    )


def _yaml_str(text: str) -> str:
    """A double-quoted YAML scalar (JSON's escapes are YAML's)."""
    return json.dumps(text, ensure_ascii=False)


def render(opts: CiOptions, install: str | None = None) -> dict[str, str]:
    """Path -> content of the files `ci init` writes for opts.forge (install: chosen_install's
    line, when the caller has it already)."""
    from importlib.resources import files

    check_options(opts)
    extra = "".join(" " + shlex.quote(o) for o in opts.work_options)
    values = {
        "WORKERS": str(opts.workers),
        "MAX_JOBS": str(opts.max_jobs),
        "SCHEDULE": opts.schedule,
        "BRANCH": opts.branch,
        "LAND_BRANCH": opts.land_branch,
        "INSTALL": _yaml_str(install if install is not None else chosen_install(opts)[0]),
        "GIT_AUTH": GIT_AUTH,
        "LAND_SCHEDULE": land_schedule(opts.schedule),
        "MODEL_KEY_ENV": opts.model_key_env,
        "GATEWAY": shlex.quote(gateway_of(opts)),
        "TIMEOUT_MINUTES": str(opts.timeout_minutes),
        "WORK_EXTRA": extra,
        "MATRIX": "[" + ", ".join(str(n) for n in range(1, opts.workers + 1)) + "]",
    }
    resources = files("git_genjob") / "resources"
    out = {}
    if opts.forge == "github":
        # a GitHub expression string literal: single quotes, doubled inside
        # the repository variable, else a GitHub expression string literal (single quotes, doubled
        # inside), the whole a double-quoted YAML scalar: a `#` or `: ` in the spec stays in it
        literal = "'" + (opts.generator or "").replace("'", "''") + "'"
        values["GENERATOR"] = _yaml_str("${{ vars.GENJOB_GENERATOR || " + literal + " }}")
        for path, name in GITHUB_FILES.items():
            out[path] = _fill((resources / name).read_text(encoding="utf-8"), values)
    else:
        # GitLab expands $VAR in variables: $$ keeps a generator's own $ for its shell
        values["GENERATOR"] = _yaml_str((opts.generator or "").replace("$", "$$"))
        out[GITLAB_FILE] = _fill((resources / "ci-gitlab.yml").read_text(encoding="utf-8"), values)
    return out


def _fill(template: str, values: dict[str, str]) -> str:
    text = template
    for name, value in values.items():
        text = text.replace(f"@@{name}@@", value)
    left = re.findall(r"@@[A-Z_]+@@", text)
    assert not left, left  # a template names only the values above
    return text


def ci_init(store: Store, opts: CiOptions) -> CiReport:
    """Write the forge's files into the work tree; refuse (exit 1, nothing written) to replace a
    file that differs unless opts.force. A file already holding exactly this content is left."""
    root = store.workdir
    if root is None:
        raise BadInput("ci init needs a work tree (this repository is bare)", "run it in a clone")
    check_options(opts)  # before chosen_install starts any git
    install = chosen_install(opts)  # once: its git calls serve the files and the next steps
    files = render(opts, install[0])
    report = CiReport(opts.forge)
    gitlab_root = os.path.join(root, GITLAB_ROOT)
    if opts.forge == "gitlab" and not os.path.lexists(gitlab_root):
        files[GITLAB_ROOT] = GITLAB_INCLUDE
    report.unchanged, conflicts = _compare(root, files)
    if conflicts and not opts.force:
        raise Refused(
            f"{', '.join(conflicts)} already exist{'s' if len(conflicts) == 1 else ''} with other content; "
            "nothing written",
            f"git genjob ci init {opts.forge} --force replaces them (then git diff shows what changed)",
        )
    report.written = _write(root, {rel: text for rel, text in files.items() if rel not in report.unchanged})
    report.next_steps = _next_steps(opts, GITLAB_ROOT not in files and not _includes(gitlab_root, GITLAB_FILE), install)
    return report


def _compare(root: str, files: dict[str, str]) -> tuple[list[str], list[str]]:
    """(the files already holding their content, the ones holding other content); refused when
    a path is a link or no regular file."""
    unchanged: list[str] = []
    conflicts: list[str] = []
    for rel, text in files.items():
        path = os.path.join(root, rel)
        if os.path.islink(path) or (os.path.lexists(path) and not os.path.isfile(path)):
            raise Refused(f"{rel} exists and is not a regular file", "move it away, then run ci init again")
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as fh:
                (unchanged if fh.read() == text else conflicts).append(rel)
    return unchanged, conflicts


def _write(root: str, files: dict[str, str]) -> list[str]:
    """Write each file through a temporary beside it (no half-written file); the paths written."""
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".genjob-tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    return list(files)


def _includes(path: str, included: str) -> bool:
    """Whether the project's own pipeline file already names the included file."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return included in fh.read()
    except OSError:
        return False


def _next_steps(opts: CiOptions, had_gitlab_ci: bool, chosen: tuple[str, str]) -> list[str]:
    install, why = chosen
    steps = [
        f"runners install git-genjob with: {install} ({why})",
        "git genjob keygen --name ci-worker --out ci-worker.key; git genjob trust add ci-worker ci-worker.key.pub; "
        "commit .genjob/",
    ]
    if opts.forge == "github":
        steps += [
            "store ci-worker.key as the secret GENJOB_WORKER_KEY and the model's API key as GENJOB_MODEL_KEY "
            "(Settings > Secrets and variables > Actions), then delete ci-worker.key",
            *([] if opts.generator else ["set the repository variable GENJOB_GENERATOR (e.g. exec:...)"]),
            "add the rulesets of docs/ci.md that keep the workers' token off branches and tags",
            "git add .github/workflows && git commit -m 'ci: genjob workers, land and audit'",
        ]
    else:
        steps += [
            "store ci-worker.key as the File variable GENJOB_WORKER_KEY (protected, masked where possible), the "
            "model's API key as GENJOB_MODEL_KEY and the push tokens as GENJOB_WORKER_PUSH_TOKEN and "
            "GENJOB_LAND_TOKEN (Settings > CI/CD > Variables), then delete ci-worker.key",
            *([] if opts.generator else ["set the CI/CD variable GENJOB_GENERATOR (e.g. exec:...)"]),
            f'add a pipeline schedule (Build > Pipeline schedules), e.g. "{opts.schedule}"',
            "protect every branch and tag so the workers' Developer token cannot push them (docs/ci.md)",
        ]
        if had_gitlab_ci:
            steps.append(f"add to your {GITLAB_ROOT}: include: [{{local: {GITLAB_FILE}}}]")
        steps.append("git add .gitlab .gitlab-ci.yml && git commit -m 'ci: genjob workers, land and audit'")
    return steps
