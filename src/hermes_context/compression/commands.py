"""What an agent's shell command does, read from its text (for the handoff summary).

The deterministic summary must tell a successor which commands changed files
(heredocs, ``sed -i``, ``tee``, redirections, patches, edit scripts, copies),
which ran tests, and which only read or searched: the output of a read is file
content, not something that happened, so its error words are not errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Kinds, most telling first: a compound command is summarised by its strongest part.
KIND_ORDER = ("write", "test", "run", "install", "vcs", "search", "read")

_HEREDOC_RE = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][\w.-]*)\1")
_PYTHON_RE = re.compile(r"^(?:.*/)?(?:python|python3|python3\.\d+|py)$")
_READ_CMDS = frozenset(
    "cat head tail less more nl wc stat file bat od xxd hexdump strings readlink realpath "
    "pwd echo printf env printenv which type whereis id uname date du df".split()
)
_SEARCH_CMDS = frozenset("grep egrep fgrep rg ag ack find ls tree fd locate".split())
_TEST_CMDS = frozenset(
    "pytest py.test tox nox jest vitest mocha rspec phpunit ctest behave nosetests".split()
)
_TEST_SUBCOMMANDS = {
    "go": {"test"},
    "cargo": {"test", "nextest"},
    "make": {"test", "check", "tests"},
    "mvn": {"test", "verify"},
    "gradle": {"test", "check"},
    "./gradlew": {"test", "check"},
    "dotnet": {"test"},
    "bun": {"test"},
    "deno": {"test"},
}
_PKG_CMDS = frozenset({"npm", "yarn", "pnpm"})
_INSTALL_CMDS = frozenset({"pip", "pip3", "apt", "apt-get", "conda", "brew", "poetry", "uv"})
_VCS_READ = frozenset({"diff", "show", "log", "status", "blame", "branch", "grep", "ls-files"})
_WRAPPERS = frozenset({"sudo", "time", "timeout", "nice", "nohup", "env", "command", "exec"})
# Flags that do not change what a test run covers: dropped from its key.
_TEST_NOISE_FLAGS = re.compile(
    r"^(-q+|-v+|-x|-s|-rA|-ra|-rf|--tb=\S+|--no-header|--color=\S+|-p|no:cacheprovider|"
    r"--disable-warnings|-W|--verbose|--quiet|--failfast|-b)$"
)
_FILTERS = frozenset({"head", "tail", "less", "more", "cat", "sort", "uniq", "wc", "tee", "cut"})
_PY_OPEN_W_RE = re.compile(r"open\(\s*(['\"])([^'\"\n]+)\1\s*,\s*(['\"])[wax]b?\+?\3")
_PY_WRITE_TEXT_RE = re.compile(r"Path\(\s*(['\"])([^'\"\n]+)\1\s*\)\.write_(?:text|bytes)\(")
_PY_REPLACE_RE = re.compile(
    r"\.replace\(\s*(?P<q>'''|\"\"\"|['\"])(?P<old>.*?)(?P=q)\s*,\s*"
    r"(?P<q2>'''|\"\"\"|['\"])(?P<new>.*?)(?P=q2)",
    re.S,
)
_SED_ADDRESS_RE = re.compile(r"^(\d+)(?:,(\d+))?\s*[sacdi]")
_QUOTE_PART_RE = re.compile(r"""'[^']*'?|"(?:\\.|[^"\\])*"?|\\.?|[^'"\\]+""")
_ESCAPE_RE = re.compile(r"\\(.)")
_ASSIGNMENT_RE = re.compile(r"^[A-Za-z_]\w*=")
_REDIRECT_RE = re.compile(r"^(\d?|&)(>>?)(.*)$")
_RUNTESTS_RE = re.compile(r"(^|/)(runtests|run_tests)\.\w+$")
_STDERR_RE = re.compile(r"\s*\d?>&\d\s*|\s*2>\s*/dev/null")


@dataclass(frozen=True)
class Heredoc:
    """A here-document: the shell line that opened it and its body."""

    opener: str
    body: str


@dataclass
class FileWrite:
    """A file a command creates, changes or deletes.

    ``how`` is the mechanism ("heredoc", "sed -i", "redirect", "tee", "patch",
    "python script", "copy", "move", "delete", "touch"); ``body`` is the whole
    new content when the command gives it; ``lines`` the line range it names.
    """

    path: str
    how: str
    detail: str = ""
    body: str | None = None
    lines: tuple[int, ...] = ()


