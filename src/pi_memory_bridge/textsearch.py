"""Tokenization for keyword search, shared by the local store's FTS5 index and recall's L2 scoring.

One tokenizer serves both sides, so whatever a query asks for, the index holds in the same form:

* Text is NFKC-normalized (full-width ``ＡＰＩ`` becomes ``API``) and case-folded.
* CJK runs (Han, kana, Hangul) become overlapping character bigrams plus unigrams:
  ``最讨厌魔法数字`` gives 最讨 讨厌 厌魔 魔法 法数 数字 and 最 讨 厌 …, so two-character words
  such as 讨厌, 魔法 and 数字 match, one-character words (锁, 挂) match too, and a sentence
  never turns into one giant token. Unigrams are frequent, so BM25 weighs them little and the
  store drops them from queries first when a query must be cut down.
* Words and code: ``parseHTTPResponse`` gives parse, http, response and the whole identifier;
  ``max_retry_count`` gives max, retry, count and the whole; ``src/foo/bar.py`` gives src, foo,
  bar, py, the whole path and its file name ``bar.py``. English words are stemmed (Snowball's
  English stemmer), so "painted", "paints" and "painting" all find "paint", and "tests" finds
  "test"; whole identifiers are never stemmed, so ``parseHTTPResponse`` still finds itself exactly.
* Stop words (English, and Chinese/Japanese function words) are dropped on both sides: they
  would match almost everything and rank nothing.

Queries are cut further than documents: a CJK run in a query is also split at particles,
pronouns and interrogatives (的 了 我 你 是 什么 怎么 …), so "我讨厌什么代码风格" asks for 讨厌,
代码, 风格 but not for the accidental 我讨 or 厌什.

Every token is letters, digits, marks and the ASCII characters in `FTS_TOKENCHARS`, never a
space, so the local store can hand FTS5 the tokens joined by spaces (see `FTS5_TOKENIZE`).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

import snowballstemmer

__all__ = [
    "FTS5_TOKENIZE",
    "FTS_TOKENCHARS",
    "MAX_QUERY_CHARS",
    "MAX_TOKEN_CHARS",
    "TOKENIZER_VERSION",
    "index_tokens",
    "is_identifier_like",
    "is_stop_word",
    "overlap_score",
    "query_terms",
]

# Bump whenever index_tokens() would produce different tokens for some text: stores
# re-tokenize their rows when the version they were built with differs.
TOKENIZER_VERSION = 2  # 2: Snowball stems instead of the S-stemmer

# ASCII characters allowed inside a compound token besides letters and digits.
FTS_TOKENCHARS = "_./-:@+#"
# FTS5's "ascii" tokenizer treats every non-ASCII character as part of a token and splits only
# at ASCII separators; with our joiners declared as token characters it splits a space-joined
# token stream exactly at the spaces. So the tokenization is entirely ours (unicode61 would
# re-split at combining marks and at letters newer than Unicode 6.1, and disagree with us).
# Stores bake this into their schema: changing it takes a schema migration, not a version bump.
FTS5_TOKENIZE = f"ascii tokenchars '{FTS_TOKENCHARS}'"

# Longer tokens are base64 blobs, hashes of hashes, minified code: truncating keeps them cheap.
MAX_TOKEN_CHARS = 64
# A query longer than this keeps its head and tail only: a pasted megabyte must stay fast,
# and the question is usually at one end of the paste.
MAX_QUERY_CHARS = 8192

_CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3005-\u3007"  # 々 〆 〇
    "\u3040-\u30ff"  # Hiragana, Katakana (incl. ー)
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0003134f"  # CJK extensions B-G
)
# \w lacks combining marks, which Indic scripts need inside words.
_WORD_CHAR = rf"[^\W{_CJK_RANGES}]|[\u0300-\u036f\u0900-\u0963\u0966-\u0dff]"
_JOINERS = re.escape("./-:@")
_CHUNK_RE = re.compile(
    rf"([{_CJK_RANGES}]+)"
    rf"|((?:{_WORD_CHAR})+(?:[{_JOINERS}]+(?:{_WORD_CHAR})+)*(?:\+\+|#(?!\w))?)"
)
_JOINER_SPLIT_RE = re.compile(rf"[{_JOINERS}]+")
# Pieces of one identifier: runs of capitals before a capitalized word (HTTP|Response),
# capitalized or lower words, capitals, digits; underscores separate.
_PIECE_RE = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_ENGLISH_STOP_WORDS = _words(
    """
    a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can cannot could couldn't did didn't do does doesn't
    doing don't down during each either else ever every few for from further get gets got had
    hadn't has hasn't have haven't having he her here hers herself him himself his how however
    i if in into is isn't it its itself just let let's me might more most much must my
    myself no nor not now of off often on once only or other our ours ourselves out over own
    per please quite rather really same she should shouldn't so some such than that the their
    theirs them themselves then there these they this those though through thus to too under
    until up upon us very via was wasn't we were weren't what when where whether which while
    who whom whose why will with within without won't would wouldn't yes yet you your yours
    yourself yourselves ok okay hi hello hey thanks thank thx pls lol im ive youre dont
    doesnt didnt cant isnt wasnt wont ll re ve s t d m don doesn didn isn wasn weren aren won
    wouldn shouldn couldn hasn haven hadn
    """
)

# Chinese and Japanese function words. Single characters matter for one-character runs;
# bigrams for the bigram stream.
_CJK_STOP_WORDS = _words(
    """
    的 了 着 过 吗 呢 吧 啊 呀 嘛 哦 哈 嗯 么 我 你 他 她 它 您 是 在 和 与 及 或 也 都 就 还 很
    把 被 这 那 哪 个 些 又 而 之 于 以 则 但 并 让 给 对 从 向 到 为 中 上 下 里 请 用 什 怎 有
    什么 我们 你们 他们 她们 它们 咱们 这个 那个 这些 那些 这样 那样 这里 那里 哪个 哪些 哪里
    一个 一些 一下 一点 可以 可能 应该 就是 还是 但是 而且 因为 所以 如果 然后 怎么 怎样 为什
    是否 的话 已经 自己 时候 不是 没有 有没 有什 是什 么样 帮我 请问 告诉 一样 之前 之后 以后
    以前 现在 这么 那么 多少 有些 其实 比如 例如 还有 或者 以及 并且 不过 只是 就会 会不 能不
    です ます でし まし して する した これ それ あれ この その あの ない ある いる なる ように
    ので から まで など の が を は に で と も へ や か
    """
)

# Particles and pronouns at which a query's CJK run is split before making bigrams, so that
# "我讨厌" asks for 讨厌 and not also for the accidental 我讨.
_QUERY_CJK_SPLIT_CHARS = "的了吗呢吧啊呀嘛哦我你他她它您是很都也就把被和与或请のをがはにで"
# ...and at interrogatives and pronouns of two characters that are never part of a longer word.
_QUERY_CJK_SPLIT_WORDS = sorted(
    _words("请问 什么 怎么 怎样 为什 这个 那个 这些 那些 哪个 哪些 哪里 我们 你们 他们 一下 是否")
)
_QUERY_SPLIT_RE = re.compile("|".join([*_QUERY_CJK_SPLIT_WORDS, f"[{_QUERY_CJK_SPLIT_CHARS}]"]))


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    """An English word's Snowball stem ('painting' -> 'paint', 'queries' -> 'queri').

    Only lowercase ASCII words longer than three letters: shorter ones are mostly abbreviations
    and names of things (`api`, `css`, `npm`), and other scripts keep their words whole. On
    LoCoMo's questions (bench/bench_locomo.py) keyword recall@5 went 0.672 -> 0.703 against the
    plural-only stemmer, since people ask "when did she paint" about "I painted it last year".
    Cached: a conversation repeats its words, and the stemmer is pure Python (~60 us a word)."""
    if len(word) <= 3 or not word.isascii() or not word.isalpha() or word in _ENGLISH_STOP_WORDS:
        return word  # a stop word stays itself, so that it is still dropped
    return str(_ENGLISH.stemWord(word))


_ENGLISH = snowballstemmer.stemmer("english")


def is_stop_word(token: str) -> bool:
    """Whether a (normalized) token is a function word that search ignores."""
    return token in _ENGLISH_STOP_WORDS or token in _CJK_STOP_WORDS


_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")


def is_identifier_like(chunk: str) -> bool:
    """Whether a word names something exactly (`ECONNRESET`, `order_sync`, `src/app.py`,
    `parseHTTP`, `acme-tf-state`, `8080`) rather than saying something: search ranks rows that
    hold such a word first, and a long prompt keeps such words wherever they stand."""
    if not chunk.isascii() or len(chunk) < 3:
        return False
    has_alpha = any(c.isalpha() for c in chunk)
    has_digit = any(c.isdigit() for c in chunk)
    if not has_alpha:
        return has_digit  # a port, an error code, an issue number
    if has_digit:
        return True
    if "_" in chunk or "/" in chunk or "::" in chunk or "#" in chunk:
        return True
    if "-" in chunk.strip("-"):  # acme-tf-state, order-events, end-to-end
        return True
    if "." in chunk and len(chunk) >= 4:  # file.py, a.b.c (not "e.g")
        return True
    if _CAMEL.search(chunk):
        return True
    letters = [c for c in chunk if c.isalpha()]
    return len(letters) >= 4 and all(c.isupper() for c in letters)


def _keep_word_token(token: str) -> bool:
    # One letter or digit carries nothing.
    return len(token) > 1 and token not in _ENGLISH_STOP_WORDS and token not in _CJK_STOP_WORDS


def _identifier_tokens(part: str) -> list[str]:
    """Tokens of one joiner-free part such as 'parseHTTPResponse' or 'max_retry_count'."""
    folded = part.casefold()
    # Camel case is an ASCII convention; other scripts keep their words whole.
    if not part.isascii():
        return [_stem(folded)]
    pieces = _PIECE_RE.findall(part)
    if len(pieces) <= 1:
        return [_stem(folded) if pieces else folded]
    return [folded, *(_stem(piece.casefold()) for piece in pieces)]


def _word_tokens(chunk: str) -> list[str]:
    """Tokens of one word chunk: a word, an identifier, or a compound like a path or a URL."""
    if chunk.isalpha() and (chunk.islower() or chunk.istitle()):
        return [_stem(chunk.casefold())]  # the common case: a plain word
    parts = [p for p in _JOINER_SPLIT_RE.split(chunk) if p]
    tokens: list[str] = []
    if len(parts) > 1:
        tokens.append(chunk.casefold())
        if "/" in chunk:
            basename = chunk.rsplit("/", 1)[1]
            if basename and _JOINER_SPLIT_RE.search(basename):
                tokens.append(basename.casefold())
    for part in parts:
        tokens.extend(_identifier_tokens(part))
    return tokens


def _cjk_tokens(run: str, *, split_particles: bool) -> list[str]:
    segments = _QUERY_SPLIT_RE.split(run) if split_particles else [run]
    tokens: list[str] = []
    for segment in segments:
        if len(segment) > 1:
            tokens.extend([segment[i : i + 2] for i in range(len(segment) - 1)])
        # Unigrams too: one-character words (锁, 挂, 表) are common, and on the labelled set
        # they lift recall@4 and precision@1 (see tests/test_search_quality.py).
        tokens.extend(segment)
    return [t for t in tokens if t not in _CJK_STOP_WORDS]


def _tokens(text: str, *, query: bool) -> list[str]:
    tokens: list[str] = []
    for cjk, word in _CHUNK_RE.findall(unicodedata.normalize("NFKC", text)):
        if cjk:
            tokens.extend(_cjk_tokens(cjk, split_particles=query))
        else:
            tokens.extend(t[:MAX_TOKEN_CHARS] for t in _word_tokens(word) if _keep_word_token(t))
    return tokens


def index_tokens(text: str) -> list[str]:
    """Tokens to index for `text`, repeats kept (term frequency matters to BM25).

    Stop words are already dropped. Joined with spaces, the result is what the local store
    hands to FTS5 (whose tokenizer `FTS5_TOKENIZE` splits it back into the same tokens).
    """
    return _tokens(text, query=False)


def _clip_query(text: str) -> str:
    if len(text) <= MAX_QUERY_CHARS:
        return text
    half = MAX_QUERY_CHARS // 2
    return text[:half] + "\n" + text[-half:]


def query_terms(text: str, max_terms: int = 32) -> list[str]:
    """Distinct search terms of a query, in order of first appearance, at most `max_terms`.

    Stop words never appear. Only the first and last `MAX_QUERY_CHARS // 2` characters of a
    long query are read, so the cost is bounded whatever the caller passes.
    """
    seen: dict[str, None] = {}
    for token in _tokens(_clip_query(text), query=True):
        if token not in seen:
            seen[token] = None
            if len(seen) >= max_terms:
                break
    return list(seen)


def overlap_score(query_terms: Sequence[str], text: str) -> float:
    """The share of distinct query terms that occur among `text`'s index tokens, in [0, 1].

    IDF-free on purpose: recall scores a handful of L2 entries (path plus summary) against one
    query, too few documents for document frequencies to mean anything. Stop words cannot
    match because neither side contains them; CJK works through the shared bigrams.
    """
    wanted = set(query_terms)
    if not wanted:
        return 0.0
    present = set(index_tokens(text))
    return len(wanted & present) / len(wanted)
