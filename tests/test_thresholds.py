"""SPEC 3.1 thresholds, including its worked examples."""

from __future__ import annotations

import pytest

from hermes_context import ContextCompressor
from hermes_context.compression import thresholds
from hermes_context.compression.thresholds import compute_threshold


@pytest.mark.parametrize(
    ("context_length", "kwargs", "expected"),
    [
        (200_000, {}, 150_000),
        (1_000_000, {}, 500_000),
        (64_000, {}, 54_400),
        (1_000_000, {"max_tokens": 65_536}, 467_232),
        (128_000, {}, 96_000),
        (1_000_000, {"threshold_tokens_cap": 100_000}, 100_000),
        (1_000_000, {"threshold_tokens_cap": 0}, 500_000),
        (1_000_000, {"max_tokens": 0}, 500_000),
        (1_000_000, {"model": "glm-5.2-air", "model_thresholds": {"glm-5.2": 0.40}}, 400_000),
        (
            1_000_000,
            {"model": "glm-5.2-air", "model_thresholds": {"glm": 0.30, "glm-5.2": 0.40}},
            400_000,
        ),
        (1_000_000, {"model": "gpt-4o", "model_thresholds": {"glm-5.2": 0.40}}, 500_000),
        (200_000, {"model": "glm-5.2", "model_thresholds": {"glm-5.2": 0.40}}, 150_000),
        (10_000, {}, 8_500),
        (2, {}, 1),
    ],
)
def test_threshold_examples(context_length, kwargs, expected):
    assert compute_threshold(context_length, **kwargs)[0] == expected


def test_constants_are_the_specs():
    assert thresholds.SMALL_CTX_LIMIT == 512_000
    assert thresholds.SMALL_CTX_MIN_PERCENT == 0.75
    assert thresholds.MIN_THRESHOLD_TOKENS == 64_000
    assert thresholds.MAX_TRIGGER_RATIO == 0.85


def test_compressor_exposes_threshold_and_percent():
    comp = ContextCompressor(200_000, threshold_percent=0.5)
    assert comp.threshold_tokens == 150_000
    assert comp.threshold_percent == 0.75
    assert comp.tail_token_budget == 30_000
    big = ContextCompressor(1_000_000, max_tokens=65_536)
    assert big.threshold_tokens == 467_232
    assert big.threshold_percent == 0.5


def test_update_model_rederives_threshold():
    comp = ContextCompressor(200_000)
    comp.update_model(model="big", context_length=1_000_000, max_tokens=65_536)
    assert comp.threshold_tokens == 467_232
    assert comp.model == "big"


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [
        (0, (False, None)),
        (149_999, (False, None)),
        (150_000, (True, None)),
        (190_000, (True, None)),
    ],
)
def test_should_compress_info_against_threshold(tokens, expected):
    assert ContextCompressor(200_000).should_compress_info(tokens) == expected


def test_should_compress_info_uses_last_prompt_tokens():
    comp = ContextCompressor(200_000)
    comp.update_from_response({"prompt_tokens": 160_000, "completion_tokens": 10})
    assert comp.last_prompt_tokens == 160_000
    assert comp.should_compress_info() == (True, None)
    comp.update_from_response({})
    assert comp.last_prompt_tokens == 0
    comp.update_from_response(None)
    assert comp.should_compress_info() == (False, None)


def test_disabled_compressor_never_asks():
    comp = ContextCompressor(200_000, enabled=False)
    assert comp.should_compress_info(190_000) == (False, "disabled")


@pytest.mark.parametrize("bad", [0, -5, "100", 1.5, True])
def test_bad_context_length_is_a_config_error(bad):
    from hermes_context import ConfigError

    with pytest.raises(ConfigError, match="context_length"):
        ContextCompressor(bad)
