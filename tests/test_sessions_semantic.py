"""The semantic half of session search: e5 vectors in a sidecar, fused with BM25 by rank."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_context.memory import e5
from hermes_context.sessions import SessionDB
from hermes_context.sessions.hits import Candidate
from hermes_context.sessions.semantic import VECTORS_FILE, fuse

needs_e5 = pytest.mark.skipif(
    not e5.available(), reason='semantic search needs pip install "hermes-context[semantic]"'
)

# The message a paraphrase must find: it shares no word with the query below.
CAUSE = (
    "Found it: the overnight build broke because stale artifacts were left in the CI cache; "
    "clearing the cache fixed it."
)
QUERY = "nightly compilation failure reason"
OTHER = [
    "Can you rename the helper in utils.py to parse_header?",
    "Renamed it and updated the two call sites.",
    "What time is the standup tomorrow?",
    "The standup moved to 10:30.",
]


def _db(tmp_path, *, user="alice"):
    db = SessionDB(tmp_path / "state.db")
    sid = db.create_session(user_id=user)
    db.append_messages(
        sid,
        [
            {"role": "user", "content": OTHER[0]},
            {"role": "assistant", "content": OTHER[1]},
            {"role": "user", "content": "The CI run failed again, can you look?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "terminal", "arguments": '{"command": "make ci"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "error: artifact cache corrupt"},
            {"role": "assistant", "content": CAUSE},
            {"role": "user", "content": OTHER[2]},
            {"role": "assistant", "content": OTHER[3]},
        ],
    )
    return db, sid


@needs_e5
def test_a_paraphrase_is_found_by_meaning_and_not_by_words(tmp_path):
    db, _ = _db(tmp_path)
    with db:
        assert db.session_search(query=QUERY)["count"] == 0  # BM25 alone: no shared word
        db.use_semantic(e5.embed)
        assert db.index_semantic() == 6  # user and assistant prose, not the tool call or output
        found = db.session_search(query=QUERY)
        assert found["match"] == "semantic"
        top = found["results"][0]["hits"][0]
        assert top["snippet"].startswith("Found it: the overnight") and top["by_meaning"] is True
        assert db.search(QUERY, limit=1) == []  # a person's search stays by words unless asked
        assert db.search(QUERY, limit=1, semantic=True)[0]["snippet"].startswith("Found it")


@needs_e5
def test_word_matches_stay_first_when_both_halves_agree(tmp_path):
    db, _ = _db(tmp_path)
    with db:
        db.use_semantic(e5.embed)
        db.index_semantic()
        hits = db.search("standup moved", limit=2, semantic=True)
        assert hits[0]["snippet"] == OTHER[3]


@needs_e5
def test_indexing_is_incremental_and_the_sidecar_is_beside_the_database(tmp_path):
    db, sid = _db(tmp_path)
    with db:
        db.use_semantic(e5.embed)
        assert db.semantic_backlog() == 8
        assert db.index_semantic(limit=3) == 3
        assert db.semantic_backlog() == 5
        assert db.index_semantic() == 3  # the tool messages are looked at, not embedded
        db.append_messages(sid, [{"role": "user", "content": "One more question."}])
        assert db.semantic_backlog() == 1 and db.index_semantic() == 1
        assert db.index_semantic() == 0
        assert db.vectors is not None and db.vectors.size()["vectors"] == 7
    assert (tmp_path / VECTORS_FILE).exists()


@needs_e5
def test_a_replaced_database_never_answers_from_stale_vectors(tmp_path):
    db, _ = _db(tmp_path)
    with db:
        db.use_semantic(e5.embed)
        db.index_semantic()
    (tmp_path / "state.db").unlink()
    fresh = SessionDB(tmp_path / "state.db")
    with fresh:
        sid = fresh.create_session()
        fresh.append_messages(sid, [{"role": "user", "content": "Lunch is at noon."}])
        fresh.use_semantic(e5.embed)
        # The old vectors' ids now name other messages (or none): none may answer.
        hits = fresh.search(QUERY, limit=3, semantic=True)
        assert all("overnight" not in h["snippet"] for h in hits)
        fresh.index_semantic()
        assert fresh.vectors is not None and fresh.vectors.size()["vectors"] == 1


@needs_e5
def test_semantic_hits_respect_the_user_scope(tmp_path):
    db, _ = _db(tmp_path, user="alice")
    with db:
        db.use_semantic(e5.embed)
        db.index_semantic()
        assert db.session_search(query=QUERY, user_id="bob")["count"] == 0
        assert db.session_search(query=QUERY, user_id="alice")["count"] == 1


@needs_e5
def test_the_agent_indexes_its_turns_in_the_background(tmp_path, hermes_home):
    from hermes_context import AIAgent
    from hermes_context.llm.testing import Reply, ScriptedLLMServer

    with ScriptedLLMServer(responder=lambda body: Reply.text(CAUSE)) as srv:
        agent = AIAgent(
            base_url=srv.base_url,
            model="scripted-model",
            hermes_home=hermes_home,
            cwd=tmp_path,
            load_soul_identity=False,
            use_llm_summary=False,
            quiet_mode=True,
        )
        agent.run_conversation("What broke the build last night?")
        assert agent.db.vectors is not None
        agent.db.vectors.join(timeout=60)
        agent.close()
    with SessionDB(hermes_home / "state.db") as db:
        db.use_semantic(e5.embed)
        assert db.semantic_backlog() == 0
        assert db.search(QUERY, limit=1, semantic=True)[0]["snippet"].startswith("Found it")


def test_semantic_search_can_be_turned_off(tmp_path, hermes_home):
    from hermes_context import AIAgent
    from hermes_context.llm.testing import ScriptedLLMServer

    (hermes_home / "config.yaml").write_text(
        "memory:\n  semantic_session_search: false\n", encoding="utf-8"
    )
    with ScriptedLLMServer() as srv:
        agent = AIAgent(
            base_url=srv.base_url, model="m", hermes_home=hermes_home, cwd=tmp_path, quiet_mode=True
        )
        assert agent.db.vectors is None
        agent.close()


def test_indexing_without_use_semantic_is_a_clear_error(tmp_path):
    with SessionDB(tmp_path / "state.db") as db:
        assert db.semantic_backlog() == 0
        with pytest.raises(ValueError, match="use_semantic"):
            db.index_semantic()


@needs_e5
def test_cli_search_semantic_and_not(tmp_path, hermes_home):
    from click.testing import CliRunner

    from hermes_context.cli.main import cli

    db, _ = _db(hermes_home)
    db.close()
    runner = CliRunner()
    words = runner.invoke(cli, ["sessions", "search", QUERY, "--json"])
    assert words.exit_code == 0 and json.loads(words.stdout) == []
    assert not (hermes_home / VECTORS_FILE).exists()
    meaning = runner.invoke(
        cli, ["sessions", "search", QUERY, "--json", "--limit", "1", "--semantic"]
    )
    assert meaning.exit_code == 0, meaning.output
    assert json.loads(meaning.stdout)[0]["snippet"].startswith("Found it")
    assert (hermes_home / VECTORS_FILE).exists()


_ranking = st.lists(st.integers(1, 30), unique=True, max_size=12)


@given(lexical=_ranking, semantic=_ranking)
def test_fusion_keeps_every_candidate_once_and_agreement_first(lexical, semantic):
    def cands(ids):
        return [Candidate(i, 1.0, "s", "r") for i in ids]

    fused = fuse(cands(lexical), cands(semantic))
    ids = [c.message_id for c in fused]
    assert sorted(ids) == sorted(set(lexical) | set(semantic))
    assert all(a.score >= b.score for a, b in zip(fused, fused[1:], strict=False))
    if lexical and semantic and lexical[0] == semantic[0]:
        assert ids[0] == lexical[0]
    if not semantic:
        assert ids == lexical


@needs_e5
def test_two_indexers_on_one_database_never_embed_a_message_twice(tmp_path):
    import threading

    db, _ = _db(tmp_path)
    db.close()
    embedded: list[str] = []
    lock = threading.Lock()

    def counting(texts, query):
        with lock:
            if not query:
                embedded.extend(texts)
        return e5.embed(texts, query)

    results: list[int] = []

    def index() -> None:
        with SessionDB(tmp_path / "state.db") as mine:
            mine.use_semantic(counting)
            results.append(mine.index_semantic())

    threads = [threading.Thread(target=index) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(results) in ([0, 6], [1, 5], [2, 4], [3, 3]) and sum(results) == 6
    assert len(embedded) == len(set(embedded)) == 6


@given(
    st.lists(st.floats(-1, 1, allow_nan=False, width=32), min_size=1, max_size=64).filter(
        lambda v: any(abs(x) > 1e-3 for x in v)
    )
)
def test_stored_vectors_keep_every_component_within_half_a_step(values):
    import numpy as np

    from hermes_context.sessions.semantic import _blob, _unpack

    vector = np.array(values, dtype=np.float32)
    back = _unpack([_blob(vector)])[0]
    step = float(np.abs(vector).max()) / 127
    assert back.shape == vector.shape
    assert float(np.abs(back - vector).max()) <= step / 2 + 1e-6


@needs_e5
def test_an_unusable_vectors_file_is_a_one_line_store_error(tmp_path, hermes_home):
    from click.testing import CliRunner

    from hermes_context.cli.main import cli

    db, _ = _db(hermes_home)
    db.close()
    (hermes_home / VECTORS_FILE).mkdir()  # a folder where the file should be
    result = CliRunner().invoke(cli, ["sessions", "search", QUERY, "--semantic"])
    assert result.exit_code == 6, result.output
    assert result.stderr.startswith("error: cannot use the semantic search index")
    assert "Traceback" not in result.output
    plain = CliRunner().invoke(cli, ["sessions", "search", "standup"])
    assert plain.exit_code == 0 and "standup" in plain.stdout
