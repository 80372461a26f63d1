"""Tokenization shared by the local store's index and recall's L2 scoring."""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_memory_bridge.textsearch import (
    FTS5_TOKENIZE,
    MAX_TOKEN_CHARS,
    index_tokens,
    is_stop_word,
    overlap_score,
    query_terms,
)

SEED_SENTENCE = "我负责后端，用 Go，最讨厌魔法数字"


@pytest.mark.parametrize("word", ["讨厌", "魔法", "数字", "后端"])
def test_two_character_chinese_words_match_inside_a_sentence(word: str) -> None:
    assert word in index_tokens(SEED_SENTENCE)
    assert word in query_terms(word)
    assert overlap_score(query_terms(word), SEED_SENTENCE) == 1.0


def test_a_cjk_sentence_does_not_become_one_giant_token() -> None:
    tokens = index_tokens(SEED_SENTENCE)
    assert max(len(t) for t in tokens) <= 2
    assert "最讨厌魔法数字" not in tokens


def test_seed_question_shares_its_key_word_with_the_seed_sentence() -> None:
    terms = query_terms("我讨厌什么代码风格？")
    assert "讨厌" in terms
    assert set(terms) & set(index_tokens(SEED_SENTENCE)) >= {"讨厌"}


def test_query_cjk_runs_split_at_particles_and_pronouns() -> None:
    terms = query_terms("我讨厌什么代码风格？")
    assert "我讨" not in terms  # junk bigram across the pronoun
    assert not {"我", "什么", "是", "的"} & set(terms)


def test_japanese_text_is_bigrammed() -> None:
    tokens = index_tokens("データベースの接続が遅い")
    assert "接続" in tokens
    assert "接続" in query_terms("接続の問題")


def test_english_words_are_lowercased_and_stemmed() -> None:
    assert index_tokens("The Tests are FAILING on queries") == ["test", "fail", "queri"]
    assert query_terms("test") == ["test"]


def test_a_word_finds_its_other_english_forms() -> None:
    stored = set(index_tokens("I painted that lake sunrise last year, after the tournaments"))
    assert set(query_terms("When did she paint a sunrise?")) <= stored
    assert set(query_terms("painting")) <= stored
    assert "tournament" in stored


def test_stop_words_are_dropped_before_stemming() -> None:
    # "before" would stem to "befor", which is no stop word
    assert index_tokens("before having") == []
    assert query_terms("Who should I ask before?") == ["ask"]


def test_camel_case_identifier_gives_parts_and_the_whole() -> None:
    tokens = index_tokens("call parseHTTPResponse here")
    assert tokens[:4] == ["call", "parsehttpresponse", "pars", "http"]
    assert "respons" in tokens


def test_snake_case_identifier_gives_parts_and_the_whole() -> None:
    assert index_tokens("max_retry_count") == ["max_retry_count", "max", "retri", "count"]


def test_path_gives_segments_whole_path_and_file_name() -> None:
    tokens = index_tokens("edit src/foo/bar.py now")
    assert {"src/foo/bar.py", "bar.py", "src", "foo", "bar", "py"} <= set(tokens)
    # a path mentioned by file name alone finds it through the rare whole-name token
    assert "bar.py" in query_terms("what is in bar.py?")


def test_language_names_with_symbols_survive() -> None:
    assert {"c++", "c#"} <= set(index_tokens("ported from C++ to C#"))


def test_full_width_forms_are_normalized() -> None:
    assert index_tokens("ＡＰＩ ｋｅｙ") == ["api", "key"]


def test_overlong_tokens_are_cut() -> None:
    blob = "a" * 500
    assert index_tokens(blob) == ["a" * MAX_TOKEN_CHARS]
    assert query_terms(blob) == ["a" * MAX_TOKEN_CHARS]


@pytest.mark.parametrize("stop_only", ["the is what", "我 的 了 你 是 什么", "is it ok?", "请问这个是什么"])
def test_stop_words_alone_give_no_terms(stop_only: str) -> None:
    assert query_terms(stop_only) == []
    assert overlap_score(query_terms(stop_only), "the deploy convention is what it is") == 0.0


def test_stop_words_never_match_an_unrelated_summary() -> None:
    # The reference adapter matched "Thermal printer this week" for this question.
    terms = query_terms("What is the deploy convention?")
    assert overlap_score(terms, "Thermal printer this week") == 0.0
    assert overlap_score(terms, "deploy/convention.md\nHow we deploy") > 0.0


def test_stop_word_lists_cover_both_languages() -> None:
    for word in ["the", "is", "what", "的", "了", "我", "你", "是", "什么"]:
        assert is_stop_word(word), word
    assert not is_stop_word("deploy")
    assert not is_stop_word("讨厌")


def test_query_terms_are_deduplicated_and_capped() -> None:
    assert query_terms("deploy deploy Deploy deploys") == ["deploy"]
    words = " ".join(f"word{i}x" for i in range(100))
    assert len(query_terms(words, max_terms=10)) == 10
    assert len(query_terms(words)) == 32


def test_a_one_megabyte_query_keeps_a_few_terms() -> None:
    huge = "parse the config and retry the 数据库 query " * 25_000
    terms = query_terms(huge)  # its speed: bench/bench_bounds.py
    assert "config" in terms
    assert len(terms) <= 32


def test_overlap_score_is_the_share_of_query_terms_present() -> None:
    terms = query_terms("deploy helm chart")
    assert overlap_score(terms, "infra/helm.md\nHow the helm chart is laid out") == pytest.approx(2 / 3)
    assert overlap_score([], "anything") == 0.0


def test_overlap_score_works_for_cjk_summaries() -> None:
    terms = query_terms("后端代码风格")
    assert overlap_score(terms, "backend/go-style.md\n后端 Go 代码风格：不要魔法数字") > 0.5
    assert overlap_score(terms, "frontend/css.md\n样式表约定") == 0.0


# --- the contract with FTS5: a space-joined token stream re-splits into the same tokens ---


def _fts5_tokens(text: str) -> list[str]:
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f'CREATE VIRTUAL TABLE t USING fts5(body, tokenize="{FTS5_TOKENIZE}")')
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        conn.execute("INSERT INTO t(rowid, body) VALUES (1, ?)", (" ".join(index_tokens(text)),))
        return [str(r[0]) for r in conn.execute("SELECT term FROM v ORDER BY offset")]
    finally:
        conn.close()


def test_fts5_resplits_identifier_and_cjk_tokens_unchanged() -> None:
    text = "parseHTTPResponse src/foo/bar.py user@example.com C++ " + SEED_SENTENCE
    assert _fts5_tokens(text) == index_tokens(text)


_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(list("abcXYZ_./-:@+# 你我的讨厌魔法数字データ")),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_fts5_resplits_any_token_stream_unchanged(text: str) -> None:
    assert _fts5_tokens(text) == index_tokens(text)


@settings(max_examples=200, deadline=None)
@given(_TEXT)
def test_query_terms_are_index_tokens_without_stop_words(text: str) -> None:
    terms = query_terms(text, max_terms=1000)
    assert len(terms) == len(set(terms))
    assert not any(is_stop_word(t) for t in terms)
    assert all(t and " " not in t and len(t) <= MAX_TOKEN_CHARS for t in terms)
