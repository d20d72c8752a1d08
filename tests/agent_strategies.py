"""Hypothesis strategies for agent conversations (shared by the property tests)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from hermes_context.compression.assembly import summary_block

_LINES = [
    "tests/test_api.py::test_login PASSED",
    "FAILED tests/test_api.py::test_refresh - KeyError: 'token'",
    "Traceback (most recent call last):",
    '  File "src/app/api.py", line 88, in refresh',
    "E       AssertionError: assert 401 == 200",
    "src/app/config.py:12:    DEFAULT_TIMEOUT = 30",
    "def load_config(path):",
    "    return yaml.safe_load(open(path))",
    "diff --git a/src/app/api.py b/src/app/api.py",
    "+    if token is None:",
    "总共 12 个文件被修改",
    "정상적으로 완료되었습니다",
]
_IMAGE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}

tool_output = st.builds(
    lambda lines, reps: "\n".join(lines) * reps,
    st.lists(st.sampled_from(_LINES), min_size=1, max_size=8),
    st.sampled_from([1, 1, 2, 5, 20, 60]),
)
user_text = st.sampled_from(
    [
        "Fix the failing login test.",
        "Never run migrations against prod.",
        "I prefer small commits. Please use type hints.",
        "The budget is $200 for API calls.",
        "Actually, the deadline is Friday 17:00 UTC.",
        "请用中文回答，不要修改 tests 目录。",
        "What is left to do?",
    ]
)


@st.composite
def tool_step(draw, step: int) -> list[dict]:
    n_calls = draw(st.integers(1, 3))
    calls, results = [], []
    for j in range(n_calls):
        cid = f"call_{step}_{j}"
        name = draw(st.sampled_from(["terminal", "read_file", "search_files", "web_fetch"]))
        args = {
            "command": "pytest -q",
            "path": draw(st.sampled_from(["src/app/api.py", "README.md"])),
        }
        if draw(st.booleans()):
            args["content"] = draw(tool_output)  # big arguments (pass 3)
        calls.append(
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        )
        content: object = draw(tool_output)
        if draw(st.integers(0, 9)) == 0:
            content = [{"type": "text", "text": "screenshot"}, _IMAGE]
        results.append({"role": "tool", "tool_call_id": cid, "content": content})
    text = draw(
        st.sampled_from([None, "", "Running the tests.", "<think>hmm</think>Checking the file."])
    )
    return [{"role": "assistant", "content": text, "tool_calls": calls}, *results]


@st.composite
def conversation(draw) -> list[dict]:
    """System prompt, user turns with images, parallel tool calls, results of all sizes, prior summaries."""
    messages: list[dict] = [{"role": "system", "content": "You are a coding agent."}]
    if draw(st.integers(0, 4)) == 0:
        messages.append(
            {
                "role": "user",
                "content": summary_block(
                    "## Goal\n- earlier work\n\n## Constraints & Preferences\n- Never push to main."
                ),
                "_compressed_summary": True,
                "_compressed_summary_has_user_turn": True,
            }
        )
        messages.append({"role": "assistant", "content": "Understood, continuing."})
    step = 0
    for _ in range(draw(st.integers(1, 5))):
        text = draw(user_text)
        if draw(st.integers(0, 6)) == 0:
            messages.append({"role": "user", "content": [{"type": "text", "text": text}, _IMAGE]})
        else:
            messages.append({"role": "user", "content": text})
        for _ in range(draw(st.integers(0, 6))):
            messages.extend(draw(tool_step(step)))
            step += 1
        messages.append(
            {
                "role": "assistant",
                "content": draw(st.sampled_from(["Done.", "I fixed it.", "Tests pass now."])),
            }
        )
    if draw(st.booleans()):
        messages.append({"role": "user", "content": draw(user_text)})
    return messages
