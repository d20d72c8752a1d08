"""What an agent's shell command does, read from its text (compression/commands.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_context.compression import commands
from hermes_context.compression.commands import (
    FileWrite,
    Heredoc,
    parse_command,
    python_script_writes,
    split_heredocs,
)

EDIT_SCRIPT = """cd /testbed && python - << 'EOF'
import re
path = 'django/db/models/query.py'
with open('django/db/models/query.py', 'r') as f:
    s = f.read()
s = s.replace('def old(self):', 'def new(self):')
with open('django/db/models/query.py', 'w') as f:
    f.write(s)
EOF"""

PATCH_BODY = """--- a/src/app.py
+++ b/src/app.py
@@ -1 +1 @@
-x = 1
+x = 2"""


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("git log --oneline -5 && git diff", "read"),
        ("grep -rn 'def compress' src/", "search"),
        ("git commit -m 'fix: count on empty querysets'", "vcs"),
        ("pip install -e .", "install"),
        ("npm test", "test"),
        ("timeout 60 python -m pytest -x tests", "test"),
        ("cd /testbed && ./tests/runtests.py queries --parallel 1", "test"),
        # Runners run the command after them: `uv run pytest` is a test run, not an install.
        ("uv run pytest -q tests/", "test"),
        ("poetry run pytest", "test"),
        ("pipenv run python -m pytest tests/", "test"),
        ("hatch run test", "test"),
        ("pdm run pytest -x", "test"),
        ("uv run --with pytest-cov pytest", "test"),
        ("npx jest src/", "test"),
        ("npx --yes vitest run", "test"),
        ("tox -e py311 -- tests/test_a.py", "test"),
        ("uv run python scripts/migrate.py", "run"),
        ("uv sync", "install"),
        ("poetry add requests", "install"),
        ("python manage.py test auth_tests", "test"),
        ("./manage.py test auth_tests", "test"),
        ("django-admin test --settings=test_sqlite", "test"),
        ("python manage.py migrate", "run"),
        ("npm ci", "install"),
        ("yarn add lodash", "install"),
        ("bun install", "install"),
        ("npm run build", "run"),
        # A quoted `>` is an argument, not a redirection.
        ("grep -n '>' index.html", "search"),
        # Gaps: `sed --in-place` edits, `find -delete` deletes.
        ("sed --in-place 's/a/b/' f.py", "write"),
        ("find . -name '*.pyc' -delete", "write"),
        ("find . -name '*.pyc'", "search"),
    ],
)
def test_kind(text, kind):
    assert parse_command(text).kind == kind


@pytest.mark.parametrize(
    ("text", "writes"),
    [
        (
            "sed -i -e 's/a/b/' -e 's/c/d/' f.py",
            [("f.py", "sed -i", "s/a/b/; s/c/d/")],
        ),
        (
            "sed -i 's/old_name/new_name/g' a.py b.py",
            [
                ("a.py", "sed -i", "s/old_name/new_name/g"),
                ("b.py", "sed -i", "s/old_name/new_name/g"),
            ],
        ),
        ("perl -pi -e 's/foo/bar/' lib/util.pl", [("lib/util.pl", "perl -i", "s/foo/bar/")]),
        ("cp a.py a.py.bak", [("a.py.bak", "copy", "a.py")]),
        (
            "mv -f old.py new.py",
            [("new.py", "move", "old.py"), ("old.py", "delete", "moved to new.py")],
        ),
        ("python x.py > /dev/null 2> err.txt", []),
        ("git diff > patch.txt", [("patch.txt", "redirect", "")]),
        ("""python -c "open('a.txt', 'w').write('x')\"""", [("a.txt", "python script", "")]),
        ("grep -rn '>>>' docs/", []),
        ("grep -n '>' index.html", []),
        ("echo \"a > b\" && echo 'x >> y'", []),
        ('python -c "print(1)" 2>"err log.txt" >"out.txt"', [("out.txt", "redirect", "")]),
        ("python -m pytest tests/ 2>&1 | tee test.log", [("test.log", "tee", "")]),
        (
            "make 2>&1 | tail -5 | tee -a build.log out.txt",
            [
                ("build.log", "tee", ""),
                ("out.txt", "tee", ""),
            ],
        ),
        ("sed -i.bak 's/a/b/' f.py", [("f.py", "sed -i", "s/a/b/")]),
        ("sed -Ei 's/a+/b/' f.py", [("f.py", "sed -i", "s/a+/b/")]),
        ("sed -i '' 's/a/b/' f.py", [("f.py", "sed -i", "s/a/b/")]),
        ("sed --in-place -e 's/a/b/' f.py", [("f.py", "sed -i", "s/a/b/")]),
        ("sed -n '1,5p' f.py", []),
        ("find src -name '*.pyc' -delete", [("src/**/*.pyc", "delete", "find")]),
        ("find build/ -type f -exec rm {} +", [("build/**/*", "delete", "find")]),
        # Only `cat` copies its heredoc to the file; a script's output is not the script.
        ("python - << 'EOF' > out.txt\nprint(1)\nEOF", [("out.txt", "redirect", "")]),
    ],
)
def test_writes(text, writes):
    assert [(w.path, w.how, w.detail) for w in parse_command(text).writes] == writes


