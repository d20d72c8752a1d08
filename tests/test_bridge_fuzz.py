"""Schema-driven fuzz of every bridge endpoint (schemathesis over the OpenAPI document).

Whatever the generated request — odd ids, huge or negative numbers, wrong
types, unknown sessions — the bridge answers 2xx/4xx JSON, never a 5xx or a
traceback.
"""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason='the bridge needs pip install "hermes-context[bridge]"')
schemathesis = pytest.importorskip("schemathesis", reason="pip install schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402

from hermes_context import load_config  # noqa: E402
from hermes_context.bridge import TokenStore, create_app  # noqa: E402
from hermes_context.llm.testing import Reply, ScriptedLLMServer  # noqa: E402

EXAMPLES_PER_OPERATION = 15


def test_no_endpoint_answers_5xx_or_a_traceback(hermes_home):
    with ScriptedLLMServer(responder=lambda body: Reply.text("fuzzed")) as server:
        (hermes_home / "config.yaml").write_text(
            f"model:\n  base_url: {server.base_url}\n  name: scripted-model\n"
            "bridge:\n  rate_limit_per_minute: 0\n",
            encoding="utf-8",
        )
        token = TokenStore(hermes_home).add("fuzzer")[1]
        app = create_app(load_config(hermes_home=hermes_home))
        headers = {"Authorization": f"Bearer {token}"}  # the schema needs the token too
        schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers=headers)
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 10
        for operation in operations:
            where = f"{operation.method.upper()} {operation.path}"

            @given(case=operation.as_strategy())
            @settings(
                max_examples=EXAMPLES_PER_OPERATION,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def check(case):
                response = case.call(headers=headers)
                assert response.status_code < 500, (where, response.text[:300])  # noqa: B023
                assert "Traceback" not in response.text, where  # noqa: B023

            check()
