"""Whether a text is an instruction to the agent: the rules every memory a model writes is held to.

A memory is recalled into every later session; text that talks a model into writing one (a pasted
README, a tool's output, a line forging "SYSTEM:") would act there as an instruction. So whatever
a model writes into memory, with no model, is read against these rules: a destructive or
remote-code shell command, "ignore previous instructions" and forged role markers, acting "without
asking", turning off confirmations or safety checks, sending files, keys or data somewhere, hiding
what is done from the user (English and Chinese). Consolidation (`learning.postcheck`), the model's
save tool and the MCP server's `memory_remember` (`tools.memory.save_refusal`) and enrichment's
tags and questions (`learning.enrichment`) all ask `instruction_in`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

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