def test_heredoc_then_run():
    cmd = parse_command(
        "cd /testbed && cat > reproduce.py << 'EOF'\n"
        "from django.db import models\n"
        "print(models.Count('id'))\n"
        "EOF\n"
        "python reproduce.py"
    )
    assert cmd.cwd == "/testbed"
    assert cmd.kind == "write"
    assert cmd.writes == [
        FileWrite(
            "reproduce.py",
            "heredoc",
            body="from django.db import models\nprint(models.Count('id'))",
        )
    ]
    assert cmd.runs == ["reproduce.py"]
    assert cmd.core == "cat > reproduce.py << 'EOF' && python reproduce.py"
    assert cmd.last_verb == "python"


def test_heredoc_opener_line_goes_on():
    cmd = parse_command("cat > t.py <<EOF && python t.py\nprint('ok')\nEOF")
    assert cmd.writes == [FileWrite("t.py", "heredoc", body="print('ok')")]
    assert cmd.runs == ["t.py"]


def test_two_heredocs_on_one_line():
    cmd = parse_command("cat > a.py << 'A' && cat > b.py << 'B'\nx = 1\nA\ny = 2\nB")
    assert [(w.path, w.body) for w in cmd.writes] == [("a.py", "x = 1"), ("b.py", "y = 2")]


def test_heredocs_on_later_lines_keep_their_order():
    cmd = parse_command(
        "cat > a.py << 'A'\nx = 1\nA\ncat <<< 'hi' && tee b.py c.py << 'B' > /dev/null\ny = 2\nB"
    )
    assert [(w.path, w.how, w.body) for w in cmd.writes] == [
        ("a.py", "heredoc", "x = 1"),
        ("b.py", "tee", "y = 2"),
        ("c.py", "tee", "y = 2"),
    ]


@pytest.mark.parametrize(
    ("text", "kind", "writes"),
    [
        # Teeing text writes it...
        (
            "cat << 'EOF' | tee notes.md\n# Notes\n- one\nEOF",
            "write",
            [("notes.md", "# Notes\n- one")],
        ),
        ('echo "x = 1" | sudo tee -a conf.py', "write", [("conf.py", "x = 1")]),
        # ...teeing a run's output records the file but the command stays a test run.
        ("python -m pytest tests/ 2>&1 | tee test.log", "test", [("test.log", None)]),
        ("cd /app && npm test | tee out.txt; echo done", "test", [("out.txt", None)]),
    ],
)
def test_tee_after_a_pipe(text, kind, writes):
    cmd = parse_command(text)
    assert cmd.kind == kind
    assert [(w.path, w.body) for w in cmd.writes] == writes
    assert all(w.how == "tee" for w in cmd.writes)


def test_python_edit_script():
    cmd = parse_command(EDIT_SCRIPT)
    assert cmd.cwd == "/testbed"
    assert cmd.kinds == {"run", "write"}
    assert cmd.writes == [
        FileWrite(
            "django/db/models/query.py", "python script", detail="def old(self): -> def new(self):"
        )
    ]
    assert cmd.core == "python - << 'EOF'"


@pytest.mark.parametrize(
    ("text", "lines"),
    [
        ("sed -i '12,14s/foo/bar/' src/app.py", (12, 14)),
        ("sed -i '5d' src/app.py", (5,)),
    ],
)
def test_sed_line_range(text, lines):
    (write,) = parse_command(text).writes
    assert write.path == "src/app.py"
    assert write.lines == lines


@pytest.mark.parametrize(
    ("text", "applies", "patches"),
    [
        ("git apply fix.diff", ["fix.diff"], []),
        ("cd /testbed && patch -p1 < fix.diff", ["fix.diff"], []),
        (f"git apply << 'EOF'\n{PATCH_BODY}\nEOF", [], [PATCH_BODY]),
    ],
)
def test_patches(text, applies, patches):
    cmd = parse_command(text)
    assert cmd.kind == "write"
    assert cmd.applies == applies
    assert cmd.patches == patches


@pytest.mark.parametrize(
    ("text", "tests", "core"),
    [
        (
            "python -m pytest tests/test_a.py -q 2>&1 | tail -20",
            ["python -m pytest tests/test_a.py -q"],
            "python -m pytest tests/test_a.py -q",
        ),
        (
            "cd /testbed\npython -m pytest tests/test_x.py \\\n  -k test_count",
            ["python -m pytest tests/test_x.py -k test_count"],
            "python -m pytest tests/test_x.py -k test_count",
        ),
        (
            "node --test test/math.test.js 2>/dev/null",
            ["node --test test/math.test.js"],
            "node --test test/math.test.js",
        ),
    ],
)
def test_tests_and_core(text, tests, core):
    cmd = parse_command(text)
    assert cmd.tests == tests
    assert cmd.core == core


@pytest.mark.parametrize(
    ("text", "last_verb"),
    [
        ("cd /testbed && diff -u a.py b.py", "diff"),
        ("python -m pytest; echo done", "echo"),
    ],
)
def test_last_verb(text, last_verb):
    assert parse_command(text).last_verb == last_verb


