"""ask and cache ls/show/drift/accept/reject/explain/import: the replay cache (SPEC §7)."""

from __future__ import annotations

import json
import os

import click

from git_genjob.cli.common import (
    CONTEXT,
    emit,
    json_option,
    main,
    open_store,
    parse_duration,
)
from git_genjob.documents.display import printable, terminal_json
from git_genjob.documents.errors import EXIT_REFUSED


@main.command(context_settings=CONTEXT)
@click.option(
    "--endpoint",
    required=True,
    help="http:URL or a bare URL (POST {prompt, format: text}, the body is the answer), or "
    "openai:BASE_URL (chat completions at BASE_URL/chat/completions).",
)
@click.option("--model", help="Model name (required with openai:; recorded in the fingerprint).")
@click.option("--prompt-file", required=True, type=click.Path(dir_okay=False, allow_dash=True), help="The prompt.")
@click.option("--out-file", required=True, type=click.Path(dir_okay=False), help="Where the answer is written.")
@click.option(
    "--mode",
    type=click.Choice(["replay", "offline", "refresh"]),
    default="replay",
    show_default=True,
    help="replay: serve or ask and record; offline: never ask (a miss is exit 3); refresh: ask again.",
)
@click.option("--key", help="Scope the answer to this operation.")
@click.option("--timeout", default="120s", show_default=True, help="How long to wait for the endpoint.")
@click.option(
    "--signing-key",
    "key_file",
    type=click.Path(dir_okay=False),
    help="Sign what is recorded (a key trusted for genjob-replay), so other clones replay it too.",
)
@json_option
def ask(
    endpoint: str,
    model: str | None,
    prompt_file: str,
    out_file: str,
    mode: str,
    key: str | None,
    timeout: str,
    key_file: str | None,
    as_json: bool,
) -> None:
    """One cached model call: replay what was asked before, else ask and record.

    Dialects as the generators name them: `--endpoint http://127.0.0.1:8080/model` (or
    http:URL) is the plain one, `--endpoint openai:http://127.0.0.1:8080/v1 --model M` chat
    completions.
    """
    from git_genjob.replay.commands import ask as do_ask

    sign = None
    if key_file:
        from git_genjob.documents.keys import read_signing_key

        sign = read_signing_key(os.path.expanduser(key_file))
    store = open_store()
    doc = do_ask(store, endpoint, model, prompt_file, out_file, mode, key, parse_duration(timeout), sign)
    emit(doc, as_json, lambda: click.echo(f"{doc['source']} {doc['fingerprint']}"))


@main.group(context_settings=CONTEXT)
def cache() -> None:
    """The replay cache in refs/genjob/replays."""


@cache.command("ls", context_settings=CONTEXT)
@json_option
def cache_ls(as_json: bool) -> None:
    """Every fingerprint, its served answer and pending drift."""
    from git_genjob.replay.commands import ls

    rows = ls(open_store())

    def human() -> None:
        for r in rows:
            if r["damaged"]:
                click.echo(f"{r['fingerprint']} DAMAGED: {printable(r['damaged'])}")
                continue
            click.echo(f"{r['fingerprint']} {(r['served'] or '-')[:12]} {'DRIFT' if r['pending'] else ''}".rstrip())
        for r in rows:
            if r["ignored"]:
                click.echo(
                    f"warning: {r['fingerprint']}: {r['ignored']} event(s) no trusted key signed and this clone did "
                    f"not write; never served (git genjob cache show {r['fingerprint'][:12]})",
                    err=True,
                )

    emit(rows, as_json, human)


@cache.command("show", context_settings=CONTEXT)
@click.argument("fp")
@json_option
def cache_show(fp: str, as_json: bool) -> None:
    """One fingerprint: request, events and answers."""
    from git_genjob.replay.commands import show as do_show

    doc = do_show(open_store(), fp)
    emit(doc, as_json, lambda: click.echo(terminal_json(json.dumps(doc, indent=2, ensure_ascii=False))))
    if doc["ignored"] and not as_json:
        click.echo(f"warning: {len(doc['ignored'])} event(s) do not count here and are never served", err=True)


@cache.command("drift", context_settings=CONTEXT)
@click.argument("fp")
@json_option
def cache_drift(fp: str, as_json: bool) -> None:
    """Exit 1 while a drift of FP awaits review."""
    from git_genjob.replay.commands import show as do_show

    doc = do_show(open_store(), fp)
    fp = doc["fingerprint"]
    emit(
        {"fingerprint": fp, "served": doc["served"], "pending": doc["pending"]},
        as_json,
        lambda: click.echo(f"drift {fp}: " + ", ".join(doc["pending"]) if doc["pending"] else f"no drift {fp}"),
    )
    if doc["pending"]:
        raise SystemExit(EXIT_REFUSED)


@cache.command("accept", context_settings=CONTEXT)
@click.argument("fp")
@click.argument("sha")
def cache_accept(fp: str, sha: str) -> None:
    """Serve answer SHA for FP from now on."""
    from git_genjob.planner.trust import planner_key
    from git_genjob.replay.cache import Cache, accept

    store = open_store()
    cache = Cache(store, sign=planner_key(store))  # a review signed by a planner key counts in other clones
    sha = accept(cache, fp, sha)
    click.echo(f"accepted {sha[:19]} for {cache.resolve(fp)}")


@cache.command("reject", context_settings=CONTEXT)
@click.argument("fp")
@click.argument("sha")
def cache_reject(fp: str, sha: str) -> None:
    """Reject candidate answer SHA for FP (the served answer stays)."""
    from git_genjob.planner.trust import planner_key
    from git_genjob.replay.cache import Cache, reject

    store = open_store()
    cache = Cache(store, sign=planner_key(store))  # a review signed by a planner key counts in other clones
    sha = reject(cache, fp, sha)
    click.echo(f"rejected {sha[:19]} for {cache.resolve(fp)}")


@cache.command("explain", context_settings=CONTEXT)
@click.option("--prompt-file", required=True, type=click.Path(dir_okay=False, allow_dash=True), help="The prompt.")
@click.option("--endpoint", required=True, help="As for ask: http:URL or a bare URL, or openai:BASE_URL.")
@click.option("--model", help="Model name (required with openai:).")
@click.option("--key", help="Operation scope.")
@json_option
def cache_explain(prompt_file: str, endpoint: str, model: str | None, key: str | None, as_json: bool) -> None:
    """Print every fingerprint component and every rewrite of the prompt."""
    from git_genjob.replay.commands import explain

    doc = explain(open_store(), prompt_file, endpoint, model, key)

    def human() -> None:
        click.echo(f"fingerprint {doc['fingerprint']}")
        for k in ("endpoint", "model", "key"):
            click.echo(f"{k:<9} {doc['request'].get(k)}")
        click.echo(f"params    {json.dumps(doc['request']['params'], sort_keys=True)}")
        for r in doc["rewrites"]:
            click.echo(f"rewrite   {r}")
        click.echo("prompt (normalized):")
        click.echo(doc["request"]["prompt"])

    emit(doc, as_json, human)


@cache.command("import", context_settings=CONTEXT)
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@json_option
def cache_import(directory: str, as_json: bool) -> None:
    """Import <fingerprint>.jsonl replay logs from DIRECTORY."""
    from git_genjob.replay.cache import Cache, import_dir

    fps = import_dir(Cache(open_store()), directory)
    emit({"imported": fps}, as_json, lambda: click.echo(f"imported {len(fps)} fingerprint(s)"))
