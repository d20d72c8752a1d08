"""The threat scanner's skill scope: a SKILL.md judged as the documentation it is.

Threat: a skill is a memory entry with more reach. Its description sits in
every system prompt, its body is followed as instructions, and its code blocks
are commands the agent runs, so one poisoned skill can override the agent,
leak the user's credentials or plant something that runs later, like a
poisoned note. But a skill is documentation a person installs, not a note: it
is long, and its commands legitimately send a credential to the service it is
for (``Authorization: Bearer $GITHUB_TOKEN`` to ``api.github.com``), its
examples hold placeholder URLs (``https://huggingface.co/<repo>``), its setup
steps say where a key comes from and where it is kept, and its rules forbid
the very acts the strict rules look for ("Never ask the user to paste tokens
into chat"). The strict rules, written for two-line notes, refuse all of that.

So a document is split where a reader sees it split, and each part is judged
for what it does:

- Prose (the description and everything outside fenced code blocks) is what
  the skill tells the model: the strict rules, except that a secret file
  beside an address does not count when the file is only where a key is kept
  ("Store in ~/.hermes/.env" after "Create a key at https://..."); a URL
  placeholder counts when it stands for private data (``<token>``,
  ``{conversation}``), not for a name (``<repo>``, ``$OWNER``); the user's
  crontab counts where something is written *to* it ("add this to the user's
  crontab"), not where it is named as a means ("renew it from a systemd timer
  or plain crontab"). Other startup places are judged as in memory.
- Fenced code is what the agent runs: every strict rule but the two that
  judge co-occurrence in notes. A placeholder URL in an example is not a
  destination; a secret file and an address count together only in one
  command (backslash continuations joined) that runs a transfer tool, so
  ``ssh-keygen -C me@example.com -f ~/.ssh/id_ed25519`` generates a key and
  ``scp ~/.ssh/id_rsa me@host:`` ships one. Code is no hiding place: the
  injection, secret-reading, backdoor and persistence rules run on it as on
  prose.
- Requests, in prose or code, are judged by their destination. A credential
  named after a service (``GITHUB_TOKEN``, ``TENOR_API_KEY``) sent to that
  service's host (``api.github.com``; ``tenor.googleapis.com`` under Google's
  API domain) is use; sent anywhere else, in data, query, header or
  ``user:password`` alike, it is exfiltration (``exfil.credential_to_other_host``,
  which the strict rules do not see for headers). The environment, a secret
  file or a generic variable belongs to no host. A host that anyone can name
  (``*.github.io``, ``*.vercel.app``) or a bare address belongs to no one;
  loopback belongs to every credential (data never leaves the machine).
- A prohibition ("Never print tokens into chat", "Do not send ~/.xurl to the
  model") is not the act it forbids: the rules that describe moving or
  showing data do not count inside a clause that opens with one, unless the
  clause turns ("never forget to...", "...but", "unless").

Learnt from Hermes Agent's own skills guard (``tools/skills_guard.py``): bare
mentions of a sensitive file are informational there and only mechanical
writes and instruction-shaped prose block; a loopback destination cannot move
data off the machine; a Markdown fence changes what a line is. Its trust
levels (bundled skills are never scanned) have no equivalent here: every skill
is scanned, whoever wrote it. A name-based owner check can be fooled by a
look-alike registered domain (``github-api.xyz`` is not ``github``, but
``github.xyz`` would pass); it is a tripwire like the rest of the scanner.
"""

from __future__ import annotations

import functools
import re

from . import semantic as _semantic
from .deobfuscate import views
from .threats import (
    _PLACEHOLDER,
    _SECRET_THING,
    _SECRET_VAR,
    _URL_OR_MAIL,
    ALL_RULES,
    CREDENTIAL_ELSEWHERE_ID,
    MEMORY_ONLY_RULES,
    PLANT_VERB,
    RULE_KEYWORDS,
    SHELL_WRITE,
    STARTUP_PLACE,
    STARTUP_TARGET,
    ThreatPattern,
    _semantic_on,
    run_rules,
    unicode_findings,
)

# A fenced code block opens and closes with three or more backticks or tildes (CommonMark;
# any indentation, as fences inside list items are indented).
_FENCE_RE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")
# A shell command continued on the next line is one command.
_CONTINUATION_RE = re.compile(r"\\\n[ \t]*")