def test_reads_and_runs():
    cmd = parse_command("cat -n src/app.py tests/test_app.py && node index.js && ./build.sh")
    assert cmd.reads == ["src/app.py", "tests/test_app.py"]
    assert cmd.runs == ["index.js", "build.sh"]
    assert cmd.kinds == {"read", "run"}


@pytest.mark.parametrize(
    ("text", "shell", "docs"),
    [
        (
            "cat > a.py <<'EOF'\nx = 1\nEOF\nls",
            "cat > a.py <<'EOF'\nls",
            [Heredoc("cat > a.py <<'EOF'", "x = 1")],
        ),
        (
            "cat > a.sh <<-EOF\n\techo hi\n\tEOF\nbash a.sh",
            "cat > a.sh <<-EOF\nbash a.sh",
            [Heredoc("cat > a.sh <<-EOF", "\techo hi")],
        ),
        ('cat <<< "hello"\nls', 'cat <<< "hello"\nls', []),
    ],
)
def test_split_heredocs(text, shell, docs):
    assert split_heredocs(text) == (shell, docs)


_LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r<"))
_BODY_LINE = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r")
).filter(lambda s: s.strip() != "EOF")


@given(
    st.lists(
        st.one_of(
            _LINE.map(lambda s: ("line", s)),
            st.lists(_BODY_LINE, max_size=4).map(lambda b: ("doc", b)),
        ),
        max_size=8,
    )
)
def test_split_heredocs_keeps_every_non_body_line(parts):
    lines, kept, bodies = [], [], []
    for i, (what, value) in enumerate(parts):
        if what == "line":
            lines.append(value)
            kept.append(value)
        else:
            opener = f"cat > f{i}.txt << 'EOF'"
            lines += [opener, *value, "EOF"]
            kept.append(opener)
            bodies.append("\n".join(value))
    shell, docs = split_heredocs("\n".join(lines))
    assert shell == "\n".join(kept)
    assert [d.body for d in docs] == bodies


@given(
    st.from_regex(r"[a-z_][a-z0-9_/]{0,12}\.py", fullmatch=True),
    st.lists(_BODY_LINE, min_size=1, max_size=6).map("\n".join),
)
def test_heredoc_write_keeps_its_body(path, body):
    cmd = parse_command(f"cat > {path} << 'EOF'\n{body}\nEOF")
    assert cmd.writes == [FileWrite(path, "heredoc", body=body)]


@given(st.text(max_size=300))
def test_parse_command_never_raises(text):
    cmd = parse_command(text)
    assert cmd.kind in commands.KIND_ORDER
    assert cmd.text == text


@pytest.mark.parametrize(
    ("code", "writes"),
    [
        ("open('out.json', 'w').write('{}')", [("out.json", "")]),
        (
            "from pathlib import Path\nPath('notes.md').write_text('hi')",
            [("notes.md", "")],
        ),
        (
            "s = open('m.py').read()\n"
            "s = s.replace('return 1', 'return 2')\n"
            "s = s.replace('\\nimport os\\n', '\\nimport os\\nimport re\\n')\n"
            "s = s.replace('x', 'y')\n"
            "open('m.py', 'w').write(s)\n"
            "open('m.py', 'w').write(s)",
            [("m.py", "return 1 -> return 2; import os -> import os")],
        ),
        # A path bound to a name first: the binding before the `open` counts.
        (
            "path = 'a.py'\ns = open(path).read()\npath = 'src/m.py'\n"
            "with open(path, 'w') as f:\n    f.write(s)\nwith open(out, mode='w') as g:\n    pass",
            [("src/m.py", "")],
        ),
        (
            "target = 'late.py'\nopen(target, 'w').write('x')\ntarget = 'other.py'",
            [("late.py", "")],
        ),
        ("open(name, 'w').write('x')", []),
    ],
)
def test_python_script_writes(code, writes):
    assert python_script_writes(code) == writes


@pytest.mark.parametrize(
    ("command", "key"),
    [
        ("python -m pytest -q -x tests/test_a.py", "python -m pytest tests/test_a.py"),
        (
            "pytest -p no:cacheprovider -rA --tb=short tests/a.py::test_b",
            "pytest tests/a.py::test_b",
        ),
        ("python -m pytest -W ignore::DeprecationWarning tests", "python -m pytest tests"),
        (
            "pytest -p no:cacheprovider --tb short -n 4 --color yes tests -k 'count and not slow'",
            "pytest tests -k count and not slow",
        ),
        ("pytest -m slow --durations 10 tests", "pytest -m slow tests"),
        ("uv run pytest -q tests/", "uv run pytest tests/"),
        # Outside pytest the same flags may select tests: their values stay.
        ("cargo test -p mycrate", "cargo test -p mycrate"),
        ("go test -run TestAdd -race ./...", "go test -run TestAdd -race ./..."),
        (
            "python manage.py test -p 'test_*.py' auth_tests",
            "python manage.py test -p test_*.py auth_tests",
        ),
    ],
)
def test_test_key(command, key):
    assert commands.test_key(command) == key