@dataclass
class Command:
    """What one shell command (possibly compound) does."""

    text: str
    core: str
    cwd: str | None = None
    kinds: set[str] = field(default_factory=set)
    writes: list[FileWrite] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    applies: list[str] = field(default_factory=list)
    patches: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    last_verb: str = ""  # the program of the last part ("diff" exits 1 on differences)

    @property
    def kind(self) -> str:
        """The strongest kind of its parts (``write`` > ``test`` > ... > ``read``)."""
        return next((k for k in KIND_ORDER if k in self.kinds), "run")


def split_heredocs(command: str) -> tuple[str, list[Heredoc]]:
    """The command without heredoc bodies, and each body with the line that opened it."""
    if "<<" not in command:
        return command, []
    lines = command.split("\n")
    kept: list[str] = []
    docs: list[Heredoc] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        kept.append(line)
        i += 1
        for match in _HEREDOC_RE.finditer(line):
            if match.start() > 0 and line[match.start() - 1] == "<":
                continue  # a here-string (<<<)
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != match.group(2):
                body.append(lines[i])
                i += 1
            i += 1  # the delimiter line
            docs.append(Heredoc(line, "\n".join(body)))
    return "\n".join(kept), docs


_SEGMENT_TOKEN_RE = re.compile(r"""'[^']*'?|"(?:\\.|[^"\\])*"?|&&|\|\||[;|\n]|[^'"&|;\n]+|&""")
_SEPARATORS = frozenset({"&&", "||", ";", "|", "\n"})


def _segments(shell: str) -> list[tuple[str, str]]:
    """Split on unquoted ``&&``, ``||``, ``;``, ``|`` and newlines: ``(operator before, text)``."""
    if not any(sep in shell for sep in "&|;\n"):
        return [("", shell.strip())] if shell.strip() else []
    out: list[tuple[str, str]] = []
    buf: list[str] = []
    op = ""
    for tok in _SEGMENT_TOKEN_RE.findall(shell):
        if tok in _SEPARATORS:
            out.append((op, "".join(buf).strip()))
            op, buf = tok, []
        else:
            buf.append(tok)
    out.append((op, "".join(buf).strip()))
    return [(o, s) for o, s in out if s]


_TOKEN_RE = re.compile(r"""(?:[^\s'"\\]+|'[^']*'?|"(?:\\.|[^"\\])*"?|\\.?)+""")


def _argv(segment: str) -> list[str]:
    """Shell words of a simple command, quotes removed (a fast, forgiving ``shlex.split``)."""
    return [_unquote(tok) for tok in _TOKEN_RE.findall(segment)]


def _unquote(token: str) -> str:
    if "'" not in token and '"' not in token and "\\" not in token:
        return token
    out = []
    for part in _QUOTE_PART_RE.findall(token):
        if part.startswith("'"):
            out.append(part[1:-1] if part.endswith("'") and len(part) > 1 else part[1:])
        elif part.startswith('"'):
            inner = part[1:-1] if part.endswith('"') and len(part) > 1 else part[1:]
            out.append(_ESCAPE_RE.sub(r"\1", inner))
        elif part.startswith("\\"):
            out.append(part[1:])
        else:
            out.append(part)
    return "".join(out)


def _strip_wrappers(argv: list[str]) -> list[str]:
    while argv and (argv[0] in _WRAPPERS or _ASSIGNMENT_RE.match(argv[0])):
        argv = argv[2:] if argv[0] == "timeout" and len(argv) > 1 else argv[1:]
    return argv


