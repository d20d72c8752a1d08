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
    "django-admin": {"test"},
}
_PKG_CMDS = frozenset({"npm", "yarn", "pnpm", "bun"})
_PKG_INSTALL = frozenset({"install", "i", "ci", "add"})
_INSTALL_CMDS = frozenset(
    {"pip", "pip3", "apt", "apt-get", "conda", "mamba", "brew", "poetry", "uv", "pipenv", "pdm"}
)
_VCS_READ = frozenset({"diff", "show", "log", "status", "blame", "branch", "grep", "ls-files"})
_WRAPPERS = frozenset({"sudo", "time", "timeout", "nice", "nohup", "env", "command", "exec"})
# Runners that run the command after them in the project's environment (`uv run pytest`):
# the command is what they run.
_RUNNERS = {
    **dict.fromkeys(("uv", "poetry", "pipenv", "hatch", "pdm", "rye"), frozenset({"run"})),
    **dict.fromkeys(("npm", "yarn"), frozenset({"exec"})),
    "pnpm": frozenset({"exec", "dlx"}),
}
_EXECUTORS = frozenset({"npx", "pnpx", "bunx"})
# Runner (and sudo) options whose value is the next word (`uv run --with pytest-cov pytest`).
_RUNNER_VALUE_FLAGS = frozenset(
    {"--with", "--python", "-p", "--package", "--env", "-e", "--env-file", "--extra", "--group"}
    | {"-u", "-g"}
)
# A project script a runner runs by name that runs tests (`hatch run test`, `pdm run test:unit`).
_SCRIPT_TEST_RE = re.compile(r"^[\w:-]*test[\w:-]*$")
# Flags that do not change what a test run covers: dropped from its key.
_TEST_NOISE_FLAGS = re.compile(
    r"^(-q+|-v+|-x|-s|-r[fEsxXpPaAN]+|--tb=\S+|--no-header|--color=\S+|--disable-warnings|"
    r"--verbose|--quiet|--failfast|-b|-W\S+|-pno:\S+|--durations=\d+|--maxfail=\d+|-n\d+)$"
)
# pytest's such flags whose value is the next word (`-W ignore::DeprecationWarning`): both
# dropped. `-k EXPR` and `-m MARK` select tests and stay.
_PYTEST_NOISE_VALUE_FLAGS = frozenset(
    {"-W", "-p", "--tb", "--color", "--durations", "--maxfail", "-n", "--numprocesses"}
)
_FILTERS = frozenset({"head", "tail", "less", "more", "cat", "sort", "uniq", "wc", "tee", "cut"})
_PY_OPEN_W_RE = re.compile(
    r"open\(\s*(?:(['\"])(?P<path>[^'\"\n]+)\1|(?P<var>[A-Za-z_]\w*))\s*,\s*(?:mode\s*=\s*)?"
    r"(['\"])[wax]b?\+?\4"
)
_PY_WRITE_TEXT_RE = re.compile(r"Path\(\s*(['\"])([^'\"\n]+)\1\s*\)\.write_(?:text|bytes)\(")
# A name bound to a string literal in a script (`path = 'src/app.py'`), for `open(path, 'w')`.
_PY_STR_ASSIGN_RE = re.compile(
    r"^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*(['\"])([^'\"\n]+)\2[ \t]*$", re.M
)
_PY_REPLACE_RE = re.compile(
    r"\.replace\(\s*(?P<q>'''|\"\"\"|['\"])(?P<old>.*?)(?P=q)\s*,\s*"
    r"(?P<q2>'''|\"\"\"|['\"])(?P<new>.*?)(?P=q2)",
    re.S,
)
# `sed -i`, `sed -Ei`, `sed -i.bak`, `sed --in-place`, `perl -pi`.
_INPLACE_FLAG_RE = re.compile(r"^-(?:[A-Za-z]*i(?:\.\w*)?|-in-place(?:=\S*)?)$")
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
        for match in _heredoc_markers(line):
            body: list[str] = []
            while i < len(lines) and lines[i].strip() != match.group(2):
                body.append(lines[i])
                i += 1
            i += 1  # the delimiter line
            docs.append(Heredoc(line, "\n".join(body)))
    return "\n".join(kept), docs


