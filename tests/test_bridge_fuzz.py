"""Schema-driven fuzz of every bridge endpoint (schemathesis over the OpenAPI document).

Whatever the generated request — odd ids, huge or negative numbers, wrong
types, unknown sessions, bad tokens — the bridge answers 2xx/4xx JSON that
matches the document: never a 5xx, a traceback, an undocumented status or a
body outside the schema.
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("fastapi", reason='the bridge needs pip install "hermes-context[bridge]"')
schemathesis = pytest.importorskip("schemathesis", reason="pip install schemathesis")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.checks import (  # noqa: E402
    negative_data_rejection,
    unsupported_method,
)

from hermes_context import load_config  # noqa: E402
from hermes_context.bridge import TokenStore, create_app  # noqa: E402
from hermes_context.llm.testing import Reply, ScriptedLLMServer  # noqa: E402

# Requests per operation; HERMES_FUZZ_EXAMPLES=200 for a deeper run.
EXAMPLES_PER_OPERATION = int(os.environ.get("HERMES_FUZZ_EXAMPLES", "15"))
# No 5xx; only documented statuses, content types, headers and bodies; invalid data
# refused; an unsupported method answered 405 with the right Allow header.
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    unsupported_method,
]


def test_no_endpoint_answers_5xx_or_breaks_its_schema(hermes_home):
    with ScriptedLLMServer(responder=lambda body: Reply.text("fuzzed")) as server:
        (hermes_home / "config.yaml").write_text(
            f"model:\n  base_url: {server.base_url}\n  name: scripted-model\n"
            "bridge:\n  rate_limit_per_minute: 0\n",
            encoding="utf-8",
        )
        token = TokenStore(hermes_home).add("fuzzer")[1]
        headers = {"Authorization": f"Bearer {token}"}
        app = create_app(load_config(hermes_home=hermes_home))
        schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers=headers)
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 12
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
                case.validate_response(response, checks=CHECKS)
                assert "Traceback" not in response.text, where  # noqa: B023

            check()


def test_the_schema_needs_the_token(hermes_home):
    with ScriptedLLMServer(responder=lambda body: Reply.text("fuzzed")) as server:
        (hermes_home / "config.yaml").write_text(
            f"model:\n  base_url: {server.base_url}\n  name: scripted-model\n", encoding="utf-8"
        )
        app = create_app(load_config(hermes_home=hermes_home))
        with pytest.raises(Exception, match="401"):
            schemathesis.openapi.from_asgi("/openapi.json", app).get_all_operations()
