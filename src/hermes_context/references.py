"""``@`` references in a user message, expanded into attached context (SPEC 8).

``@file:path[:start-end]``, ``@folder:path``, ``@diff``, ``@staged``,
``@git:N`` and ``@url:https://...`` are read exactly (no retrieval) and
appended to the message under ``--- Attached Context ---``; what could not be
attached is said under ``--- Context Warnings ---``. The message text itself
is kept as written.

Threats, and the answer to each: a reference that reads a secret or a file
outside the project (paths resolved with links followed, kept under the
allowed roots, secrets refused: ``tools.sandbox``); a git command that runs a
program the workspace's configuration names, or reads an enclosing checkout
(git runs only through the hardened ``tools.git``); a URL that reaches the
machine's own services or the cloud metadata endpoint (every address the host
name resolves to, at every redirect, must be public unless
``allow_private_urls``); a reference that floods the window (all attachments
together stay under half of it, with a warning past a quarter; binary and
oversized files become a pointer line; fetches are capped in size and time).
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from .tokens import estimate_tokens_rough
from .tools.git import GitRefused, GitUnavailable, run_git
from .tools.sandbox import PathRefused, relative_display, resolve_path, walk_files

REFERENCE_PATTERN = re.compile(
    r"(?<![\w/])@(?:(?P<simple>diff|staged)\b"
    r"|(?P<kind>file|folder|git|url):(?P<value>\"[^\"\n]+\"|'[^'\n]+'|\S+))"
)
ATTACHED_HEADER = "--- Attached Context ---"
WARNINGS_HEADER = "--- Context Warnings ---"
# Shares of the context window all attachments together may use: above the
# soft one a warning, above the hard one the attachment is left out.
SOFT_LIMIT_SHARE = 0.25
HARD_LIMIT_SHARE = 0.50
# Trailing characters that end a sentence, not a path or URL.
TRAILING_PUNCTUATION = ".,;:!?)]}>\"'"
# Files bigger than this are attached as a pointer line, whatever the budget.
MAX_FILE_BYTES = 2_000_000
BINARY_SNIFF_BYTES = 8_192
# @folder lists this many entries at most.
MAX_FOLDER_ENTRIES = 200
FOLDER_SKIPPED = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".tox"})
# @git:N is clamped to this range.
GIT_LOG_MIN, GIT_LOG_MAX = 1, 10
# A URL fetch: seconds in all (resolution, redirects and body together), bytes
# of body kept at most, redirects followed.
URL_TIMEOUT_SECONDS = 10.0
URL_MAX_BYTES = 1_000_000
URL_MAX_REDIRECTS = 5
URL_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml")
# Content encodings asked for and inflated (zlib window bits of each): only
# those zlib can inflate a bounded amount at a time.
URL_ENCODINGS = {
    "gzip": 16 + zlib.MAX_WBITS,
    "x-gzip": 16 + zlib.MAX_WBITS,
    "deflate": zlib.MAX_WBITS,
}
URL_ACCEPT_ENCODING = "gzip, deflate"


@dataclass
class Reference:
    """One reference found in the message and what became of it."""

    kind: str  # file, folder, diff, staged, git, url
    value: str
    raw: str  # as written
    status: str = "attached"  # attached, pointer, refused, failed, over_budget
    tokens: int = 0
    detail: str = ""


@dataclass
class ReferenceExpansion:
    """The result of ``expand_references``.

    Attributes:
        message: The text to send: the original followed by the attached blocks.
        original: The text as the user wrote it.
        references: Every reference, with its status.
        warnings: Lines of the ``Context Warnings`` block.
        injected_tokens: Estimated tokens of everything attached.
    """

    message: str
    original: str
    references: list[Reference] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    injected_tokens: int = 0

    @property
    def expanded(self) -> bool:
        return self.message != self.original


def find_references(text: str) -> list[Reference]:
    """The references in ``text``, values unquoted and trailing punctuation stripped."""
    found = []
    for match in REFERENCE_PATTERN.finditer(text):
        if match.group("simple"):
            found.append(Reference(match.group("simple"), "", match.group(0)))
            continue
        value = match.group("value")
        if value[:1] in "\"'" and value[-1:] == value[:1]:
            value = value[1:-1]
        else:
            value = value.rstrip(TRAILING_PUNCTUATION) or value  # "@folder:." stays "."
        if value:
            found.append(Reference(match.group("kind"), value, match.group(0)))
    return found


def expand_references(
    text: str,
    *,
    cwd: str | Path,
    context_length: int,
    allowed_roots: Sequence[str | Path] | None = None,
    allow_private_urls: bool = False,
    hermes_home: str | Path | None = None,
) -> ReferenceExpansion:
    """Expand the ``@`` references of a user message (SPEC 8).

    Args:
        text: The user's message.
        cwd: Directory relative paths and git commands start from.
        context_length: The model's window; attachments share half of it.
        allowed_roots: Directories files may come from (default: ``cwd``).
        allow_private_urls: Let ``@url`` reach private, loopback and link-local
            addresses (tests, intranets).
        hermes_home: The home whose key and history files are refused.
    """
    refs = find_references(text)
    if not refs:
        return ReferenceExpansion(text, text)
    base = Path(cwd)
    roots = [Path(r) for r in (allowed_roots or [base])]
    home = Path(hermes_home) if hermes_home else None
    soft, hard = int(context_length * SOFT_LIMIT_SHARE), int(context_length * HARD_LIMIT_SHARE)
    blocks: list[str] = []
    warnings: list[str] = []
    used = 0
    for ref in refs:
        try:
            body = _resolve(ref, base, roots, home, allow_private_urls)
        except (PathRefused, GitRefused, GitUnavailable, _Unavailable) as exc:
            ref.status = "refused" if isinstance(exc, (PathRefused, GitRefused)) else "failed"
            ref.detail = str(exc)
            warnings.append(f"{ref.raw}: {exc}")
            continue
        except Exception as exc:  # noqa: BLE001 - one bad reference must not end the turn
            ref.status, ref.detail = "failed", f"{type(exc).__name__}: {exc}"
            warnings.append(
                f"{ref.raw}: could not be attached ({ref.detail}); check the reference "
                "and send the message again"
            )
            continue
        block = _block(ref, body)
        tokens = estimate_tokens_rough(block)
        if used + tokens > hard:
            ref.status, ref.tokens = "over_budget", tokens
            warnings.append(
                f"{ref.raw}: not attached, {tokens:,} tokens would take the attachments past "
                f"half of the {context_length:,}-token window; reference a smaller part "
                "(@file:path:START-END)"
            )
            continue
        used += tokens
        ref.tokens = tokens
        blocks.append(block)
    if used > soft:
        warnings.append(
            f"attachments use {used:,} tokens, more than a quarter of the "
            f"{context_length:,}-token window"
        )
    parts = [text]
    if blocks:
        parts.append(f"{ATTACHED_HEADER}\n\n" + "\n\n".join(blocks))
    if warnings:
        parts.append(f"{WARNINGS_HEADER}\n" + "\n".join(f"- {w}" for w in warnings))
    return ReferenceExpansion("\n\n".join(parts), text, refs, warnings, used)


class _Unavailable(Exception):
    """A reference that is allowed but could not be read (missing file, no git, HTTP error)."""


def _resolve(
    ref: Reference, cwd: Path, roots: list[Path], home: Path | None, private_ok: bool
) -> str:
    if ref.kind == "file":
        return _file(ref, cwd, roots, home)
    if ref.kind == "folder":
        return _folder(ref, cwd, roots, home)
    if ref.kind == "diff":
        return _git(cwd, "diff")
    if ref.kind == "staged":
        return _git(cwd, "diff", "--staged")
    if ref.kind == "git":
        try:
            count = int(ref.value)
        except ValueError:
            raise _Unavailable(f"@git takes a number of commits, not {ref.value!r}") from None
        count = min(max(count, GIT_LOG_MIN), GIT_LOG_MAX)
        return _git(cwd, "log", f"-{count}", "-p")
    return _url(ref.value, private_ok)


_RANGE = re.compile(r"^(?P<path>.+?):(?P<start>\d+)(?:-(?P<end>\d+))?$")


def _file(ref: Reference, cwd: Path, roots: list[Path], home: Path | None) -> str:
    raw, start, end = ref.value, None, None
    match = _RANGE.match(raw)
    if match and not os.path.exists(cwd / raw):  # False, not an error, for a bad name
        raw, start = match.group("path"), int(match.group("start"))
        end = int(match.group("end") or start)
    path = resolve_path(raw, cwd=cwd, roots=roots, hermes_home=home)
    if not path.is_file():
        raise _Unavailable(f"{raw} is not a file")
    size = path.stat().st_size
    with path.open("rb") as fh:
        binary = b"\x00" in fh.read(BINARY_SNIFF_BYTES)
    if binary or size > MAX_FILE_BYTES:
        ref.status = "pointer"
        what = "binary file" if binary else "file too large to attach"
        return f"[{what}: {relative_display(path, roots)}, {size:,} bytes; read parts of it with tools]"
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if start is not None:
        if start < 1 or start > max(len(lines), 1) or (end or start) < start:
            raise _Unavailable(f"lines {start}-{end} are outside {raw} ({len(lines)} lines)")
        lines = lines[start - 1 : end]
        ref.detail = f"lines {start}-{start + len(lines) - 1}"
    return "\n".join(lines)


def _folder(ref: Reference, cwd: Path, roots: list[Path], home: Path | None) -> str:
    path = resolve_path(ref.value, cwd=cwd, roots=roots, hermes_home=home)
    if not path.is_dir():
        raise _Unavailable(f"{ref.value} is not a folder")
    entries: list[str] = []
    for file in walk_files(path, roots=roots, hermes_home=home, skip_dirs=FOLDER_SKIPPED):
        if len(entries) >= MAX_FOLDER_ENTRIES:
            entries.append("[... more entries not listed; use @folder on a subfolder]")
            break
        try:
            size = file.stat().st_size
        except OSError:
            continue
        rel = file.relative_to(path)
        entries.append(f"{'  ' * (len(rel.parts) - 1)}{rel.as_posix()} ({size:,} bytes)")
    return "\n".join(entries) or "(empty folder)"


def _git(cwd: Path, command: str, *args: str) -> str:
    out = run_git(cwd, command, *args)
    return out if out.strip() else "(no changes)"


def _url(url: str, private_ok: bool) -> str:
    """The page at ``url`` as text, within ``URL_TIMEOUT_SECONDS`` in all.

    Per-read timeouts alone let a server that sends a byte every few seconds
    hold the turn for ever, so the fetch (resolution, redirects, body) runs on
    a worker thread the caller waits for until the deadline; the worker checks
    the same deadline between reads and stops soon after.
    """
    deadline = time.monotonic() + URL_TIMEOUT_SECONDS
    outcome: dict[str, Any] = {}

    def fetch() -> None:
        try:
            outcome["text"] = _fetch(url, private_ok, deadline)
        except Exception as exc:  # noqa: BLE001 - handed to the waiting caller
            outcome["error"] = exc

    worker = threading.Thread(target=fetch, name="hermes-url-fetch", daemon=True)
    worker.start()
    worker.join(max(deadline - time.monotonic(), 0.0))
    if worker.is_alive():
        raise _too_slow(url)
    if "error" in outcome:
        raise outcome["error"]
    return str(outcome["text"])


def _too_slow(url: str) -> _Unavailable:
    return _Unavailable(
        f"{url} took longer than {URL_TIMEOUT_SECONDS:g} s (redirects included); "
        "try again later or attach a smaller page"
    )


def _fetch(url: str, private_ok: bool, deadline: float) -> str:
    import httpx  # the openai SDK's HTTP client; lazy like every heavy import

    current = url
    headers = {"User-Agent": "hermes-context", "Accept-Encoding": URL_ACCEPT_ENCODING}
    with httpx.Client(follow_redirects=False) as client:
        for _ in range(URL_MAX_REDIRECTS + 1):
            _check_url(current, private_ok)
            timeout = httpx.Timeout(max(deadline - time.monotonic(), 0.01))
            try:
                with client.stream("GET", current, headers=headers, timeout=timeout) as resp:
                    if resp.is_redirect and "location" in resp.headers:
                        current = urljoin(current, resp.headers["location"])
                        continue
                    if resp.status_code >= 400:
                        raise _Unavailable(f"{url} answered HTTP {resp.status_code}")
                    kind = resp.headers.get("content-type", "").split(";")[0].strip().lower()
                    if kind and not kind.startswith(URL_TEXT_TYPES):
                        return f"[{kind} content at {url}; not attached]"
                    body = _read_capped(resp, deadline, url)
            except httpx.TimeoutException:
                raise _too_slow(url) from None
            except httpx.HTTPError as exc:
                raise _Unavailable(f"could not fetch {url}: {type(exc).__name__}: {exc}") from None
            text = body.decode(resp.encoding or "utf-8", errors="replace")
            return _html_text(text) if "html" in kind else text
    raise _Unavailable(f"{url} redirected more than {URL_MAX_REDIRECTS} times")


def _read_capped(resp: Any, deadline: float, url: str) -> bytes:
    """The body, inflated here (never by httpx) so memory stays near the cap.

    httpx inflates each network chunk whole: 64 KB of gzip can become 64 MB
    before any cap applies. Raw bytes go through ``zlib`` with ``max_length``.
    """
    inflate = _inflater(resp.headers.get("content-encoding", ""))
    data = bytearray()
    for chunk in resp.iter_raw():
        if time.monotonic() > deadline:
            raise _too_slow(url)
        data += inflate(chunk, URL_MAX_BYTES + 1 - len(data))
        if len(data) > URL_MAX_BYTES:
            return bytes(data[:URL_MAX_BYTES]) + b"\n[... cut at 1 MB]"
    return bytes(data)


def _inflater(encoding: str) -> Callable[[bytes, int], bytes]:
    """A function giving at most ``room`` inflated bytes of the next raw chunk."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return lambda chunk, room: chunk[:room]
    if name not in URL_ENCODINGS:
        raise _Unavailable(
            f"the server sent content-encoding {name}, which is not accepted "
            f"({URL_ACCEPT_ENCODING}); fetch the page another way"
        )
    inflater = zlib.decompressobj(URL_ENCODINGS[name])

    def inflate(chunk: bytes, room: int) -> bytes:
        try:
            return inflater.decompress(chunk, room)
        except zlib.error as exc:
            raise _Unavailable(f"the server's {name} body is corrupt ({exc})") from None

    return inflate