# Rules that describe moving or showing data: a prohibition of the act is not the act.
_FORBIDDABLE = frozenset(
    {
        "exfil.dump_to_chat",
        "exfil.send_to_url",
        "exfil.found_secret_sent",
        "exfil.exfiltrate",
        "secret_read.dump_secrets",
        "system_prompt.leak",
    }
)
# A clause that opens with a prohibition (list bullets and Markdown emphasis stripped).
_PROHIBITION_RE = re.compile(
    r"\s*(?:[-+>]\s*|\d+[.)]\s*)?(?:never|do\s+not|don't|must\s+not|mustn't|should\s+not|"
    r"shouldn't|avoid)\b",
    re.I,
)
# ...unless it turns: the prohibition is of forgetting or refusing, or another clause follows.
_TURN_RE = re.compile(
    r"\b(?:but|then|instead|unless|except|until|without|before|after|otherwise|however|"
    r"forget|fail|hesitate|neglect|omit|skip|refuse|stop)\b",
    re.I,
)
_CLAUSE_END = ".;!?\n"

# Tools that make an HTTP request, in a shell or a script.
_REQUEST_TOOL = (
    r"(?:\b(?:curl|wget|xh|Invoke-WebRequest|Invoke-RestMethod|iwr|irm)\b|"
    r"\b(?:requests|httpx|aiohttp|session|client)\.(?:get|post|put|patch|delete|request)\s*\(|"
    r"\bfetch\s*\(|\burlopen\s*\(|\baxios\b)"
)
# Tools that move a file or data off the machine (a secret file beside an address in such a command).
_TRANSFER_TOOL = re.compile(
    rf"{_REQUEST_TOOL}|\b(?:nc|ncat|netcat|socat|telnet|scp|rsync|s?ftp|mailx?|sendmail|mutt|"
    r"rclone|gsutil)\b|\baws\s+s3\b",
    re.I,
)
# A script reading one variable of the environment, and the name it reads.
_ENV_READ = (
    r"(?:os\.environ(?:\.get)?\s*[\[(]\s*|os\.getenv\s*\(\s*|System\.getenv\s*\(\s*|"
    r"\bENV\s*\[\s*)[\"']([A-Za-z_]\w*)[\"']|process\.env(?:\.|\[\s*[\"'])([A-Za-z_]\w*)"
)
_ENV_READ_RE = re.compile(_ENV_READ)
_SECRET_VAR_RE = re.compile(_SECRET_VAR, re.I)
_URL_HOST_RE = re.compile(r"\bhttps?://([^\s/\"'`()\[\]\\?#]+)", re.I)
_MAIL_HOST_RE = re.compile(r"(?<![\w.])[\w.+-]+@([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+)")
_PLACEHOLDER_RE = re.compile(_PLACEHOLDER)
# A name that says it is a credential (only such a placeholder can belong to a host).
_CREDENTIAL_NAME_RE = re.compile(r"key|token|secret|passw|credential|auth", re.I)

# Words of a credential's name that say what it is, not whose it is (GITHUB_TOKEN -> github).
_CREDENTIAL_WORDS = frozenset(
    "api key keys token tokens secret secrets access auth password passwd pass pat bearer "
    "client id personal private app oauth oauth2 bot user integration credential credentials "
    "refresh session service account env var".split()
)
# Suffixes under which anyone can name a host: a host there belongs to no credential.
_SHARED_HOSTING = (
    "github.io",
    "githubusercontent.com",
    "gitlab.io",
    "pages.dev",
    "workers.dev",
    "vercel.app",
    "netlify.app",
    "herokuapp.com",
    "appspot.com",
    "web.app",
    "firebaseapp.com",
    "ngrok.io",
    "ngrok.app",
    "ngrok-free.app",
    "trycloudflare.com",
    "cloudfunctions.net",
    "azurewebsites.net",
    "amazonaws.com",
    "onrender.com",
    "fly.dev",
    "glitch.me",
    "repl.co",
    "replit.dev",
    "deno.dev",
    "surge.sh",
    "blogspot.com",
    "pythonanywhere.com",
)
# A provider serving each product's API as <product>.<domain>: the product owns that host.
_PROVIDER_API_DOMAINS = frozenset({"googleapis.com"})
# Second-level labels of country domains (example.co.uk is registered as "example").
_COUNTRY_SECOND_LEVEL = frozenset({"co", "com", "org", "net", "ac", "gov", "edu", "ne", "or", "go"})
_ANY_OWNER = "*"

