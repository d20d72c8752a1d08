"""The web inspector in a real headless Chromium (Debian's package) driven by Playwright.

A real bridge (uvicorn on 127.0.0.1) in front of the scripted model server: log
in with a token, run turns until one compresses, see the status and the
summary appear, expand it to its originals, search a word of a compacted
message and find it highlighted.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import threading
import time

import pytest

pytest.importorskip("fastapi", reason='the bridge needs pip install "hermes-context[bridge]"')
sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium is missing: apt-get install -y chromium"
)

from bridge_kit import fake_result, live, write_config  # noqa: E402
from hermes_context import load_config  # noqa: E402
from hermes_context.agent import AIAgent  # noqa: E402
from hermes_context.bridge import TokenStore, create_app  # noqa: E402
from hermes_context.llm.testing import Reply, ScriptedLLMServer  # noqa: E402


@pytest.fixture
def bridge(hermes_home):
    with ScriptedLLMServer(responder=lambda body: Reply.text("Noted, carrying on.")) as model:
        write_config(hermes_home, model, context_length=12_000)
        token = TokenStore(hermes_home).add("ui-user")[1]
        with live(create_app(load_config(hermes_home=hermes_home))) as base:
            yield base, token


@contextlib.contextmanager
def new_session_page(bridge):
    """A Chromium page logged in to the inspector, with a new session open."""
    base, token = bridge
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page()
        page.goto(f"{base}/ui")
        page.fill("#token", token)
        page.click("#login-button")
        page.wait_for_selector("#login", state="hidden")
        page.click("#new-session")
        page.wait_for_selector(".session.active")
        yield page
        browser.close()


def test_inspector_shows_compression_summaries_originals_and_search(bridge):
    with new_session_page(bridge) as page:
        compressed = False
        for n in range(12):
            page.fill("#input", f"Note {n}: the quokka{n} batch " + "needs careful review " * 260)
            page.click("#send")
            page.wait_for_selector("#status .done", timeout=30_000)
            if page.locator("#status .compress").count():
                compressed = True
            if page.locator(".msg.summary").count():
                break
        assert compressed, "no compression status was shown"
        summary = page.locator(".msg.summary").first
        assert "summary (compressed context)" in summary.inner_text()
        # A summary of a summary nests: only this summary's own button and originals.
        summary.locator(":scope > button.expand").click()
        originals = summary.locator(":scope > .originals")
        originals.wait_for(state="visible")
        # The first turns stay in the protected head; the middle ones were summarised.
        word = re.search(r"quokka\d+", originals.inner_text()).group()
        page.fill("#query", word)
        page.click("#search-form button")
        page.wait_for_selector("#hits .hit")
        hit = page.locator("#hits .hit").first
        assert hit.locator("mark").first.inner_text().lower() == word
        assert "(compacted)" in hit.inner_text()
        assert page.locator("#parts tr").count() >= 5
        shot = os.environ.get("HERMES_UI_SCREENSHOT")  # docs/bridge.md's picture
        if shot:
            summary.scroll_into_view_if_needed()
            page.screenshot(path=shot, full_page=False)


def test_a_reset_stream_drops_the_partial_text_from_the_live_answer(bridge, monkeypatch):
    release = threading.Event()

    def run(self, user_message, conversation_history=None):
        self.stream_callback("Hello, wor")
        self.status_callback("stream_reset", {"discarded_chars": 10, "error_kind": "stream"})
        self.stream_callback("Hello, world.")
        release.wait(20)
        return fake_result(self, "Hello, world.")

    monkeypatch.setattr(AIAgent, "run_conversation", run)
    with new_session_page(bridge) as page:
        page.fill("#input", "greet me")
        page.click("#send")
        page.wait_for_function("document.querySelector('#live').textContent.endsWith('world.')")
        live = page.locator("#live").inner_text()
        release.set()
        page.wait_for_selector("#status .done", timeout=30_000)
        assert "stream_reset" in page.locator("#status").inner_text()
    assert live == "Hello, world."


def test_turn_finished_shows_once_the_transcript_holds_the_turn(bridge):
    # With the transcript slow to read, "turn finished" used to show before it was read
    # again: a summary expanded in between was replaced by a collapsed one.
    with new_session_page(bridge) as page:

        def slow(route):
            time.sleep(1.0)
            route.continue_()

        page.route(re.compile(r".*/messages$"), slow)
        page.fill("#input", "remember the okapi enclosure")
        page.click("#send")
        page.wait_for_selector("#status .done", timeout=30_000)
        assert "remember the okapi enclosure" in page.locator("#messages").inner_text()
