"""demo, hook and the hidden man: what is not about one job."""

from __future__ import annotations

import os

import click

from git_genjob.cli.common import (
    CONTEXT,
    emit,
    json_option,
    main,
)


@main.command(context_settings=CONTEXT)
@click.option("--keep", is_flag=True, help="Keep the temporary repository and print its path.")
@click.option(
    "--model", metavar="BASE_URL#MODEL", help="Use an OpenAI-compatible server instead of the built-in generator."
)
@json_option
def demo(keep: bool, model: str | None, as_json: bool) -> None:
    """A full round trip in a temporary repository, with nothing to configure."""
    from git_genjob.cli.demo import run_demo

    result = run_demo(keep, model, (lambda _: None) if as_json else click.echo)
    doc = {
        "repository": result.path if keep else None,
        "key": result.key,
        "commit": result.commit,
        "verify": result.verify,
        "log": result.log,
    }
    emit(doc, as_json, lambda: click.echo(f"\nkept the demo repository: {result.path}" if keep else "\ndone."))


@main.command(context_settings=CONTEXT)
@click.argument("name", type=click.Choice(["pre-commit", "commit-msg", "pre-push", "pre-apply"]))
@click.argument("args", nargs=-1)
def hook(name: str, args: tuple[str, ...]) -> None:
    """What the installed hook scripts call (git genjob hook NAME ARGS...)."""
    from git_genjob.landing.hooks import run_hook

    code = run_hook(name, list(args))
    if code:
        raise SystemExit(code)


@main.command(hidden=True, context_settings=CONTEXT)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Write git-genjob.1 into this directory.")
@click.option("--markdown", is_flag=True, help="Print docs/cli.md instead.")
def man(out_dir: str | None, markdown: bool) -> None:
    """Generate the man page (or docs/cli.md) from these commands."""
    from git_genjob import __version__
    from git_genjob.cli.docgen import manpage
    from git_genjob.cli.docgen import markdown as to_markdown

    if markdown:
        click.echo(to_markdown(main), nl=False)
        return
    text = manpage(main, __version__)
    if out_dir is None:
        click.echo(text, nl=False)
        return
    from git_genjob.planner.userfiles import write_atomic

    write_atomic(os.path.join(out_dir, "git-genjob.1"), text)
    click.echo(os.path.join(out_dir, "git-genjob.1"))


@main.command(context_settings=CONTEXT)
@json_option
def doctor(as_json: bool) -> None:
    """Check the sandbox, keys, trust store, notes, hooks and remotes here; each with a fix.

    One line per check (ok, warn, fail or skip), the fix under each warning and failure; exit 1
    when any check fails."""
    from git_genjob.cli.common import echo_lines, open_store
    from git_genjob.documents.errors import EXIT_REFUSED
    from git_genjob.landing.doctor import doctor as run_doctor

    report = run_doctor(open_store())
    emit(report.to_json(), as_json, lambda: echo_lines(report.lines()))
    if report.failed:
        raise SystemExit(EXIT_REFUSED)


@main.command("help", context_settings=CONTEXT)
@click.argument("command", nargs=-1)
def help_(command: tuple[str, ...]) -> None:
    """This list, or COMMAND's help (the same text as git genjob COMMAND -h)."""
    from git_genjob.fasthelp import help_command

    def command_help(argv: list[str]) -> int:
        return int(main.main(args=argv, prog_name="git genjob", standalone_mode=False) or 0)

    code = help_command(list(command), command_help)  # entry.py serves it before click; this is -h's listing
    if code:
        raise SystemExit(code)


@main.command(context_settings=CONTEXT)
def version() -> None:
    """Print the version."""
    from git_genjob import __version__

    click.echo(f"git genjob, version {__version__}")


@main.command(context_settings=CONTEXT)
@click.argument("shell", type=click.Choice(["bash", "zsh"]))
def completion(shell: str) -> None:
    """Print the shell completion script for bash or zsh (source it, or install.sh installs it).

    bash: source <(git genjob completion bash), after git's own completion; `git genjob <TAB>`
    then completes commands and options (git's completion calls _git_genjob). zsh: put the
    output in a file `_git-genjob` on $fpath, or source it.
    """
    from importlib.resources import files

    click.echo((files("git_genjob") / "resources" / f"completion.{shell}").read_text(encoding="utf-8"), nl=False)
