"""The check every extracted memory passes after the model, whatever the model was told.

The extract prompt tells the model that the conversation is data; a model can still be talked
round by text in it (a pasted README, a tool's output, a line forging "SYSTEM:"), and a memory it
writes is recalled into every later session. So after the model, with no model:

1. `instruction_in`: a memory that is an instruction to the agent is refused: a destructive or
   remote-code shell command, "ignore previous instructions" and forged role markers, acting
   "without asking", turning off confirmations or safety checks, sending files, keys or data
   somewhere, hiding what is done from the user (English and Chinese).
2. `support_of`: a memory must be said in the user's text of the turns it cites: enough of its
   words (CJK by character) are there. A memory the user's text does not support is refused;
   one that draws on what the user pasted (`provenance`) rather than their own words is marked so.
3. `changes_how_agent_acts`: constraints, preferences and memories about running things; those
   drawn from pasted text are held as proposals for /tdai-memory-review, never applied (`plan`).

Refusals are counted by reason (status, and the job record's reason).

The same instruction rules hold for every write a model makes: the model's save tool and the MCP
server's `memory_remember` (`save_refusal`), and the tags and questions of an enrichment job. What
the user saves by hand (/tdai-memory-remember, the inspector) is their own words and is not checked.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from pi_memory_bridge import textsearch
from pi_memory_bridge.learning.provenance import split_user_text

_I = re.IGNORECASE

# name shown in status and the job record -> patterns (English, Chinese); one match refuses
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "a destructive or remote-code shell command",
        re.compile(
            r"\brm\s+(?:-{1,2}[\w-]+\s+)*-{1,2}(?:[a-z]*[rf][a-z]*|recursive|force)\b|\brmdir\s+/s\b|\bdel\s+/[sfq]\b"
            r"|Remove-Item\b.*-Recurse|\bsudo\b|\bchmod\s+(?:-R\s+)?[0-7]?77[0-7]\b|\bchmod\s+-R\b|\bchown\s+-R\b"
            r"|\bmkfs\b|\bdd\s+if=|>\s*/dev/(?:sd|nvme|disk|hd)|:\(\)\s*\{"
            r"|\b(?:curl|wget|iwr|Invoke-WebRequest)\b[^|\n]*\|\s*(?:sudo\s+)?(?:ba|z|k|da|fi)?sh\b"
            r"|\b(?:curl|wget)\b[^|\n]*\|\s*(?:python|perl|ruby|node)\d*\b|<\(\s*(?:curl|wget)\b"
            r"|\bsh\s+-c\s+[\"']?\$\(\s*(?:curl|wget)|\beval\s*[\"'(`$]|\bbase64\s+(?:-d|--decode)\b"
            r"|\bnc\b[^\n]*\s-[a-z]*e\b|/dev/tcp/|\bpowershell\b[^\n]*-e(?:nc|ncodedcommand)?\b|\biex\b"
            r"|Invoke-Expression|\bpython[0-9.]*\s+-c\s|\bperl\s+-e\s"
            r"|\bgit\s+push\b[^\n]*(?:--force\b|\s-f\b|\+\w)|\bgit\s+reset\s+--hard\b|\bgit\s+clean\s+-[a-z]*f"
            r"|--no-verify\b|\bdrop\s+(?:table|database|schema)\b|\btruncate\s+table\b"
            r"|\b(?:shutdown|reboot|poweroff|halt)\s+(?:-[a-z]+|now)\b|\bkill\s+-9\s+-1\b|\bkillall\b"
            r"|\bhistory\s+-c\b|\bunset\s+HISTFILE\b|\bsetenforce\s+0\b|\bufw\s+disable\b|\biptables\s+-F\b"
            r"|\bcrontab\b|\bauthorized_keys\b|>>?\s*~?/?\.(?:bashrc|zshrc|profile|bash_profile)\b"
            r"|\bexport\s+\w*(?:KEY|TOKEN|SECRET|PASSWORD)\w*\s*="
            r"|\bnpm\s+config\s+set\s+registry\b|--(?:extra-)?index-url\b|--trusted-host\b"
            r"|删除(?:所有|全部|整个)|删掉(?:所有|全部|整个)|清空(?:所有|整个|数据库|磁盘|硬盘|目录|仓库|主目录)"
            r"|格式化(?:磁盘|硬盘|分区|系统盘)|强制推送|强推",
            _I,
        ),
    ),
    (
        "overrides the agent's instructions",
        re.compile(
            r"\b(?:ignore|disregard|forget|override|overrule|bypass)\b[^.\n]{0,40}?"
            r"\b(?:instructions?|prompts?|guidelines?|directions?|safeguards?|restrictions?)\b"
            r"|\b(?:ignore|disregard|forget|override|overrule|bypass)\b[^.\n]{0,20}?"
            r"\b(?:previous|prior|above|earlier|preceding|system|original|your|safety|security)\s+(?:rules?|polic(?:y|ies))"
            r"|\bnew (?:system )?instructions?\b|\bsystem prompt\b|\b(?:developer|god|dan|jailbreak) mode\b"
            r"|\byou are now\b|\bobey\b|\bjailbreak"
            r"|\b(?:store|save|remember|record|keep|memori[sz]e) (?:this|that|the following|it)\b"
            r"[^.\n]{0,30}?\bas\b"
            r"[^.\n]{0,20}?\b(?:preference|memory|rule|constraint|fact|instruction)"
            r"|(?-i:\b(?:SYSTEM|ASSISTANT|DEVELOPER)\s*[:：])|\[/?(?:INST|SYSTEM|SYS)\]|<\|[a-z_]+\|>|<</?SYS>>"
            r"|</?system>"
            r"|(?:忽略|无视|忘记|忘掉|不理会|绕过)[^。\n]{0,12}(?:指令|指示|提示词|设定|限制|约束|安全)"
            r"|(?:忽略|无视|忘记|忘掉|不理会|绕过)[^。\n]{0,4}(?:之前|以上|上面|先前|前面|所有|全部|一切|系统|原有|原来)"
            r"[^。\n]{0,4}(?:规则|要求)"
            r"|系统提示|新的指令|你现在是|开发者模式|越狱|【系统】|系统[:：]"
            r"|(?:存为|记为|保存为|记录为|当作|作为)[^。\n]{0,6}(?:用户)?(?:偏好|记忆|规则|约束)",
            _I,
        ),
    ),
    (
        "acts without asking or turns off confirmations or safety checks",
        re.compile(
            r"\bwithout (?:first )?(?:asking|confirm\w*|prompt\w*|permission|approval|review\w*|a review|"
            r"checking with|consent|the user'?s? (?:ok|approval|consent|permission))"
            r"|\b(?:never|don'?t|do not|no need to|stop)\s+(?:\w+\s+){0,3}?"
            r"(?:ask(?:ing)?|confirm\w*|prompt\w*|"
            r"check(?:ing)? with|wait(?:ing)? for (?:approval|confirmation|the user))\b"
            r"|\b(?:never|not|no longer)\b[^.\n]{0,20}?\b(?:be|being|get|getting)\s+(?:asked|prompted)\b"
            r"|\bno (?:confirmation|approval|prompt|permission)s?\b|\bauto[- ]?(?:approv|accept|confirm)\w*"
            r"|\b(?:approv|accept|confirm|allow)\w*\b[^.\n]{0,30}?\bautomatically\b"
            r"|\bautomatically\s+(?:approv|accept|confirm|allow)\w*"
            r"|\b(?:skip|bypass|disable|turn(?:s|ed|ing)? off|switch(?:es|ed)? off|suppress|silence|"
            r"deactivate)\w*\b"
            r"[^.\n]{0,30}?\b(?:confirm\w*|approvals?|safety|safeguards?|sandbox\w*|guard\w*|permissions?|"
            r"(?:all|safety|security) checks?|hooks?|verification|protections?|security)\b"
            r"|\b(?:confirm\w*|approvals?|safety|safeguards?|sandbox\w*|guard\w*|permission checks?|"
            r"verification|protections?)\b[^.\n]{0,20}?"
            r"\b(?:disabled|turned off|switched off|skipped|bypassed)\b"
            r"|--(?:dangerously[\w-]*|yolo|no-confirm\w*|assume-yes|skip-(?:checks?|verify|confirm\w*))\b|\byolo\b"
            r"|(?:不要|不用|无需|不必|别|无须|免|不再)(?:再)?(?:询问|问我|问用户|确认|请示|征求|审批|批准|提示|等待确认)"
            r"|未经(?:确认|同意|允许|批准|用户)|直接(?:执行|运行|删除)[^。\n]{0,6}不|自动(?:批准|确认|同意|授权)"
            r"|(?:跳过|关闭|禁用|绕过|关掉|停用|去掉)[^。\n]{0,10}(?:确认|安全|检查|校验|沙箱|防护|权限|审查|提示|钩子|验证)",
            _I,
        ),
    ),
    (
        "sends files, keys or data somewhere",
        re.compile(
            r"\bexfiltrat\w*|\b(?:send|upload|post|leak|transmit|forward|e-?mail|share|pipe|beacon|submit)\w*\b[^.\n]{0,60}?\b(?:keys?|secrets?|tokens?|credentials?|passwords?|"
            r"passwd|api[- ]?keys?|private|ssh|id_rsa|id_ed25519|\.env|env(?:ironment)? var\w*|cookies?|"
            r"wallet|kube ?config|\.npmrc|\.pypirc|\.netrc|shell history)\b"
            r"|\b(?:keys?|secrets?|tokens?|credentials?|passwords?|\.env|id_rsa)\b[^.\n]{0,40}?"
            r"\b(?:to|into) (?:https?://|\S+@\S+\.\w+|a (?:remote|external|third-party)|"
            r"the (?:remote|external))"
            r"|\b(?:send|upload|post|forward|e-?mail|beacon|report|pipe)\w*\b[^.\n]{0,80}?\b(?:to|at)\s+"
            r"(?:https?://|\S+@\S+\.\w+|[\w.-]+\.(?:com|net|io|org|xyz|ru|cn|top|site)\b)"
            r"|~/\.ssh\b|\.ssh/|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/credentials|\.netrc\b|\.git-credentials"
            r"|/etc/(?:passwd|shadow)\b|\.kube/config|\.docker/config\.json"
            r"|(?:发送|发给|发到|上传|传到|传给|转发|泄露|外泄|外传|提交到|贴到|复制到|同步到|上报|回传)[^。\n]{0,30}"
            r"(?:密钥|私钥|秘钥|令牌|凭证|凭据|密码|口令|token|key|\.ssh|id_rsa|环境变量|\.env|cookie|会话|机密)"
            r"|(?:密钥|私钥|秘钥|令牌|凭证|凭据|密码|口令|环境变量|机密)[^。\n]{0,30}"
            r"(?:发送|发给|发到|上传|传到|传给|转发|泄露|外传|上报|回传)"
            r"|(?:发送|发给|发到|上传|传到|传给|转发|上报|回传)[^。\n]{0,40}(?:https?://|\S+@\S+\.\w+)",
            _I,
        ),
    ),
    (
        "hides what it does from the user",
        re.compile(
            r"\b(?:don'?t|do not|never|without)\s+(?:tell|telling|inform\w*|mention\w*|notify\w*|alert\w*)\b"
            r"[^.\n]{0,20}?\b(?:user|them|anyone|me|him|her)\b"
            r"|\b(?:secretly|covertly|behind the user'?s back)\b"
            r"|(?:不要|别|不必|无需|不用)(?:告诉|通知|提醒|告知)(?:用户|他|她|任何人|我)|偷偷|暗中|秘密地|悄悄地",
            _I,
        ),
    ),
)

_RUNNING = re.compile(
    r"`|\b(?:run|runs|running|ran|execut\w*|invok\w*|install\w*|launch\w*|deploy\w*|commit\w*|push\w*|"
    r"delet\w*|remov\w*|command\w*|scripts?|shell|terminal|bash|zsh|sudo|make|npm|npx|pnpm|yarn|pip|"
    r"uv|cargo|go (?:run|build|test)|git|docker|kubectl|curl|wget|build\w*|before (?:each|every)|"
    r"after (?:each|every)|automatic\w*|always)\b"
    r"|运行|执行|跑一下|安装|调用|命令|脚本|部署|提交|推送|删除|终端|构建|每次|总是|自动",
    _I,
)

# words every memory is phrased with: they say nothing about where its content came from
_FRAMING = frozenset(
    "user users project projects prefer prefers preferred preference want wants wanted like likes "
    "always never must should need needs use uses used wish wishes ask asks require requires "
    "team teams thing things way ways work works".split()
)
_FRAMING_CJK = frozenset("用户项目喜欢希望总是永远不要需要必须偏好想要使用始终要求")
_CJK_CHAR = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_MIN_SUPPORT = 0.3

Source = Literal["own", "pasted"]


# "do not add dependencies without asking me": the user wants to be asked, the opposite of what
# the rule is for; the "without asking" of such a clause is not read (the rest still is)
_ASK_FIRST = re.compile(
    r"(?P<keep>\b(?:do not|don'?t|never|must not|mustn'?t|should not|shouldn'?t|may not|cannot|can'?t)\s+"
    r"(?!(?:forget|hesitate|bother|wait|need|have)\b)(?:[\w-]+\s+){1,6}?)"
    r"without (?:first )?(?:asking|confirm\w*|permission|approval|consent|checking with)\b"
    r"|(?P<keep_zh>未经[^。，,\n]{0,8}?(?:同意|确认|允许|批准)[^。\n]{0,3}?(?:不要|别|不得|不能|不许|禁止|不可))",
    re.IGNORECASE,
)


def _without_ask_first(text: str) -> str:
    def keep(match: re.Match[str]) -> str:
        if match.group("keep_zh"):
            return match.group("keep_zh")[-2:]  # the prohibition stays; the 未经 clause goes
        return match.group("keep")

    return _ASK_FIRST.sub(keep, text)


def instruction_in(texts: Iterable[str]) -> str | None:
    """The name of the first rule one of `texts` breaks (an instruction to the agent), or None."""
    for text in texts:
        read = _without_ask_first(text)
        for name, pattern in _RULES:
            if pattern.search(read):
                return name
    return None


SAVE_REFUSED = "model's save refused: instruction to the agent"


def save_refusal(text: str, *, how_user_saves: str) -> tuple[str, str] | None:
    """(rule, the tool result saying why) when a model's save is an instruction to the agent, or
    None. A tool's output or a pasted document can talk the model into such a save; the user can
    still keep the text as their own words (`how_user_saves` names how)."""
    rule = instruction_in([text])
    if rule is None:
        return None
    return rule, (
        f"Not saved: this memory reads as an instruction to the agent ({rule}). Text from a tool's "
        "output or a pasted document can ask for such a save, so a model's save of it is refused. "
        f"If the user wants it kept, they can save it in their own words with {how_user_saves}."
    )


def changes_how_agent_acts(kind: str, text: str) -> bool:
    """Constraints and preferences (rules for the agent, as a planted one would be), and any other
    memory about running things."""
    return kind in ("constraint", "preference") or bool(_RUNNING.search(text))


def _cjk_chars(text: str) -> set[str]:
    return set(_CJK_CHAR.findall(unicodedata.normalize("NFKC", text)))


def _content_terms(text: str) -> set[str]:
    """Words (ASCII) and characters (CJK) that carry what a memory says.

    CJK is compared by character, not by the search index's character pairs: a memory paraphrases
    ("一律使用 pnpm" for "只用 pnpm"), and pairs across word borders (律使) would never match."""
    words = {t for t in textsearch.query_terms(text, 200) if t.isascii() and t not in _FRAMING}
    chars = {c for c in _cjk_chars(text) if not textsearch.is_stop_word(c) and c not in _FRAMING_CJK}
    return words | chars


def _turn_terms(text: str) -> set[str]:
    return {t for t in textsearch.index_tokens(text) if t.isascii()} | _cjk_chars(text)


def _matches(term: str, tokens: set[str]) -> bool:
    if term in tokens:
        return True
    if not (term.isascii() and term.isalpha() and len(term) >= 4):
        return False
    # one English word in another's form: "lint" / "linting", "migration" / "migrated"
    stem = term[:5]
    return any(
        t.startswith(stem) or (len(t) >= 4 and term.startswith(t))
        for t in tokens
        if t.isascii() and len(t) >= 4 and (len(term) >= 5 or t.startswith(term))
    )


@dataclass(frozen=True, slots=True)
class Support:
    supported: bool
    source: Source  # meaningful when supported
    share: float  # of the memory's content words found in the user's text


def support_of(memory_text: str, user_texts: Sequence[str]) -> Support:
    """How far the user's text of the cited turns says what the memory says, and in whose words."""
    terms = _content_terms(memory_text)
    if not terms:
        return Support(False, "pasted", 0.0)
    parts = [split_user_text(t) for t in user_texts]
    own = _turn_terms("\n".join(p.own for p in parts))
    pasted = _turn_terms("\n".join(p.pasted for p in parts))
    found = {t for t in terms if _matches(t, own) or _matches(t, pasted)}
    in_own = {t for t in terms if _matches(t, own)}
    share = len(found) / len(terms)
    supported = share >= _MIN_SUPPORT and len(found) >= (1 if len(terms) <= 2 else 2)
    drawn_from_paste = bool(found - in_own) or len(in_own) / len(terms) < _MIN_SUPPORT
    return Support(supported, "pasted" if drawn_from_paste else "own", share)