def _heredoc_markers(text: str) -> list[re.Match[str]]:
    """The ``<< EOF`` markers of a text, in order (here-strings, ``<<<``, are not)."""
    return [
        m for m in _HEREDOC_RE.finditer(text) if not (m.start() > 0 and text[m.start() - 1] == "<")
    ]


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


def _strip_wrappers(argv: list[str]) -> tuple[list[str], bool]:
    """The command under wrappers (``sudo``, ``FOO=1``) and runners (``uv run``, ``npx``).

    The flag is True when a project runner (``hatch run NAME``) may be running a script.
    """
    script = False
    while argv:
        name = argv[0]
        if name == "sudo":
            argv = _skip_options(argv[1:])
        elif name in _WRAPPERS or _ASSIGNMENT_RE.match(name):
            argv = argv[2:] if name == "timeout" and len(argv) > 1 else argv[1:]
        elif len(argv) > 1 and argv[1] in _RUNNERS.get(name, ()):
            argv, script = _skip_options(argv[2:]), True
        elif name in _EXECUTORS:
            argv = _skip_options(argv[1:])
        else:
            break
    return argv, script


def _skip_options(args: list[str]) -> list[str]:
    """A runner's arguments from the command it runs on (its own options skipped)."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        flag = args[i]
        i += 1
        if flag == "--":
            break
        if flag in _RUNNER_VALUE_FLAGS:
            i += 1
    return args[i:]


def _redirects(words: list[str]) -> tuple[list[str], list[str], list[str]]:
    """Arguments without redirections, files written by ``>``/``>>``, files read by ``<``.

    ``words`` still have their quotes, so a quoted ``'>'`` is an argument; everything
    returned is unquoted. Heredoc markers (``<< 'EOF'``) are dropped with their delimiter.
    """
    args: list[str] = []
    outputs: list[str] = []
    inputs: list[str] = []
    skip = False
    for i, tok in enumerate(words):
        if skip:
            skip = False
            continue
        if tok.startswith("<<"):
            skip = tok in ("<<", "<<-", "<<<")
            continue
        m = _REDIRECT_RE.match(tok) if ">" in tok else None
        if m is None and not tok.startswith("<"):
            args.append(_unquote(tok))
            continue
        rest = _unquote(tok[1:] if m is None else m.group(3))
        skip = not rest
        target = rest or (_unquote(words[i + 1]) if i + 1 < len(words) else "")
        if m is None:
            inputs.append(target)
        elif m.group(1) in ("", "1", "&") and target and not target.startswith(("&", "/dev/")):
            outputs.append(target)
    return args, outputs, inputs


def _file_args(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-")]


def _heredoc_copy(args: list[str], doc: Heredoc | None) -> str | None:
    """The heredoc a command prints as it is: ``cat << EOF``, not ``python - << EOF``."""
    if doc and args and args[0] in ("cat", "/bin/cat") and all(a == "-" for a in args[1:]):
        return doc.body
    return None


def _printed(args: list[str], doc: Heredoc | None) -> str | None:
    """What a pipeline part prints when its text says it (``cat << EOF``, ``echo TEXT``)."""
    if args[:1] in (["cat"], ["/bin/cat"]):
        return _heredoc_copy(args, doc)
    if args[:1] == ["echo"] and not any(a.startswith("-") for a in args[1:2]):
        return " ".join(args[1:])
    return None


class _Reader:
    """Classifies the simple commands of one compound command into a ``Command``."""

    def __init__(self, text: str) -> None:
        shell, self.docs = split_heredocs(text)
        shell = shell.replace("\\\n", " ")  # line continuations
        self.cmd = Command(text=text, core="")
        self.shell = shell
        self._next_doc = 0
        self._core: list[str] = []
        self._pipeline: set[str] = set()  # kinds of the current pipeline's parts

    def read(self) -> Command:
        printed: str | None = None  # what the pipeline so far prints, when known
        for op, segment in _segments(self.shell):
            doc = self._doc_for(segment)
            if op != "|":
                self._pipeline = set()
            args, outputs, inputs = _redirects(_TOKEN_RE.findall(segment))
            args, script = _strip_wrappers(args)
            if op == "|" and args[:1] == ["tee"]:
                self._tee(args, printed)
            elif args and not (op == "|" and args[0] in _FILTERS):
                self._classify(segment, args, doc, inputs, script=script)
            body = _heredoc_copy(args, doc)
            for target in outputs:
                self._write(target, "heredoc" if body is not None else "redirect", body=body)
            printed = None if outputs or not args else _printed(args, doc)
        self.cmd.core = " && ".join(self._core) or " ".join(self.shell.split())
        return self.cmd

    def _doc_for(self, segment: str) -> Heredoc | None:
        """The heredoc a segment reads; bodies are handed out in the order of their markers."""
        if "<<" not in segment:
            return None
        doc = None
        for _ in _heredoc_markers(segment):
            if self._next_doc < len(self.docs):
                doc = self.docs[self._next_doc]  # the last one is the command's stdin
                self._next_doc += 1
        return doc

    def _kind(self, kind: str) -> None:
        self.cmd.kinds.add(kind)
        self._pipeline.add(kind)

    def _write(self, path: str, how: str, **kw: object) -> None:
        self._kind("write")
        self.cmd.writes.append(FileWrite(path, how, **kw))  # type: ignore[arg-type]

    def _tee(self, args: list[str], printed: str | None) -> None:
        """``... | tee FILE``: FILE gets what the pipeline prints.

        Teeing text (``cat << EOF | tee f``) is a write; teeing a run's output
        (``pytest | tee test.log``) keeps the command what it was, a test run.
        """
        for path in _file_args(args[1:]):
            if self._pipeline <= {"read", "search"}:
                self._write(path, "tee", body=printed)
            else:
                self.cmd.writes.append(FileWrite(path, "tee", body=printed))

    def _classify(
        self,
        segment: str,
        args: list[str],
        doc: Heredoc | None,
        inputs: list[str],
        *,
        script: bool = False,
    ) -> None:
        name = args[0] if args else ""
        if name == "cd":
            self.cmd.cwd = args[1] if len(args) > 1 else self.cmd.cwd
            return
        self.cmd.last_verb = name
        self._core.append(_display(segment))
        if _PYTHON_RE.match(name):
            self._python(segment, args, doc)
        elif name in ("sed", "perl") and any(_INPLACE_FLAG_RE.match(a) for a in args[1:]):
            self._inplace(name, args)
        elif name in ("patch", "git") and (name == "patch" or args[1:2] == ["apply"]):
            self._patch(args, doc, inputs)
        elif name == "git":
            self._kind("read" if args[1:2] and args[1] in _VCS_READ else "vcs")
        elif name in ("cp", "mv", "rm", "touch", "tee"):
            self._file_op(name, args, doc)
        elif self._is_test(args, script=script):
            self._kind("test")
            self.cmd.tests.append(_display(segment))
        elif name in _INSTALL_CMDS or (name in _PKG_CMDS and _is_pkg_install(args)):
            self._kind("install")
        elif name == "find" and _find_deletes(args):
            self._find_delete(args)
        elif name in _SEARCH_CMDS:
            self._kind("search")
        elif name in _READ_CMDS or name in ("sed", "diff", "awk", "jq", "python-config"):
            self._kind("read")
            if name == "cat":
                self.cmd.reads.extend(_file_args(args[1:]))
        elif name in ("node", "bash", "sh", "zsh", "ruby", "perl", "go", "deno", "bun"):
            self._run_file(args)
        else:
            self._kind("run")
            if name.startswith("./"):
                self.cmd.runs.append(name[2:])

    def _is_test(self, args: list[str], *, script: bool = False) -> bool:
        name = args[0]
        sub = args[1] if len(args) > 1 else ""
        if name in _TEST_CMDS or sub in _TEST_SUBCOMMANDS.get(name, ()):
            return True
        if name in _PKG_CMDS:
            return (
                sub in ("test", "t")
                or sub in _TEST_CMDS
                or (sub == "run" and args[2:3] != [] and "test" in args[2])
            )
        if name == "node":
            return "--test" in args
        if script and _SCRIPT_TEST_RE.match(name):
            return True
        return bool(_RUNTESTS_RE.search(name)) or _is_manage_test(args)

    def _python(self, segment: str, args: list[str], doc: Heredoc | None) -> None:
        if "-m" in args:
            module = args[args.index("-m") + 1] if args.index("-m") + 1 < len(args) else ""
            rest = args[args.index("-m") + 2 :]
            if module in ("pytest", "unittest", "nose", "nose2", "tox") or (
                module == "django" and "test" in rest
            ):
                self._kind("test")
                self.cmd.tests.append(_display(segment))
            elif module == "pip":
                self._kind("install")
            else:
                self._kind("run")
            return
        code = doc.body if doc else (args[args.index("-c") + 1] if "-c" in args[:-1] else "")
        files = [a for a in _file_args(args[1:]) if a != "-"]
        if files and not code:
            self._run_file(args)
            return
        self._kind("run")
        for path, detail in python_script_writes(code):
            self._write(path, "python script", detail=detail)

    def _run_file(self, args: list[str]) -> None:
        files = _file_args(args[1:])
        if files and (_RUNTESTS_RE.search(files[0]) or _is_manage_test(files)):
            self._kind("test")
            self.cmd.tests.append(" ".join(args))
            return
        self._kind("run")
        if files:
            self.cmd.runs.append(files[0])

    def _inplace(self, name: str, args: list[str]) -> None:
        exprs: list[str] = []
        rest: list[str] = []
        it = iter(args[1:])
        for a in it:
            if a in ("-e", "--expression"):
                exprs.append(next(it, ""))
            elif a and not a.startswith("-"):  # not `sed -i '' ...` (BSD sed's empty suffix)
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
        self._kind("write")
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

    def _find_delete(self, args: list[str]) -> None:
        """``find ROOT -name PATTERN -delete``: the matching files, as ``ROOT/**/PATTERN``."""
        roots = []
        for a in args[1:]:
            if a.startswith(("-", "(", "!")):
                break
            roots.append(a.rstrip("/") or "/")
        names = [args[i + 1] for i in range(len(args) - 1) if args[i] in ("-name", "-iname")]
        for root in roots or ["."]:
            self._write(f"{root}/**/{names[0] if names else '*'}", "delete", detail="find")


def _is_pkg_install(args: list[str]) -> bool:
    """``npm install``, ``npm ci``, ``yarn add``, a bare ``yarn``."""
    return (args[0] == "yarn" and len(args) == 1) or (len(args) > 1 and args[1] in _PKG_INSTALL)


def _is_manage_test(args: list[str]) -> bool:
    """Django's test runner: ``manage.py test ...``."""
    return len(args) > 1 and args[1] == "test" and args[0].rsplit("/", 1)[-1] == "manage.py"


