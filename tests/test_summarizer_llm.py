"""OpenAISummarizer against the scripted OpenAI-compatible server (real client code)."""

from __future__ import annotations

import copy

import pytest

import hermes_context
from hermes_context import ContextCompressor, load_config
from hermes_context.compression import register_summarizer_factory
from hermes_context.compression.summarizers import default_summarizer_factory
from hermes_context.errors import ConfigError, SummarizerUnavailable
from hermes_context.llm import OpenAISummarizer, build_summarizer
from hermes_context.llm.testing import FunctionSummarizer, Reply
from hermes_context.synthetic import generate_transcript

SUMMARY = "## Goal\n- fix the nightly job\n\n## Critical Context\n- KeyError: 'user_id'"


class Clock:
    def __init__(self) -> None:
        self.now = 5_000.0

    def __call__(self) -> float:
        return self.now


def _aux_and_main(server, *, timeout=5.0):
    main = OpenAISummarizer(
        base_url=server.base_url, api_key="k-main", model="main-model", timeout=timeout
    )
    return OpenAISummarizer(
        base_url=server.base_url, api_key="k-aux", model="aux-model", timeout=timeout, fallback=main
    )


def _compressor(summarizer, clock=None):
    return ContextCompressor(8_000, summarizer=summarizer, clock=clock or Clock())


def test_success_sends_no_max_tokens_and_strips_think(scripted_llm):
    scripted_llm.enqueue(Reply.text("<think>pondering</think>" + SUMMARY), model="aux-model")
    result = _compressor(_aux_and_main(scripted_llm)).compress(generate_transcript(120, seed=1))
    assert not result.aborted and not result.used_fallback
    assert result.summary.startswith("## Goal\n- fix the nightly job")
    assert "pondering" not in result.summary
    body = scripted_llm.chat_requests[0].body
    assert body["model"] == "aux-model" and "max_tokens" not in body
    assert scripted_llm.chat_requests[0].authorization == "Bearer k-aux"
    assert result.report.summariser == "llm:aux-model"


def test_401_aborts_and_leaves_input_unchanged(scripted_llm):
    scripted_llm.enqueue(Reply.error(401, "invalid api key"), model="aux-model")
    msgs = generate_transcript(120, seed=2)
    snapshot = copy.deepcopy(msgs)
    comp = _compressor(_aux_and_main(scripted_llm))
    result = comp.compress(msgs)
    assert result.aborted and result.messages == snapshot and msgs == snapshot
    assert "auth" in result.error and "401" in result.error
    assert len(scripted_llm.chat_requests) == 1, "auth failures are not retried on the main model"


def test_404_on_auxiliary_retries_on_main(scripted_llm):
    scripted_llm.enqueue(Reply.error(404, "model not found"), model="aux-model")
    scripted_llm.enqueue(Reply.text(SUMMARY), model="main-model")
    result = _compressor(_aux_and_main(scripted_llm)).compress(generate_transcript(120, seed=3))
    assert not result.used_fallback and result.summary.startswith("## Goal")
    assert [r.body["model"] for r in scripted_llm.chat_requests] == ["aux-model", "main-model"]


def test_503_on_auxiliary_retries_on_main(scripted_llm):
    scripted_llm.enqueue(Reply.error(503, "overloaded"), model="aux-model")
    scripted_llm.enqueue(Reply.text(SUMMARY), model="main-model")
    result = _compressor(_aux_and_main(scripted_llm)).compress(generate_transcript(120, seed=3))
    assert not result.used_fallback


def test_timeouts_climb_the_cooldown_ladder(scripted_llm):
    clock = Clock()
    summ = OpenAISummarizer(base_url=scripted_llm.base_url, api_key=None, model="m", timeout=0.3)
    comp = _compressor(summ, clock)
    reasons = []
    for _ in range(3):
        scripted_llm.enqueue(Reply.delay(1.5, Reply.text(SUMMARY)))
        result = comp.compress(generate_transcript(120, seed=4), force=True)
        assert result.used_fallback and not result.aborted
        assert "timeout" in result.error
        reasons.append(comp.should_compress_info(10**6)[1])
        clock.now += 10_000
    assert reasons == ["cooldown:60", "cooldown:300", "cooldown:900"]


def test_malformed_json_gives_30s_cooldown_and_fallback(scripted_llm):
    scripted_llm.enqueue(Reply.malformed_json())
    comp = _compressor(OpenAISummarizer(base_url=scripted_llm.base_url, api_key=None, model="m"))
    result = comp.compress(generate_transcript(120, seed=5))
    assert result.used_fallback and "bad_json" in result.error
    assert comp.should_compress_info(10**6) == (False, "cooldown:30")
    assert "## Constraints & Preferences" in result.summary


