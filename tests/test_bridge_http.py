"""The bridge's HTTP surface: one error shape."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason='the bridge needs pip install "hermes-context[bridge]"')
pytest.importorskip("sse_starlette", reason='the bridge needs pip install "hermes-context[bridge]"')

from bridge_kit import make_client  # noqa: E402
from hermes_context.llm.testing import Reply, ScriptedLLMServer  # noqa: E402


@pytest.fixture
def model():
    with ScriptedLLMServer(responder=lambda body: Reply.text("bridge answer")) as srv:
        yield srv


def error_of(response):
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"type", "message"}, body
    return body["error"]


# -- one error shape --------------------------------------------------------------------


def test_a_missing_message_is_404_with_type_and_message_in_place(hermes_home, model):
    client, alice, _ = make_client(hermes_home, model)
    with client:
        session = client.post("/v1/sessions", headers=alice).json()["id"]
        response = client.get(f"/v1/sessions/{session}/recall/999", headers=alice)
    assert response.status_code == 404
    error = error_of(response)
    assert error["type"] == "not_found" and "999" in error["message"]
    assert str(hermes_home) not in response.text
