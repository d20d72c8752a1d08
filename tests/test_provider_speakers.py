"""Speakers of conversation turns (``providers.speakers``) and recall's lift for a named one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_context.providers import local
from hermes_context.providers.speakers import named_speakers, turn_speaker, without_name


@pytest.mark.parametrize(
    ("text", "speaker"),
    [
        ("Ana on 2 May: What did you name the puppy?", "Ana"),
        ("Caroline on 1:56 pm on 8 May, 2023: Hey Mel!", "Caroline"),
        ("Dr Ana Lima: the results are in", "Dr Ana Lima"),
        ("O'Brien on 3 June, 2024: fine", "O'Brien"),
        ("王芳 on 2 May: 我们明天见", "王芳"),
        ("Ana: yes", "Ana"),
        ("Ana on Monday on 2 May: we went", "Ana"),
        # Prose, not a speaker: a lower-case word, too many words, no header at all.
        ("yes on Monday: we went", None),
        ("Ana said that on Monday: we went", None),
        ("Biscuit, after my grandmother's cookies.", None),
        ("The Very Long Name Here on 2 May: hi", None),
        ("", None),
    ],
)
def test_turn_speaker_reads_the_header_a_turn_opens_with(text, speaker):
    assert turn_speaker(text) == speaker


def test_named_speakers_finds_whole_names_in_the_question():
    speakers = {"Ana", "Ben", "Dr Ana Lima", "Mel"}
    assert named_speakers("What did Ana name her puppy?", speakers) == ["Ana"]
    assert named_speakers("Where did Ana's dog run to?", speakers) == ["Ana"]
    assert named_speakers("Where did Ana’s dog run to?", speakers) == ["Ana"]
    assert named_speakers("When did Ben and Mel meet Ben.", speakers) == ["Ben", "Mel"]
    # The longest name wins; a name inside a longer word is not a mention.
    assert named_speakers("What did Dr Ana Lima find?", speakers) == ["Dr Ana Lima"]
    assert named_speakers("What did Anastasia and Benjamin eat?", speakers) == []
    assert named_speakers("what did ana eat?", speakers) == []  # names are written capitalised
    assert named_speakers("", speakers) == []


def test_without_name_keeps_the_question_grammatical():
    assert without_name("What did Ana name her puppy?", "Ana") == "What did they name her puppy?"
    assert without_name("Where did Ana's dog run?", "Ana") == "Where did their dog run?"
    assert without_name("Did Anastasia meet Ana?", "Ana") == "Did Anastasia meet they?"
    assert without_name("Nothing here", "Ana") == "Nothing here"


_NAME = st.from_regex(r"[A-Z][a-z]{2,8}", fullmatch=True)
_FILLER = st.lists(st.sampled_from(["what", "did", "the", "dog", "eat", "on", "Monday", "?"]))


@given(name=_NAME, before=_FILLER, after=_FILLER)
def test_a_speaker_anywhere_in_a_question_is_found_and_replaced(name, before, after):
    query = " ".join([*before, name, *after])
    assert named_speakers(query, {name}) == [name]
    assert name not in without_name(query, name).split()


@given(st.text())
def test_reading_speakers_never_fails_on_any_text(text):
    speaker = turn_speaker(text)
    assert speaker is None or text.startswith(speaker)
    named_speakers(text, {"Ana"})
    without_name(text, "Ana")


needs_embeddings = pytest.mark.skipif(
    not local.embeddings_available(), reason='needs pip install "hermes-context[semantic]"'
)

_DIALOG = [
    ("Ana on 1 May, 2023: Ben, I went hiking in the mountains again, hiking is my favourite thing", "s1"),
    ("Ben on 1 May, 2023: Hiking? Not for me, too tiring", "s1"),
    ("Ana on 1 May, 2023: Ben, hiking in the mountains clears my head every single weekend", "s1"),
    ("Ben on 2 May, 2023: I bought a new bike for the commute", "s2"),
    ("Ana on 2 May, 2023: Ben, the mountains near the lake have the best hiking trails", "s2"),
    ("Ben on 2 May, 2023: My sister is visiting next month", "s2"),
    ("Ana on 3 May, 2023: Ben, you should try hiking in the mountains with me", "s3"),
    ("Ben on 3 May, 2023: The new bakery downtown is great", "s3"),
    ("Ana on 4 May, 2023: Ben, hiking in the mountains would be good for you", "s4"),
    ("Ben on 4 May, 2023: I watched a documentary about whales", "s4"),
]  # fmt: skip


@needs_embeddings
def test_a_question_naming_a_speaker_finds_what_that_speaker_said(tmp_path, monkeypatch):
    provider = local.LocalMemoryProvider(tmp_path / "m.db", use_embeddings=True)
    provider.initialize("s", user_id="u")
    provider.add_many([(text, local.TURN_KIND, session) for text, session in _DIALOG])
    question = "What does Ben think about hiking in the mountains?"
    hits = provider.search(question, k=3)
    assert hits[0].text == _DIALOG[1][0]
    # Every Ana turn is about hiking and names Ben; Ben's only word on it is his reply.
    # Without the lift Ana's turns fill the top three.
    with monkeypatch.context() as patch:
        patch.setattr(local, "SPEAKER_BONUS", 0.0)
        assert all(h.text.startswith("Ana") for h in provider.search(question, k=3))
    # A question naming both speakers, or neither, is ranked as before.
    both = provider.search("Do Ana and Ben both like hiking in the mountains?", k=3)
    assert all(h.text.startswith("Ana") for h in both[:2])
    # A speaker first stored after a search is known to the next one.
    provider.add(
        "Cleo on 3 May, 2023: hiking? never, I stay home", kind=local.TURN_KIND, session_id="s3"
    )
    hits = provider.search("What does Cleo think about hiking in the mountains?", k=3)
    assert hits[0].text.startswith("Cleo")
    provider.shutdown()