# Placeholder words that stand for private data (a name or id of a public thing does not).
_PRIVATE_WORDS = frozenset("key env ctx data text mail log logs pass pwd pin ssn".split())
_PRIVATE_STEMS = (
    "token",
    "secret",
    "passw",
    "credential",
    "cookie",
    "session",
    "email",
    "e-mail",
    "messag",
    "chat",
    "conversation",
    "histor",
    "transcript",
    "memor",
    "prompt",
    "summar",
    "context",
    "output",
    "result",
    "report",
    "payload",
    "content",
    "whoami",
    "apikey",
)

_SECRET_TO_DESTINATION = "exfil.secret_to_destination"
_URL_PLACEHOLDER = "exfil.url_placeholder"
_SHELL_STARTUP = "persistence.shell_startup"
_NET_TOOL_SECRET = "exfil.net_tool_secret"
_SCRIPT_ENV = "exfil.script_env"
_STRICT = {rule.id: rule for rule in ALL_RULES}

# A secret file and an address in one command (code: its lines are commands).
_SECRET_BESIDE_ADDRESS = ThreatPattern(
    _SECRET_TO_DESTINATION,
    rf"{_SECRET_THING}[^\n]{{0,200}}?{_URL_OR_MAIL}|{_URL_OR_MAIL}[^\n]{{0,200}}?{_SECRET_THING}",
    "a secret file and an outside address in one command",
    RULE_KEYWORDS[_SECRET_TO_DESTINATION],
)
# Something written to a startup place; the user's crontab only when something goes into it.
_WRITTEN_TO_STARTUP = ThreatPattern(
    _SHELL_STARTUP,
    rf"{SHELL_WRITE}[^\n]{{0,120}}?{STARTUP_TARGET}|{PLANT_VERB}[^\n]{{0,120}}?{STARTUP_PLACE}|"
    rf"{PLANT_VERB}(?:[^\n]{{0,120}}?\b(?:to|into|in|onto|inside)\b[^\n]{{0,40}}?|\s+(?:up\s+)?"
    r"(?:(?:the|your|a|an|their|my|our)\s+)?)\bcrontab\b|\|\s*crontab\b",
    "plants something that runs at login, boot, on a schedule or on every commit",
    RULE_KEYWORDS[_SHELL_STARTUP],
)
# A secret file named as the place to keep a key ("Store in ~/.hermes/.env") is not sent anywhere.
_STORED_IN_RE = re.compile(
    r"\b(?:store|save|put|add|keep|write|place|set)\w*\b[^.\n]{0,40}?\b(?:in|to|into|inside)\b"
    r"[^\w\n]*\S*$",
    re.I,
)
_SECRET_THING_RE = re.compile(_SECRET_THING, re.I)

# A request carrying a named credential (header, user:password, data or query).
_CREDENTIAL_REQUEST = ThreatPattern(
    CREDENTIAL_ELSEWHERE_ID,
    rf"{_REQUEST_TOOL}[^\n]*?(?:{_SECRET_VAR}|{_ENV_READ})|(?:{_SECRET_VAR}|{_ENV_READ})[^\n]*?{_REQUEST_TOOL}",
    "a request carrying a credential to a host it does not belong to",
    (
        "curl",
        "wget",
        "xh",
        "invoke-",
        "iwr",
        "irm",
        "requests.",
        "httpx.",
        "aiohttp.",
        "session.",
        "client.",
        "fetch",
        "urlopen",
        "axios",
    ),
)


def _replace(rules: dict[str, ThreatPattern | None]) -> tuple[ThreatPattern, ...]:
    """The strict rules with some replaced (or, for None, left out), then the request rule."""
    kept = [rules.get(rule.id, rule) for rule in ALL_RULES]
    return (*[rule for rule in kept if rule is not None], _CREDENTIAL_REQUEST)


