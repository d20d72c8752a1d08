"""``expand_references`` (SPEC 8): parsing, files, folders, git, URLs, limits."""

from __future__ import annotations

import functools
import gzip
import os
import shutil
import socket
import subprocess
import threading
import time
import tracemalloc
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hermes_context import expand_references
from hermes_context.references import ATTACHED_HEADER, WARNINGS_HEADER, find_references


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "app.py").write_text("".join(f"print({i})\n" for i in range(1, 21)), encoding="utf-8")
    (root / "pkg").mkdir()
    (root / "pkg" / "mod.py").write_text("X = 1\n", encoding="utf-8")
    (root / "my notes.txt").write_text("spaced name\n", encoding="utf-8")
    (root / ".env").write_text("SECRET=hunter2\n", encoding="utf-8")
    (root / "logo.png").write_bytes(b"\x89PNG\x00\x00" * 50)
    return root


def expand(text, root, **kwargs):
    kwargs.setdefault("context_length", 100_000)
    return expand_references(text, cwd=root, **kwargs)


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("see @file:app.py.", [("file", "app.py")]),
        ("(@file:app.py:3-5)", [("file", "app.py:3-5")]),
        ('read @file:"my notes.txt" now', [("file", "my notes.txt")]),
        ("mail user@example.com about @diff", [("diff", "")]),
        ("a/@file:app.py and x@file:app.py", []),
        (
            "@staged, @git:3 and @url:https://example.com/a?b=1!",
            [
                ("staged", ""),
                ("git", "3"),
                ("url", "https://example.com/a?b=1"),
            ],
        ),
        ("@folder:pkg/", [("folder", "pkg/")]),
        ("@different @diffs", []),
    ],
)
def test_references_are_found_like_the_reference_implementation(text, found):
    assert [(r.kind, r.value) for r in find_references(text)] == found


def test_files_are_attached_whole_or_by_line_range(repo):
    result = expand("compare @file:app.py:3-4 with @file:pkg/mod.py", repo)
    assert result.message.startswith("compare @file:app.py:3-4 with @file:pkg/mod.py\n\n")
    attached = result.message.split(ATTACHED_HEADER, 1)[1]
    assert "@file:app.py:3-4 (lines 3-4)\n```\nprint(3)\nprint(4)\n```" in attached
    assert "X = 1" in attached and "print(5)" not in attached
    assert [r.status for r in result.references] == ["attached", "attached"]
    assert result.injected_tokens > 0 and not result.warnings


def test_quoted_paths_and_a_fence_inside_the_file(repo):
    (repo / "doc.md").write_text("```python\ncode\n```\n", encoding="utf-8")
    result = expand('@file:"my notes.txt" and @file:doc.md', repo)
    assert "spaced name" in result.message
    assert "````\n```python\ncode\n```\n````" in result.message


def test_secrets_and_paths_outside_the_root_are_refused(repo, tmp_path):
    (tmp_path / "outside.txt").write_text("private", encoding="utf-8")
    os.symlink(tmp_path / "outside.txt", repo / "link.txt")
    result = expand("@file:.env @file:../outside.txt @file:link.txt @file:~/.ssh/id_rsa", repo)
    assert "hunter2" not in result.message and "private" not in result.message
    assert [r.status for r in result.references] == ["refused"] * 4
    warnings = result.message.split(WARNINGS_HEADER, 1)[1]
    assert "@file:.env: .env is refused: .env is a secrets file" in warnings
    assert "outside the workspace" in warnings


def test_binary_and_missing_files(repo):
    result = expand("@file:logo.png @file:missing.py @file:app.py:50-60", repo)
    assert "[binary file: logo.png, 300 bytes" in result.message
    assert [r.status for r in result.references] == ["pointer", "failed", "failed"]
    assert "missing.py is not a file" in result.message
    assert "lines 50-60 are outside app.py (20 lines)" in result.message


def test_the_hard_limit_leaves_attachments_out_and_the_soft_one_warns(repo):
    (repo / "big.txt").write_text("word " * 4_000, encoding="utf-8")
    result = expand("@file:big.txt", repo, context_length=4_000)
    assert result.references[0].status == "over_budget"
    assert "word word" not in result.message
    assert "past half of the 4,000-token window" in result.message
    soft = expand("@file:big.txt", repo, context_length=12_000)
    assert soft.references[0].status == "attached"
    assert "more than a quarter of the 12,000-token window" in soft.message