def _find_deletes(args: list[str]) -> bool:
    """``find ... -delete`` or ``find ... -exec rm ...``."""
    if "-delete" in args:
        return True
    return any(a == "-exec" and args[i + 1 : i + 2] == ["rm"] for i, a in enumerate(args))


def _display(segment: str) -> str:
    """A segment as shown in the summary: no redirections of stderr, one line."""
    text = _STDERR_RE.sub(" ", segment)
    return " ".join(text.split())


def python_script_writes(code: str) -> list[tuple[str, str]]:
    """Files a Python script writes, each with what it replaces (``old -> new``) when visible.

    ``open(path, 'w')`` counts when ``path`` was bound to a string literal earlier.
    """
    if not code:
        return []
    paths: list[str] = []
    bound: dict[str, str] = {}  # names bound to a string so far, in one pass over the script
    assigns = _PY_STR_ASSIGN_RE.finditer(code)
    pending = next(assigns, None)
    for m in _PY_OPEN_W_RE.finditer(code):
        if m["path"]:
            paths.append(m["path"])
            continue
        while pending is not None and pending.start() < m.start():
            bound[pending.group(1)] = pending.group(3)
            pending = next(assigns, None)
        if m["var"] in bound:
            paths.append(bound[m["var"]])
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
    pytest = any(a in ("pytest", "py.test") or a.endswith("/pytest") for a in argv)
    kept: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif pytest and a in _PYTEST_NOISE_VALUE_FLAGS:
            skip = True
        elif not _TEST_NOISE_FLAGS.match(a):
            kept.append(a)
    return " ".join(kept)