# A skill is a Markdown document whose templates hold ordinary HTML comments: the memory
# notes' rule for prose in a comment does not apply (Hermes's own skills carry some).
_MEMORY_ONLY = {rule.id: None for rule in MEMORY_ONLY_RULES}
PROSE_RULES = _replace({**_MEMORY_ONLY, _SHELL_STARTUP: _WRITTEN_TO_STARTUP})
CODE_RULES = _replace(
    {**_MEMORY_ONLY, _SECRET_TO_DESTINATION: _SECRET_BESIDE_ADDRESS, _URL_PLACEHOLDER: None}
)


def scan_skill_for_threats(text: str, *, semantic: bool = False) -> list[str]:
    """Return the ids of the threat patterns a skill document matches, ``[]`` when clean.

    Rules only by default: the semantic layer's classifier is trained on memory
    notes, and on whole skill documents it flagged 38 of Hermes Agent's 177
    bundled skills (``docs/skills.md``), so a skill is not judged by it until it
    has been trained on skill text.

    Args:
        text: A SKILL.md's description and body (or a supporting Markdown file).
        semantic: Also ask the semantic layer about the whole text when no rule
            matched (when installed; True with ``HERMES_SEMANTIC_SCAN=on``).
    """
    prose, blocks = split_skill_text(text)
    found = unicode_findings(text)
    text_views = views(prose)
    run_rules(PROSE_RULES, text_views, found, counts=_prose_counts)
    for block in blocks:
        run_rules(CODE_RULES, views(_CONTINUATION_RE.sub(" ", block)), found, counts=_code_counts)
    if not found and _semantic_on(semantic) and _semantic.scorable(text):
        if _semantic.flagged([views(text)])[0]:
            found.append(_semantic.SEMANTIC_ID)
    return found


def split_skill_text(text: str) -> tuple[str, list[str]]:
    """``(prose, code blocks)``: a blank line stands in the prose where each block was.

    A fence left open runs to the end of the text, as a Markdown renderer shows it.
    """
    prose: list[str] = []
    blocks: list[str] = []
    block: list[str] | None = None
    opening = ""
    for line in text.split("\n"):
        fence = _FENCE_RE.match(line)
        if block is None:
            if fence and not (fence.group(1)[0] == "`" and "`" in fence.group(2)):
                block, opening = [], fence.group(1)
                prose.append("")
            else:
                prose.append(line)
        elif (
            fence
            and fence.group(1)[0] == opening[0]
            and len(fence.group(1)) >= len(opening)
            and not fence.group(2).strip()
        ):
            blocks.append("\n".join(block))
            block = None
        else:
            block.append(line)
    if block is not None:
        blocks.append("\n".join(block))
    return "\n".join(prose), blocks


def _prose_counts(rule: ThreatPattern, view: str, match: re.Match[str]) -> bool:
    if rule.id in _FORBIDDABLE and _forbidden(view, match.start()):
        return False
    if rule.id == _URL_PLACEHOLDER:
        return _carries_private_data(view, match)
    if rule.id == _SECRET_TO_DESTINATION:
        return not all(
            _STORED_IN_RE.search(view, 0, match.start() + m.start())
            for m in _SECRET_THING_RE.finditer(match.group(0))
        )
    return _request_counts(rule, view, match)


def _code_counts(rule: ThreatPattern, view: str, match: re.Match[str]) -> bool:
    if rule.id in _FORBIDDABLE and _forbidden(view, match.start()):
        return False
    if rule.id == _SECRET_TO_DESTINATION:
        return _TRANSFER_TOOL.search(_line(view, match)) is not None
    return _request_counts(rule, view, match)


def _forbidden(view: str, start: int) -> bool:
    """Whether the clause holding ``start`` opens with a prohibition that does not turn."""
    clause = max(view.rfind(mark, 0, start) for mark in _CLAUSE_END) + 1
    lead = re.sub(r"[*_~`]", "", view[clause:start])
    return _PROHIBITION_RE.match(lead) is not None and _TURN_RE.search(lead) is None


