"""ci init: the forge workflows that make CI runners the worker pool (SPEC §11 CI, docs/ci.md)."""

from __future__ import annotations

import click

from git_genjob.cli.common import CONTEXT, echo_lines, emit, json_option, main, open_store


@main.group(context_settings=CONTEXT)
def ci() -> None:
    """Forge CI files: runners as workers, a land job, an audit of every pull request."""


@ci.command("init", context_settings=CONTEXT)
@click.argument("forge", type=click.Choice(["github", "gitlab"]))
@click.option("--workers", type=click.IntRange(min=1), default=4, show_default=True, help="Runners in the matrix.")
@click.option(
    "--max-jobs", type=click.IntRange(min=1), default=5, show_default=True, help="Jobs each runner works on at most."
)
@click.option(
    "--generator",
    help="The workers' generator spec (default: the forge variable GENJOB_GENERATOR, set in the forge's settings).",
)
@click.option("--schedule", default="17 * * * *", show_default=True, help="Cron line of the workers (UTC).")
@click.option("--branch", default="main", show_default=True, help="The branch land proposes into.")
@click.option("--land-branch", default="genjob/land", show_default=True, help="The branch land commits on.")
@click.option(
    "--install",
    default=None,
    show_default=True,
    help="The shell line that installs git-genjob on a runner, pinned to a source you control (a commit, a "
    "hash). Default: this git-genjob's own checkout at its commit, when it has an https or ssh origin; never "
    "a bare name from a package index.",
)
@click.option(
    "--model-key-env",
    default="OPENAI_API_KEY",
    show_default=True,
    help="The variable the worker reads the model's API key from (filled from the secret GENJOB_MODEL_KEY); its "
    "gateway adds the key to each call, the generator never holds it.",
)
@click.option(
    "--gateway",
    metavar="NAME=URL",
    help="The workers' work --gateway (SPEC §12.1). Default: openai=https://api.openai.com for OPENAI_API_KEY, "
    "anthropic=https://api.anthropic.com for ANTHROPIC_API_KEY.",
)
@click.option(
    "--timeout-minutes", type=click.IntRange(min=1), default=60, show_default=True, help="A worker runner's limit."
)
@click.option(
    "--work-option",
    "work_options",
    multiple=True,
    metavar="ARG",
    help="One more argument for the workers' git genjob work (repeatable), e.g. --work-option=--allow-host=api.x.com.",
)
@click.option("--force", is_flag=True, help="Replace files that exist with other content.")
@json_option
def ci_init(
    forge: str,
    workers: int,
    max_jobs: int,
    generator: str | None,
    schedule: str,
    branch: str,
    land_branch: str,
    install: str | None,
    model_key_env: str,
    gateway: str | None,
    timeout_minutes: int,
    work_options: tuple[str, ...],
    force: bool,
    as_json: bool,
) -> None:
    """Write the worker, land and audit workflows of FORGE (github or gitlab) into the work tree.

    github: .github/workflows/genjob-{workers,land,audit}.yml. gitlab: .gitlab/genjob-ci.yml, and
    .gitlab-ci.yml including it when there is none (else add the include yourself). A file that
    exists with other content is refused (exit 1, nothing written) unless --force. docs/ci.md
    says which secrets, tokens and branch rules each forge needs.
    """
    from git_genjob.landing.ci import CiOptions
    from git_genjob.landing.ci import ci_init as do_ci_init

    opts = CiOptions(
        forge=forge,
        workers=workers,
        max_jobs=max_jobs,
        generator=generator,
        schedule=schedule,
        branch=branch,
        land_branch=land_branch,
        install=install,
        model_key_env=model_key_env,
        gateway=gateway,
        timeout_minutes=timeout_minutes,
        work_options=work_options,
        force=force,
    )
    report = do_ci_init(open_store(), opts)
    emit(report.to_json(), as_json, lambda: echo_lines(report.lines()))
