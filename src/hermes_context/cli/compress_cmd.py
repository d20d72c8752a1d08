"""``hermes-context compress``: compress a message file and print the loss report."""

from __future__ import annotations

import contextlib
from typing import Any

import click

from ..compression import CompressionResult, ContextCompressor
from ..config import Config, load_config
from ._common import (
    EXIT_FAILURE,
    EXIT_LLM,
    NotFoundError,
    emit_json,
    handle_errors,
    home_option,
    json_option,
    stderr_console,
    stdout_console,
)
from .message_files import check_output_path, read_messages, write_messages


def _llm_overrides(
    base_url: str | None, api_key_env: str | None, summary_model: str | None
) -> dict[str, Any]:
    model: dict[str, Any] = {}
    if base_url:
        model["base_url"] = base_url
    if api_key_env:
        model["api_key_env"] = api_key_env
    if summary_model:
        model["name"] = summary_model
    return {"model": model} if model else {}


def _build_compressor(
    cfg: Config, *, context_length: int | None, model: str | None, use_llm: bool | None
) -> ContextCompressor:
    return ContextCompressor.from_config(
        cfg, context_length=context_length, model=model or "", use_llm=use_llm
    )


def _working(compressor: ContextCompressor) -> Any:
    """A spinner on stderr while an LLM summarises (the only slow step); a no-op otherwise."""
    if compressor.summarizer is None:
        return contextlib.nullcontext()
    name = getattr(compressor.summarizer, "model", None) or "the summary model"
    return stderr_console().status(f"summarising with {name}...")


def _result_json(result: CompressionResult, *, include_messages: bool) -> dict[str, Any]:
    data: dict[str, Any] = {
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "dropped": result.dropped,
        "used_fallback": result.used_fallback,
        "aborted": result.aborted,
        "error": result.error,
        "summary": result.summary,
        "report": result.report.to_dict(),
    }
    if include_messages:
        data["messages"] = result.messages
    return data


def _print_report(
    result: CompressionResult, *, source: str, messages_in: int, note: str | None
) -> None:
    console = stdout_console()
    saved = result.tokens_before - result.tokens_after
    share = saved / result.tokens_before if result.tokens_before else 0.0
    console.print(
        f"[bold]{source}[/bold]: {messages_in} messages, {result.tokens_before:,} -> "
        f"{result.tokens_after:,} tokens ({share:.0%} saved), {len(result.messages)} messages out"
    )
    console.print(result.report.render(), markup=False)
    if note:
        console.print(note, style="dim")


def _compress_session(
    cfg: Config,
    session_id: str,
    compressor: ContextCompressor,
    *,
    persist: bool,
    in_place: bool,
    force: bool,
    focus: str | None,
    target_tokens: int | None,
) -> tuple[list[dict[str, Any]], CompressionResult, str | None]:
    from ..sessions import DB_FILENAME, SessionDB, attach_compressor, compress_session

    db = SessionDB(cfg.hermes_home / DB_FILENAME)
    try:
        if db.get_session(session_id) is None:
            raise NotFoundError(
                f"no session {session_id!r} in {db.path}: see 'hermes-context sessions list'"
            )
        messages = db.get_messages(session_id)
        if persist:
            carried, result = compress_session(
                db,
                session_id,
                compressor,
                in_place=in_place,
                force=force,
                focus=focus,
                target_tokens=target_tokens,
            )
            return messages, result, carried
        attach_compressor(db, session_id, compressor)
        result = compressor.compress(
            messages, force=force, focus=focus, target_tokens=target_tokens
        )
        return messages, result, None
    finally:
        db.close()