def _check_url(url: str, private_ok: bool) -> None:
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise _Unavailable(f"{url} is not a valid URL ({exc}); fix the host or port") from None
    if parts.scheme not in ("http", "https") or not host:
        raise PathRefused(f"{url} is not an http(s) URL")
    if private_ok:
        return
    try:
        infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise _Unavailable(f"cannot resolve {parts.hostname}: {exc}") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0])
        if not address.is_global:
            raise PathRefused(
                f"{url} resolves to a private, loopback or link-local address ({address}); "
                "such fetches are refused unless allowed (allow_private_urls)"
            )


class _TextOnly(HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "svg", "head"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in self._SKIP:
            self._skipping += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skipping:
            self._skipping -= 1
        elif tag in ("p", "div", "li", "br", "h1", "h2", "h3", "h4", "tr", "pre"):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def _html_text(html: str) -> str:
    parser = _TextOnly()
    parser.feed(html)
    text = "".join(parser.parts)
    return re.sub(r"\n\s*\n+", "\n\n", re.sub(r"[ \t]+", " ", text)).strip()


def _block(ref: Reference, body: str) -> str:
    label = ref.raw if not ref.detail else f"{ref.raw} ({ref.detail})"
    fence = "```"
    while fence in body:
        fence += "`"
    return f"{label}\n{fence}\n{body}\n{fence}"