def test_folders_are_listed(repo):
    result = expand("@folder:.", repo)
    listing = result.message.split(ATTACHED_HEADER, 1)[1]
    assert "app.py (" in listing and "pkg/mod.py (6 bytes)" in listing


def test_allowed_roots_widen_what_may_be_read(repo, tmp_path):
    other = tmp_path / "shared"
    other.mkdir()
    (other / "spec.md").write_text("the spec", encoding="utf-8")
    refused = expand(f"@file:{other / 'spec.md'}", repo)
    assert refused.references[0].status == "refused"
    allowed = expand(f"@file:{other / 'spec.md'}", repo, allowed_roots=[repo, other])
    assert "the spec" in allowed.message


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_references(repo):
    def git(*args):
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@e", "add", "app.py")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "first commit")
    (repo / "app.py").write_text("changed\n", encoding="utf-8")
    result = expand("@diff and @git:99", repo)
    assert "-print(1)" in result.message and "+changed" in result.message
    assert "first commit" in result.message
    assert "(no changes)" in expand("@staged", repo).message
    assert "@git takes a number" in expand("@git:abc", repo).message


def test_git_outside_a_repository_is_a_warning(tmp_path):
    result = expand("@diff", tmp_path)
    assert result.references[0].status == "failed"
    assert WARNINGS_HEADER in result.message