def _request_counts(rule: ThreatPattern, view: str, match: re.Match[str]) -> bool:
    """A request rule's match counts unless every credential it carries goes to its own host."""
    if rule.id not in (_NET_TOOL_SECRET, _SCRIPT_ENV, CREDENTIAL_ELSEWHERE_ID):
        return True
    line = _line(view, match)
    hosts = _hosts(line)
    known = [host for host in hosts if host is not None]
    if rule.id == CREDENTIAL_ELSEWHERE_ID:
        # Headers and user:password are beyond the strict rules: flag only a visible other host.
        names = [name for name in _credential_names(line) if _services(name)]
        return any(not _belongs(name, host) for name in names for host in known)
    names = _credential_names(match.group(0))
    if not names or not hosts or len(known) < len(hosts):
        return True  # the environment, a file, or a host the text does not show
    return any(not _belongs(name, host) for name in names for host in known)


def _carries_private_data(view: str, match: re.Match[str]) -> bool:
    """Whether the URL holds a placeholder for private data not bound for its own host."""
    end = re.compile(r"[\s)\]]").search(view, match.end())
    url = view[match.start() : end.start() if end else len(view)]
    host = next(iter(_hosts(url)), None)
    for placeholder in _PLACEHOLDER_RE.finditer(url):
        name = placeholder.group(0).strip("<>{}$ ")
        if _private(name) and not (
            host and _CREDENTIAL_NAME_RE.search(name) and _belongs(name, host)
        ):
            return True
    return False


def _private(name: str) -> bool:
    words = [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+", name)]
    joined = "".join(words)
    return any(w in _PRIVATE_WORDS or w.startswith(_PRIVATE_STEMS) for w in words) or any(
        stem in joined for stem in ("token", "secret", "password", "apikey", "credential")
    )


def _line(view: str, match: re.Match[str]) -> str:
    start = view.rfind("\n", 0, match.start()) + 1
    end = view.find("\n", match.end())
    return view[start : end if end != -1 else len(view)]


def _credential_names(text: str) -> list[str]:
    names = [m.group(0).strip("${}").removeprefix("env:") for m in _SECRET_VAR_RE.finditer(text)]
    names += [a or b for a, b in _ENV_READ_RE.findall(text)]
    return names


def _hosts(text: str) -> list[str | None]:
    """Each destination host in ``text``; None for one held in a variable or placeholder."""
    out: list[str | None] = []
    for m in _URL_HOST_RE.finditer(text):
        host = m.group(1).rsplit("@", 1)[-1]
        host = host[1:].split("]", 1)[0] if host.startswith("[") else host.split(":", 1)[0]
        out.append(None if not host or re.search(r"[$<{%]", host) else host.lower())
    out += [m.group(1).lower() for m in _MAIL_HOST_RE.finditer(text)]
    return out


def _belongs(credential: str, host: str) -> bool:
    """Whether ``host`` is the service the credential's name says it is for."""
    owner = _owner(host)
    return owner == _ANY_OWNER or (owner is not None and owner in _services(credential))


@functools.lru_cache(maxsize=1024)
def _services(credential: str) -> frozenset[str]:
    """The service words of a credential's name: TENOR_API_KEY -> tenor; HUGGING_FACE_TOKEN -> huggingface."""
    parts = [p for p in re.split(r"[^a-z0-9]+", credential.lower()) if p]
    words = [p for p in parts if p not in _CREDENTIAL_WORDS]
    runs = {"".join(words[i:j]) for i in range(len(words)) for j in range(i + 1, len(words) + 1)}
    return frozenset(runs)


@functools.lru_cache(maxsize=1024)
def _owner(host: str) -> str | None:
    """The name a host is registered under (``github`` for api.github.com), ``*`` for loopback."""
    host = host.rstrip(".")
    if (
        host in ("localhost", "::1", "0.0.0.0")
        or host.startswith("127.")
        or host.endswith(".localhost")
    ):
        return _ANY_OWNER
    labels = host.split(".")
    if len(labels) < 2 or re.fullmatch(r"[\d.]+|[\da-f:]+", host):
        return None
    if any(host == suffix or host.endswith("." + suffix) for suffix in _SHARED_HOSTING):
        return None
    size = (
        3 if len(labels) > 2 and len(labels[-1]) == 2 and labels[-2] in _COUNTRY_SECOND_LEVEL else 2
    )
    if ".".join(labels[-size:]) in _PROVIDER_API_DOMAINS:
        return labels[-size - 1] if len(labels) > size else None
    return labels[-size]
