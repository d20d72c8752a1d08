"""Credential shapes: every planted kind is found and redacted, plain text is left alone."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hermes_context import MemoryStore
from hermes_context.credentials import find_credentials, redact_credentials

_B = "Qx7vT2mL9pR4sW8yZ1bN5cF3hJ6kD0aEuGiOt6sW8yZ1bN5cF3hJ6kD0aE"
# (text with a credential, the secret part that must go, the kind it is reported as)
PLANTED = [
    (f"OPENAI_API_KEY=sk-proj-{_B[:40]}", f"sk-proj-{_B[:40]}", "openai_key"),
    (f"key: sk-{_B[:48]}", f"sk-{_B[:48]}", "openai_key"),
    (f"ANTHROPIC_API_KEY=sk-ant-api03-{_B}", f"sk-ant-api03-{_B}", "anthropic_key"),
    (f"token ghp_{_B[:36]} here", f"ghp_{_B[:36]}", "github_token"),
    (f"gho_{_B[:36]}", f"gho_{_B[:36]}", "github_token"),
    (f"github_pat_11ABCDEFG0_{_B[:40]}", f"github_pat_11ABCDEFG0_{_B[:40]}", "github_token"),
    ("aws AKIAQYLPMN5HHHFPZAM2 id", "AKIAQYLPMN5HHHFPZAM2", "aws_access_key"),
    (
        "aws_secret_access_key = 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",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8kL2mN4p",
        "aws_secret_key",
    ),
    ("xoxb-" + "1234567890-0987654321-" + _B[:24], _B[:24], "slack_token"),
    (f"AIza{_B[:35]}", f"AIza{_B[:35]}", "google_api_key"),
    (f"stripe sk_live_{_B[:24]}", f"sk_live_{_B[:24]}", "stripe_key"),
    (f"rk_live_{_B[:24]}", f"rk_live_{_B[:24]}", "stripe_key"),
    (f"HF_TOKEN=hf_{_B[:34]}", f"hf_{_B[:34]}", "huggingface_token"),
    (f"glpat-{_B[:20]}", f"glpat-{_B[:20]}", "gitlab_token"),
    (
        "Authorization: Bearer " + _B[:32],
        _B[:32],
        "bearer_token",
    ),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA"
        + _B
        + "\n-----END OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAA",
        "private_key",
    ),
    (
        '{"key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0' + _B[:20] + "\\n",
        "MIIEvQIBADANBgkqhkiG9w0",
        "private_key",
    ),
    ("postgres://refunds:Pa55w0rd@db.internal:5432/pay", "Pa55w0rd", "url_credentials"),
    ("https://deploy:tok3n-xyz@git.example.org/repo.git", "tok3n-xyz", "url_credentials"),
    ('{"password": "hunter22", "user": "bob"}', "hunter22", "secret_assignment"),
    ("DB_PASSWORD=correct-horse-9", "correct-horse-9", "secret_assignment"),
    ("client_secret: 'f00dBabe77aa'", "f00dBabe77aa", "secret_assignment"),
    ("SENTRY_AUTH_TOKEN=8c2f1e0a9b7d4c3e", "8c2f1e0a9b7d4c3e", "secret_assignment"),
    ("export MY_SERVICE_KEY=Zk3pQ9rT2vX8", "Zk3pQ9rT2vX8", "secret_assignment"),
]

PLAIN = [
    "MAX_TOKENS=4096 and TIMEOUT=30",
    "def login(password: str) -> bool:",
    "the primary_key=id column, sort key: lambda x",
    "REFUND_TIMEOUT was changed from 5 to 0.5 seconds in the last deploy",
    "git commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixed it",
    "visit https://example.com/docs?page=2 and skip ghp_short",
    "api_key = os.environ['OPENAI_API_KEY']",
    "password: ${DB_PASSWORD}",
    "token = <your token here>",
    "-----BEGIN PUBLIC KEY----- is fine to share",
]


@pytest.mark.parametrize(("text", "secret", "kind"), PLANTED)
def test_each_planted_credential_is_redacted_with_its_kind(text, secret, kind):
    out = redact_credentials(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    assert kind in find_credentials(text)


@pytest.mark.parametrize("text", PLAIN)
def test_text_without_a_credential_is_unchanged(text):
    assert redact_credentials(text) == text


_KEYS = st.sampled_from([secret for _, secret, _ in PLANTED])
_WORDS = st.text(st.characters(codec="ascii", categories=["L", "N", "Zs", "P"]), max_size=60)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_WORDS, st.sampled_from(PLANTED)), min_size=1, max_size=4), _WORDS)
def test_redaction_is_idempotent_and_leaves_no_planted_secret(pieces, tail):
    text = "\n".join(f"{words}\n{planted}" for words, (planted, _, _) in pieces) + "\n" + tail
    once = redact_credentials(text)
    assert redact_credentials(once) == once
    for _, (_, secret, _) in pieces:
        assert secret not in once


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(codec="ascii", categories=["L", "Zs"]), max_size=200))
def test_letters_and_spaces_are_never_changed(text):
    assert redact_credentials(text) == text


@pytest.mark.parametrize(
    ("text", "secret"),
    [(text, secret) for text, secret, kind in PLANTED if kind != "secret_assignment"],
)
def test_a_memory_write_carrying_a_provider_key_is_refused(hermes_home, text, secret):
    store = MemoryStore()
    result = store.add("memory", f"deploy notes: {text}")
    assert result["success"] is False and result["reason"] == "security"
    assert any(p.startswith("secret.") for p in result["pattern_ids"])
    assert secret not in "".join(store.entries("memory"))


def test_a_placeholder_password_in_a_url_is_redacted_but_not_refused_as_memory():
    """Documentation's `user:pass@` is no credential for the scanner; compaction still hides it."""
    from hermes_context.memory.threats import scan_for_threats

    example = "Compose sets DATABASE_URL=postgres://user:pass@db:5432/mydb for the app."
    assert "secret.url_credentials" not in scan_for_threats(example, semantic=False)
    assert "user:pass@" not in redact_credentials(example)
    real = "The payments DB is postgres://refunds:Pa55w0rd@db.internal:5432/pay"
    assert "secret.url_credentials" in scan_for_threats(real, semantic=False)