def _redirects(argv: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Arguments without redirections, files written by ``>``/``>>``, files read by ``<``.

    Heredoc markers (``<< 'EOF'``) are dropped with their delimiter.
    """
    args: list[str] = []
    outputs: list[str] = []
    inputs: list[str] = []
    skip = False
    for i, tok in enumerate(argv):
        if skip:
            skip = False
            continue
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if tok.startswith("<<"):
            skip = tok in ("<<", "<<-", "<<<")
            continue
        if tok.startswith("<"):
            inputs.append(tok[1:] or nxt)
            skip = tok == "<"
            continue
        m = _REDIRECT_RE.match(tok)
        if not m:
            args.append(tok)
            continue
        target = m.group(3) or nxt
        skip = not m.group(3)
        if m.group(1) in ("", "1", "&") and target and not target.startswith(("&", "/dev/")):
            outputs.append(target)
    return args, outputs, inputs


def _file_args(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-")]


class _Reader:
    """Classifies the simple commands of one compound command into a ``Command``."""

    def __init__(self, text: str) -> None:
        shell, self.docs = split_heredocs(text)
        shell = shell.replace("\\\n", " ")  # line continuations
        self.cmd = Command(text=text, core="")
        self.shell = shell
        self._doc_by_line = {d.opener: d for d in self.docs}
        self._core: list[str] = []

    def read(self) -> Command:
        for op, segment in _segments(self.shell):
            argv = _strip_wrappers(_argv(segment))
            if not argv:
                continue
            args, outputs, inputs = _redirects(argv)
            doc = self._doc_for(segment)
            if args and not (op == "|" and argv[0] in _FILTERS):
                self._classify(segment, args, doc, inputs)
            for target in outputs:
                how = "heredoc" if doc else "redirect"
                self._write(target, how, body=doc.body if doc else None)
        self.cmd.core = " && ".join(self._core) or " ".join(self.shell.split())
        return self.cmd

    def _doc_for(self, segment: str) -> Heredoc | None:
        if "<<" not in segment:
            return None
        for opener, doc in self._doc_by_line.items():
            if segment in opener or opener.strip() in segment:
                return doc
        return None

    def _write(self, path: str, how: str, **kw: object) -> None:
        self.cmd.kinds.add("write")
        self.cmd.writes.append(FileWrite(path, how, **kw))  # type: ignore[arg-type]

    def _classify(
        self, segment: str, args: list[str], doc: Heredoc | None, inputs: list[str]
    ) -> None:
        name = args[0] if args else ""
        if name == "cd":
            self.cmd.cwd = args[1] if len(args) > 1 else self.cmd.cwd
            return
        self.cmd.last_verb = name
        self._core.append(_display(segment))
        if _PYTHON_RE.match(name):
            self._python(segment, args, doc)
        elif name in ("sed", "perl") and any(a.startswith("-i") or a == "-pi" for a in args):
            self._inplace(name, args)
        elif name in ("patch", "git") and (name == "patch" or args[1:2] == ["apply"]):
            self._patch(args, doc, inputs)
        elif name == "git":
            self.cmd.kinds.add("read" if args[1:2] and args[1] in _VCS_READ else "vcs")
        elif name in ("cp", "mv", "rm", "touch", "tee"):
            self._file_op(name, args, doc)
        elif self._is_test(args):
            self.cmd.kinds.add("test")
            self.cmd.tests.append(_display(segment))
        elif name in _INSTALL_CMDS or (name in _PKG_CMDS and args[1:2] in (["install"], ["i"])):
            self.cmd.kinds.add("install")
        elif name in _SEARCH_CMDS:
            self.cmd.kinds.add("search")
        elif name in _READ_CMDS or name in ("sed", "diff", "awk", "jq", "python-config"):
            self.cmd.kinds.add("read")
            if name == "cat":
                self.cmd.reads.extend(_file_args(args[1:]))
        elif name in ("node", "bash", "sh", "zsh", "ruby", "perl", "go", "deno", "bun"):
            self._run_file(args)
        else:
            self.cmd.kinds.add("run")
            if name.startswith("./"):
                self.cmd.runs.append(name[2:])

    def _is_test(self, args: list[str]) -> bool:
        name = args[0]
        sub = args[1] if len(args) > 1 else ""
        if name in _TEST_CMDS or sub in _TEST_SUBCOMMANDS.get(name, ()):
            return True
        if name in _PKG_CMDS:
            return sub in ("test", "t") or (sub == "run" and args[2:3] != [] and "test" in args[2])
        if name == "node":
            return "--test" in args
        if name in ("npx", "pnpx"):
            return sub in _TEST_CMDS
        return bool(_RUNTESTS_RE.search(name))

    def _python(self, segment: str, args: list[str], doc: Heredoc | None) -> None:
        if "-m" in args:
            module = args[args.index("-m") + 1] if args.index("-m") + 1 < len(args) else ""
            rest = args[args.index("-m") + 2 :]
            if module in ("pytest", "unittest", "nose", "nose2", "tox") or (
                module == "django" and "test" in rest
            ):
                self.cmd.kinds.add("test")
                self.cmd.tests.append(_display(segment))
            elif module == "pip":
                self.cmd.kinds.add("install")
            else:
                self.cmd.kinds.add("run")
            return
        code = doc.body if doc else (args[args.index("-c") + 1] if "-c" in args[:-1] else "")
        files = [a for a in _file_args(args[1:]) if a != "-"]
        if files and not code:
            self._run_file(args)
            return
        self.cmd.kinds.add("run")
        for path, detail in python_script_writes(code):
            self._write(path, "python script", detail=detail)

    def _run_file(self, args: list[str]) -> None:
        files = _file_args(args[1:])
        if files and _RUNTESTS_RE.search(files[0]):
            self.cmd.kinds.add("test")
            self.cmd.tests.append(" ".join(args))
            return
        self.cmd.kinds.add("run")
        if files:
            self.cmd.runs.append(files[0])

    def _inplace(self, name: str, args: list[str]) -> None:
        exprs: list[str] = []
        rest: list[str] = []
        it = iter(args[1:])
        for a in it:
            if a in ("-e", "--expression"):
                exprs.append(next(it, ""))
            elif not a.startswith("-"):
                rest.append(a)
        if not exprs and rest:
            exprs, rest = [rest[0]], rest[1:]
        expr = "; ".join(exprs)
        files = rest
        address = _SED_ADDRESS_RE.match(expr)
        lines = tuple(int(g) for g in address.groups() if g) if address else ()
        for path in files:
            self._write(path, f"{name} -i", detail=expr, lines=lines)

    def _patch(self, args: list[str], doc: Heredoc | None, inputs: list[str]) -> None:
        self.cmd.kinds.add("write")
        if doc is not None:
            self.cmd.patches.append(doc.body)
        files = _file_args(args[2:] if args[0] == "git" else args[1:])
        # `git apply X.diff` and `patch -p1 < X.diff` name the diff; `patch FILE X.diff` both.
        self.cmd.applies.extend([*files[-1:], *inputs] if args[0] == "patch" else files)

    def _file_op(self, name: str, args: list[str], doc: Heredoc | None) -> None:
        files = _file_args(args[1:])
        if name == "tee":
            for path in files:
                self._write(path, "tee", body=doc.body if doc else None)
        elif name in ("cp", "mv") and len(files) >= 2:
            how = "copy" if name == "cp" else "move"
            self._write(files[-1], how, detail=files[0])
            if name == "mv":
                self._write(files[0], "delete", detail=f"moved to {files[-1]}")
        elif name == "rm":
            for path in files:
                self._write(path, "delete")
        elif name == "touch":
            for path in files:
                self._write(path, "touch")


def _display(segment: str) -> str:
    """A segment as shown in the summary: no redirections of stderr, one line."""
    text = _STDERR_RE.sub(" ", segment)
    return " ".join(text.split())


def python_script_writes(code: str) -> list[tuple[str, str]]:
    """Files a Python script writes, each with what it replaces (``old -> new``) when visible."""
    if not code:
        return []
    paths = [m.group(2) for m in _PY_OPEN_W_RE.finditer(code)]
    paths += [m.group(2) for m in _PY_WRITE_TEXT_RE.finditer(code)]
    replaced = [
        f"{_first_line(m.group('old'))} -> {_first_line(m.group('new'))}"
        for m in _PY_REPLACE_RE.finditer(code)
    ]
    detail = "; ".join(replaced[:2])
    return [(p, detail) for p in dict.fromkeys(paths)]


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.replace("\\n", "\n").splitlines() if ln.strip()]
    return lines[0][:60] if lines else "''"


def parse_command(text: str) -> Command:
    """Read one shell command (compound, with heredocs) into a ``Command``."""
    return _Reader(text).read()


def test_key(command: str) -> str:
    """What a test command covers: runner and targets, without output-only flags."""
    argv = _argv(command)
    kept = [a for a in argv if not _TEST_NOISE_FLAGS.match(a)]
    return " ".join(kept)