@functools.cache
def _encoded() -> dict[str, tuple[str, bytes]]:
    """Compressed bodies by path; the bombs are 64 MB of text in ~200 KB each."""
    bomb = b"all work and no play " * (64_000_000 // 21)
    return {
        "/gzip-bomb": ("gzip", gzip.compress(bomb, compresslevel=9)),
        "/deflate-bomb": ("deflate", zlib.compress(bomb, 9)),
        "/small-gzip": ("gzip", gzip.compress(b"hello from gzip")),
        "/brotli": ("br", b"\x0b\x02\x80hello\x03"),
    }


class _Site(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _drip(self):
        """One byte every 0.3 s, 20 bytes at most (the server stops by itself)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        try:
            for _ in range(20):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.3)
        except OSError:
            pass

    def do_GET(self):  # noqa: N802
        if self.path == "/page":
            body = (
                b"<html><head><script>evil()</script><title>t</title></head>"
                b"<body><h1>Hello</h1><p>World &amp; more</p></body></html>"
            )
            kind = "text/html; charset=utf-8"
        elif self.path == "/big":
            body, kind = b"x" * 3_000_000, "text/plain"
        elif self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/page")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        elif self.path == "/image":
            body, kind = b"\x89PNG", "image/png"
        elif self.path == "/drip":
            self._drip()
            return
        elif self.path.startswith("/slow-redirect/"):
            hops = int(self.path.rsplit("/", 1)[1])
            time.sleep(0.4)
            self.send_response(302)
            self.send_header("Location", f"/slow-redirect/{hops + 1}" if hops < 5 else "/page")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        elif self.path in _encoded():
            encoding, body = _encoded()[self.path]
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Site)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_urls_to_loopback_are_refused_unless_allowed(site, tmp_path):
    refused = expand(f"@url:{site}/page", tmp_path)
    assert refused.references[0].status == "refused"
    assert "loopback or link-local address (127.0.0.1)" in refused.message
    allowed = expand(f"@url:{site}/redirect", tmp_path, allow_private_urls=True)
    text = allowed.message.split(ATTACHED_HEADER, 1)[1]
    assert "Hello" in text and "World & more" in text and "evil" not in text


def test_url_size_type_and_status_limits(site, tmp_path):
    big = expand(f"@url:{site}/big", tmp_path, allow_private_urls=True, context_length=10_000_000)
    assert "[... cut at 1 MB]" in big.message and len(big.message) < 1_100_000
    image = expand(f"@url:{site}/image", tmp_path, allow_private_urls=True)
    assert "[image/png content at" in image.message
    missing = expand(f"@url:{site}/missing", tmp_path, allow_private_urls=True)
    assert "answered HTTP 404" in missing.message
    scheme = expand("@url:file:///etc/passwd", tmp_path, allow_private_urls=True)
    assert "not an http(s) URL" in scheme.message and "root:" not in scheme.message


@pytest.mark.parametrize("host", ["169.254.169.254", "10.0.0.1", "[::1]", "localhost"])
def test_private_and_metadata_addresses_are_refused(tmp_path, host):
    result = expand(f"@url:http://{host}/latest/meta-data", tmp_path)
    assert result.references[0].status == "refused"


def test_text_without_references_is_returned_as_is(tmp_path):
    result = expand("plain text, no refs; mail me at a@b.c", tmp_path)
    assert result.message == "plain text, no refs; mail me at a@b.c" and not result.expanded


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("@url:http://example.com:99999/", "port"),
        ("@url:http://[::1", "not a valid URL"),
        ("@url:https://", "not an http(s) URL"),
        ("@file:" + "a" * 300, "longer than"),
        ("@folder:" + "b" * 300, "longer than"),
        ("@file:" + "/".join(["c" * 200] * 30), "longer than"),
        ("@git:99999999999999999999999", "not a git repository"),
    ],
)
def test_a_bad_reference_is_a_warning_never_an_exception(tmp_path, text, says):
    result = expand(f"look at {text} please", tmp_path)
    assert result.message.startswith(f"look at {text} please")
    assert says in result.message
    assert len(result.references) == 1


def test_any_failure_of_one_reference_becomes_a_warning(repo, monkeypatch):
    import hermes_context.references as references

    def broken(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(references, "resolve_path", broken)
    result = expand("@file:app.py and @url:http://[::1", repo)
    warnings = result.message.split(WARNINGS_HEADER, 1)[1]
    assert "@file:app.py: could not be attached (PermissionError" in warnings
    assert [r.status for r in result.references] == ["failed", "failed"]


_FRAGMENTS = st.sampled_from(
    [
        "@file:",
        "@folder:",
        "@url:",
        "@git:",
        "@diff",
        "@staged",
        "http://",
        "https://[",
        "]:",
        ":99999",
        '"',
        "'",
        ":1-",
        "..",
        "/",
        "~",
        "\x00",
        "%",
        " ",
        "a" * 300,
        "\udcff",
    ]
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.one_of(_FRAGMENTS, st.text(max_size=20)), max_size=12).map("".join))
def test_expand_references_never_raises(tmp_path, monkeypatch, text):
    def private(host, *args, **kwargs):  # no DNS from a property test
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.1", 0))]

    monkeypatch.setattr(socket, "getaddrinfo", private)
    result = expand(text, tmp_path)
    assert result.message.startswith(text)


@pytest.mark.parametrize("path", ["/gzip-bomb", "/deflate-bomb"])
def test_a_compressed_response_is_inflated_only_up_to_the_cap(site, tmp_path, path):
    # Built and warmed before tracing: the server's copy and the TLS setup of the
    # first client are not the inflation's memory.
    expand(f"@url:{site}/small-gzip", tmp_path, allow_private_urls=True)
    tracemalloc.start()
    try:
        result = expand(
            f"@url:{site}{path}", tmp_path, allow_private_urls=True, context_length=10_000_000
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "[... cut at 1 MB]" in result.message and "all work and no play" in result.message
    assert peak < 8_000_000, f"peak {peak:,} bytes while inflating a 1 MB-capped response"


def test_compressed_responses_are_read_and_unknown_encodings_refused(site, tmp_path):
    small = expand(f"@url:{site}/small-gzip", tmp_path, allow_private_urls=True)
    assert "hello from gzip" in small.message
    brotli = expand(f"@url:{site}/brotli", tmp_path, allow_private_urls=True)
    assert brotli.references[0].status == "failed"
    assert "content-encoding br" in brotli.message


@pytest.mark.parametrize("path", ["/drip", "/slow-redirect/1"])
def test_a_url_fetch_has_one_deadline_for_everything(site, tmp_path, monkeypatch, path):
    import hermes_context.references as references

    monkeypatch.setattr(references, "URL_TIMEOUT_SECONDS", 1.0)
    started = time.monotonic()
    result = expand(f"@url:{site}{path}", tmp_path, allow_private_urls=True)
    assert time.monotonic() - started < 2.0
    assert result.references[0].status == "failed"
    assert "took longer than 1 s" in result.message