@click.command()
@click.argument("input_path", metavar="[INPUT]", type=str, required=False)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), help="Write the compressed messages here."
)
@click.option(
    "--context-length", type=click.IntRange(min=1), help="Model context window (default: config)."
)
@click.option("--model", help="Model name, for per-model thresholds.")
@click.option("--force", is_flag=True, help="Ignore anti-thrash blocks and cooldowns.")
@click.option("--focus", help="Topic the summary should give most of its budget to.")
@click.option(
    "--target-tokens",
    type=click.IntRange(min=1),
    help="Shrink the result to about this many tokens.",
)
@click.option("--dry-run", is_flag=True, help="Print the report only; write nothing.")
@click.option(
    "--llm/--no-llm",
    "use_llm",
    default=None,
    help="Use the configured LLM summariser (default: when configured).",
)
@click.option("--base-url", help="OpenAI-compatible endpoint for the summary model.")
@click.option("--api-key-env", help="Environment variable holding the API key.")
@click.option("--summary-model", help="Model name for summaries.")
@click.option(
    "--session",
    "session_id",
    help="Compress this stored session (state.db) and persist the result.",
)
@click.option(
    "--rotate/--in-place",
    default=None,
    help="With --session: carry on in a child session, or in the same one "
    "(default: compression.in_place, true).",
)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), help="Config file.")
@home_option
@json_option
@handle_errors
def compress(
    input_path: str,
    output: str | None,
    context_length: int | None,
    model: str | None,
    force: bool,
    focus: str | None,
    target_tokens: int | None,
    dry_run: bool,
    use_llm: bool | None,
    base_url: str | None,
    api_key_env: str | None,
    summary_model: str | None,
    session_id: str | None,
    rotate: bool | None,
    config_path: str | None,
    hermes_home: str | None,
    as_json: bool,
) -> None:
    """Compress the OpenAI messages in INPUT (JSON array, JSONL, or {"messages": [...]}; - for stdin).

    Prints the loss report. The result goes to -o FILE (its folder must exist),
    or to stdout with --json. With --session ID the stored session is compressed
    and the result persisted (in place by default: originals kept as compacted
    rows; --rotate for a child); a session that would not shrink is left alone
    and the command exits 1.
    """
    if bool(input_path) == bool(session_id):
        raise click.UsageError("give either INPUT or --session ID")
    if rotate is not None and not session_id:
        raise click.UsageError("--rotate and --in-place only apply with --session")
    if output and not dry_run:
        check_output_path(output)
    overrides = _llm_overrides(base_url, api_key_env, summary_model)
    if overrides and use_llm is None:
        use_llm = True
    cfg = load_config(config_path, hermes_home=hermes_home, overrides=overrides)
    compressor = _build_compressor(cfg, context_length=context_length, model=model, use_llm=use_llm)
    carried = None
    if rotate is None:
        rotate = not cfg.compression.in_place
    with _working(compressor):
        if session_id:
            messages, result, carried = _compress_session(
                cfg,
                session_id,
                compressor,
                persist=not dry_run,
                in_place=not rotate,
                force=force,
                focus=focus,
                target_tokens=target_tokens,
            )
        else:
            messages = read_messages(input_path)
            result = compressor.compress(
                messages, force=force, focus=focus, target_tokens=target_tokens
            )
    refused = session_id is not None and _not_saved(result)
    if output and not (dry_run or refused or result.aborted):
        write_messages(output, result.messages)
    if as_json:
        data = _result_json(result, include_messages=not output and not dry_run)
        if session_id:
            data["session_id"] = carried or session_id
        emit_json(data)
    else:
        source = f"session {session_id}" if session_id else input_path
        note = _note(result, dry_run=dry_run, output=output, refused=refused)
        if session_id and not (dry_run or refused or result.aborted):
            note = f"persisted in session {carried}" + (" (rotated)" if rotate else "")
        _print_report(result, source=source, messages_in=len(messages), note=note)
    if result.aborted:
        raise SystemExit(EXIT_LLM)
    problem = _refusal(result) if refused else None
    problem = problem or _over_budget(result, target_tokens, compressor.context_length)
    if problem:
        stderr_console().print(f"hermes-context: {problem}", markup=False)
        raise SystemExit(EXIT_FAILURE)


def _not_saved(result: CompressionResult) -> bool:
    """Refused (blocked, nothing to summarise) or no smaller: a session keeps it unrecorded."""
    return not result.aborted and result.tokens_after >= result.tokens_before


def _refusal(result: CompressionResult) -> str:
    reasons = "; ".join(result.report.warnings) or "the result would not be smaller"
    return f"the session was not compressed and nothing was recorded: {reasons}"


def _note(result: CompressionResult, *, dry_run: bool, output: str | None, refused: bool) -> str:
    """The last line of the report: what was written, or why nothing was."""
    if dry_run:
        return "dry run: nothing was written"
    if result.aborted or refused:
        return "nothing was written"
    if output:
        return f"wrote {output}"
    return "use -o FILE to write the compressed messages, or --json to print them"


def _over_budget(result: CompressionResult, target: int | None, window: int) -> str | None:
    """Why the result still does not fit (the target or the window), or None."""
    if result.tokens_after > window:
        return (
            f"the result ({result.tokens_after:,} tokens) is still over the context window "
            f"({window:,}); try --target-tokens or a smaller --context-length tail"
        )
    if target is not None and result.tokens_after > target:
        return (
            f"the result ({result.tokens_after:,} tokens) is over --target-tokens {target:,}: "
            "the system prompt, the protected head and the newest messages need more"
        )
    return None
