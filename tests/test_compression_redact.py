"""Compaction never carries a credential: summary, pinned items, tool summaries, LLM input."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from hermes_context import ContextCompressor
from hermes_context.llm.testing import FunctionSummarizer
from hermes_context.messages import content_text

TRAJECTORIES = Path("/work/shared/data/trajectories")

# Planted credentials in real shapes (built by concatenation so no scanner flags this file).
OPENAI = "sk-proj-" + "Qx7vT2mL9pR4sW8yZ1bN5cF3hJ6kD0aE" + "uGiOt"
GITHUB = "ghp_" + "7fK2mQ9xR4tW1yB8nC5vL3pD6sH0jA2gE4uZ"
DB_PASSWORD = "Pa55w0rd-refund!"
PRIVATE_KEY_BODY = "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM2bsX" + "9cQk1LrT5nW8yZ2bN4cF7hJ0kD3aEuGi"
PRIVATE_KEY = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    + PRIVATE_KEY_BODY
    + "\nOt6sW8yZ1bN5cF3hJ6kD0aEuGiQx7vT2mL9pR4\n-----END RSA PRIVATE KEY-----"
)
SECRETS = (OPENAI, GITHUB, DB_PASSWORD, PRIVATE_KEY_BODY)
DIAGNOSIS = (
    "Found it: REFUND_TIMEOUT was changed from 5 to 0.5 seconds in the last deploy; "
    "the gateway takes about 1.2 s, so the proxy answers 502."
)


def _call(i: int, command: str) -> dict:
    return {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": f"c{i}",
                "type": "function",
                "function": {"name": "terminal", "arguments": json.dumps({"command": command})},
            }
        ],
    }


def _tool(i: int, output: str) -> dict:
    return {"role": "tool", "tool_call_id": f"c{i}", "content": output}


def _session() -> list[dict]:
    """A payments 502 debugging session: secrets early, diagnosis mid-way, filler around."""
    env = (
        "REFUND_TIMEOUT=0.5\nGATEWAY_URL=https://gw.internal/v2\n"
        f"OPENAI_API_KEY={OPENAI}\nDATABASE_URL=postgres://refunds:{DB_PASSWORD}@db.internal:5432/pay\n"
        "LOG_LEVEL=info\n" + "PADDING_LINE=ok\n" * 30
    )
    messages: list[dict] = [
        {"role": "system", "content": "You are a careful ops assistant."},
        {"role": "user", "content": "The refunds endpoint of the payments service returns 502."},
        _call(1, "cat /srv/payments/.env"),
        _tool(1, env),
        {
            "role": "user",
            "content": f"Use my token {GITHUB} to read the deploy repo if you need it.",
        },
        _call(2, "cat /srv/payments/keys/deploy.pem"),
        _tool(2, PRIVATE_KEY + "\n" + "x" * 300),
        {"role": "assistant", "content": "The deploy key is present. Checking the gateway logs."},
    ]
    for i in range(3, 40):
        messages.append({"role": "user", "content": "ok go on"})
        messages.append(_call(i, f"grep -c 502 /var/log/proxy/access.log.{i}"))
        messages.append(_tool(i, f"{i * 7}\n" + "upstream timed out (110) while reading\n" * 20))
        if i == 20:
            messages.append({"role": "assistant", "content": DIAGNOSIS})
        else:
            messages.append({"role": "assistant", "content": f"Log {i} shows more timeouts."})
    messages.append({"role": "user", "content": "Thanks, what should we do next?"})
    messages.append({"role": "assistant", "content": "Restore REFUND_TIMEOUT to 5 seconds."})
    return messages


def _all_text(messages: list[dict]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def _assert_clean(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def test_the_session_carries_every_secret_before_compression():
    text = _all_text(_session())
    for secret in SECRETS:
        assert secret in text


def test_deterministic_compaction_keeps_no_secret_and_originals_stay():
    session = _session()
    before = copy.deepcopy(session)
    result = ContextCompressor(8_000).compress(session, force=True)
    assert not result.aborted and result.dropped > 0
    assert session == before  # the caller's list (what state.db stores) is untouched
    _assert_clean(_all_text(result.messages))
    _assert_clean(result.summary or "")
    assert "[REDACTED:" in (result.summary or "") or "[REDACTED:" in _all_text(result.messages)


def test_deterministic_compaction_under_a_target_keeps_no_secret():
    result = ContextCompressor(32_000).compress(_session(), force=True, target_tokens=1_500)
    _assert_clean(_all_text(result.messages))


def test_llm_summariser_receives_and_returns_no_secret():
    sent: list[list[dict]] = []

    def summarise(messages: list[dict]) -> str:
        sent.append(messages)
        # A model that copies the start of its input (the .env dump) into the summary.
        return (
            "## Goal\n- fix 502\n\n## Critical Context\n- "
            + content_text(messages[-1]["content"])[:2_000]
        )

    comp = ContextCompressor(8_000, summarizer=FunctionSummarizer(summarise))
    result = comp.compress(_session(), force=True)
    assert sent and not result.used_fallback and result.dropped > 0
    _assert_clean(_all_text(sent[0]))
    assert "DRAFT HANDOFF" in _all_text(sent[0])
    _assert_clean(_all_text(result.messages))


def test_llm_summary_that_invents_a_credential_is_redacted():
    leak = f"## Goal\n- fix 502\n\n## Critical Context\n- key {OPENAI} and {GITHUB}"
    comp = ContextCompressor(8_000, summarizer=FunctionSummarizer(lambda m: leak))
    result = comp.compress(_session(), force=True)
    _assert_clean(_all_text(result.messages))
    assert "[REDACTED:openai_key]" in (result.summary or "")


def test_pruned_tool_output_summaries_keep_no_secret():
    comp = ContextCompressor(8_000)
    pruned, reclaimed = comp.prune_tool_results(_session())
    assert reclaimed > 0
    summaries = [m["content"] for m in pruned if m.get("role") == "tool"]
    _assert_clean(json.dumps(summaries))


@pytest.mark.parametrize("name", ["django__django-14752", "sqlfluff__sqlfluff-2419"])
def test_real_trajectory_with_planted_secrets_compacts_clean(name):
    path = TRAJECTORIES / f"{name}.messages.json"
    if not path.exists():
        pytest.skip(f"{path} is not on this machine")
    messages = json.loads(path.read_text())
    planted = copy.deepcopy(messages)
    middle = len(planted) // 3
    spots = [i for i in range(2, len(planted) - 6) if isinstance(planted[i].get("content"), str)]
    assert len(spots) >= 4
    plants = (
        f"\nexport OPENAI_API_KEY={OPENAI}\n",
        f"\nmy token is {GITHUB}\n",
        f"\nDATABASE_URL=postgres://app:{DB_PASSWORD}@db:5432/x\n",
        "\n" + PRIVATE_KEY + "\n",
    )
    for i, plant in zip(spots[middle // 2 :: 3], plants, strict=False):
        planted[i] = {**planted[i], "content": planted[i]["content"] + plant}
    assert all(secret in _all_text(planted) for secret in SECRETS)
    result = ContextCompressor(8_000).compress(planted, force=True, target_tokens=3_000)
    assert not result.aborted
    _assert_clean(_all_text(result.messages))
    llm = FunctionSummarizer(lambda m: "## Goal\n- " + content_text(m[-1]["content"])[:1_500])
    result = ContextCompressor(8_000, summarizer=llm).compress(planted, force=True)
    assert llm.calls and result.dropped > 0
    _assert_clean(_all_text(llm.calls[0]))
    _assert_clean(_all_text(result.messages))