def test_empty_output_is_a_failure_with_fallback(scripted_llm):
    scripted_llm.enqueue(Reply.empty())
    comp = _compressor(OpenAISummarizer(base_url=scripted_llm.base_url, api_key=None, model="m"))
    result = comp.compress(generate_transcript(120, seed=6))
    assert result.used_fallback and "empty" in result.error
    assert result.report.summariser == "deterministic (fallback)"


def test_500_falls_back_with_60s_cooldown(scripted_llm):
    scripted_llm.enqueue(Reply.error(500, "boom"))
    comp = _compressor(OpenAISummarizer(base_url=scripted_llm.base_url, api_key=None, model="m"))
    result = comp.compress(generate_transcript(120, seed=7))
    assert result.used_fallback
    assert comp.should_compress_info(10**6) == (False, "cooldown:60")


def test_unreachable_endpoint_aborts():
    summ = OpenAISummarizer(base_url="http://127.0.0.1:9/v1", api_key=None, model="m", timeout=1)
    result = _compressor(summ).compress(generate_transcript(120, seed=8))
    assert result.aborted and "network" in result.error


def test_unconfigured_summarizer_cools_down_600s():
    comp = _compressor(OpenAISummarizer(base_url=None, api_key=None, model=None))
    result = comp.compress(generate_transcript(120, seed=8))
    assert not result.used_fallback, "no LLM configured: deterministic is the primary"
    assert result.summary.startswith("## Goal")
    assert comp.should_compress_info(10**6) == (False, "cooldown:600")


def test_build_summarizer_from_config(tmp_path, scripted_llm):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(
        f"model:\n  base_url: {scripted_llm.base_url}\n  name: main-model\n"
        f"auxiliary:\n  compression:\n    model: aux-model\n"
    )
    summ = build_summarizer(load_config(cfg_file))
    assert summ.model == "aux-model" and summ.fallback.model == "main-model"
    scripted_llm.enqueue(Reply.text(SUMMARY), model="aux-model")
    comp = ContextCompressor.from_config(load_config(cfg_file), context_length=8_000)
    assert comp.compress(generate_transcript(120, seed=9)).report.summariser == "llm:aux-model"
    with pytest.raises(ConfigError, match="no LLM configured"):
        build_summarizer(load_config())
    plain = ContextCompressor.from_config(load_config(), context_length=8_000)
    assert plain.summarizer is None


# -- how from_config finds the LLM summariser (compression never imports llm) ------------


def _configured(tmp_path, server):
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(f"model:\n  base_url: {server.base_url}\n  name: main-model\n")
    return load_config(cfg_file)


def test_import_hermes_context_registers_the_llm_factory():
    assert default_summarizer_factory() is build_summarizer


def test_from_config_calls_the_factory_it_is_given(tmp_path, scripted_llm):
    cfg = _configured(tmp_path, scripted_llm)
    made = []

    def factory(config):
        made.append(config)
        return FunctionSummarizer(lambda _messages: SUMMARY)

    comp = ContextCompressor.from_config(cfg, context_length=8_000, summarizer_factory=factory)
    assert made == [cfg] and isinstance(comp.summarizer, FunctionSummarizer)
    plain = ContextCompressor.from_config(
        cfg, context_length=8_000, summarizer_factory=factory, use_llm=False
    )
    assert plain.summarizer is None and len(made) == 1
    given = FunctionSummarizer(lambda _messages: SUMMARY)
    assert ContextCompressor.from_config(cfg, summarizer=given).summarizer is given


def test_from_config_uses_the_registered_factory_and_says_when_there_is_none(
    tmp_path, scripted_llm
):
    cfg = _configured(tmp_path, scripted_llm)
    fake = FunctionSummarizer(lambda _messages: SUMMARY)
    previous = register_summarizer_factory(lambda _config: fake)
    try:
        assert ContextCompressor.from_config(cfg, context_length=8_000).summarizer is fake
        register_summarizer_factory(None)
        with pytest.raises(ConfigError, match="no LLM summariser factory is registered"):
            ContextCompressor.from_config(cfg, context_length=8_000)
        assert ContextCompressor.from_config(cfg, use_llm=False).summarizer is None
    finally:
        register_summarizer_factory(previous)
    assert default_summarizer_factory() is build_summarizer


def test_the_llm_summariser_is_not_importable_from_compression():
    with pytest.raises(ImportError, match="moved to hermes_context.llm"):
        exec("from hermes_context.compression import OpenAISummarizer", {})
    assert hermes_context.OpenAISummarizer is OpenAISummarizer
    assert hermes_context.compression.SummarizerUnavailable is SummarizerUnavailable
