"""What tool results say: output and exit code, test outcomes, errors, diffs and definitions
(compression/observations.py)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_context.compression import observations
from hermes_context.compression.observations import (
    ERROR_LINE_CHARS,
    DiffFile,
    Output,
    compare_definitions,
    definitions,
    enclosing_definition,
    final_error,
    has_traceback,
    parse_diff,
    parse_test_outcome,
    strip_line_numbers,
    unwrap_result,
)

# -- outputs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("<returncode>1</returncode>\n<output>\nboom\n</output>", Output("boom", 1)),
        (
            "<returncode>2</returncode>\n<output>\nhas </output> inside\n</output>",
            Output("has </output> inside", 2),
        ),
        ('{"output": "hi\\n", "exit_code": 2}', Output("hi\n", 2)),
        ('{"stdout": "a", "stderr": "b", "returncode": 0}', Output("a\nb", 0)),
        ('{"output": "", "exit_code": true}', Output('{"output": "", "exit_code": true}', None)),
        (
            "npm ERR! code ELIFECYCLE\nProcess exited with code 3",
            Output("npm ERR! code ELIFECYCLE\nProcess exited with code 3", 3),
        ),
    ],
)
def test_unwrap_result(content, expected):
    assert unwrap_result(content) == expected


_OUTPUT_TEXT = st.text().filter(lambda s: "</output>" not in s)


@given(_OUTPUT_TEXT, st.integers(-255, 255))
def test_unwrap_mini_swe_round_trip(text, code):
    content = f"<returncode>{code}</returncode>\n<output>\n{text}\n</output>"
    assert unwrap_result(content) == Output(text.strip("\n"), code)


@given(st.text(), st.integers(-255, 255))
def test_unwrap_json_round_trip(text, code):
    assert unwrap_result(json.dumps({"output": text, "exit_code": code})) == Output(text, code)


@given(st.text())
def test_unwrap_result_never_raises(content):
    out = unwrap_result(content)
    assert isinstance(out.text, str)


# -- test outcomes ---------------------------------------------------------------

PYTEST_FAILED = """\
============================= test session starts ==============================
platform linux -- Python 3.11.7, pytest-8.2.0, pluggy-1.5.0
rootdir: /testbed
collected 17 items

tests/test_a.py ...F.............                                        [100%]

=================================== FAILURES ===================================
____________________________________ test_b ____________________________________

    def test_b():
>       assert add(1, 2) == 4
E       assert 3 == 4
E        +  where 3 = add(1, 2)

tests/test_a.py:12: AssertionError
=========================== short test summary info ============================
FAILED tests/test_a.py::test_b - assert 3 == 4
========================= 1 failed, 16 passed in 0.12s ========================="""

PYTEST_COLLECTION_ERROR = """\
==================================== ERRORS ====================================
_______________________ ERROR collecting tests/test_x.py _______________________
ImportError while importing test module '/testbed/tests/test_x.py'.
E   ModuleNotFoundError: No module named 'yaml'
=========================== short test summary info ============================
ERROR tests/test_x.py
!!!!!!!!!!!!!!!!!!!! Interrupted: 1 error during collection !!!!!!!!!!!!!!!!!!!!
=============================== 1 error in 0.20s ==============================="""

# Python <= 3.10 ids: "test_add (tests.test_math.MathTests)".
UNITTEST_FAILED = """\
.F.E
======================================================================
ERROR: test_load (tests.test_io.IOTests)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/testbed/tests/test_io.py", line 20, in test_load
    load("missing.json")
FileNotFoundError: [Errno 2] No such file or directory: 'missing.json'

======================================================================
FAIL: test_add (tests.test_math.MathTests)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/testbed/tests/test_math.py", line 8, in test_add
    self.assertEqual(add(1, 2), 4)
AssertionError: 3 != 4

----------------------------------------------------------------------
Ran 4 tests in 0.002s

FAILED (failures=1, errors=1)
"""

# Python 3.11+ prints the method twice: "test_add (tests.test_math.MathTests.test_add)".
UNITTEST_311_FAILED = """\
F.
======================================================================
FAIL: test_add (tests.test_math.MathTests.test_add)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/testbed/tests/test_math.py", line 4, in test_add
    self.assertEqual(1 + 2, 4)
AssertionError: 3 != 4

----------------------------------------------------------------------
Ran 2 tests in 0.001s

FAILED (failures=1)
"""

JEST_FAILED = """\
FAIL src/sum.test.js
  ● sum › adds numbers

    expect(received).toBe(expected) // Object.is equality

Test Suites: 1 failed, 2 passed, 3 total
Tests:       1 failed, 11 passed, 12 total
Snapshots:   0 total
Time:        1.234 s
Ran all test suites.
"""

NODE_TAP = """\
TAP version 13
# Subtest: adds
ok 1 - adds
  ---
  duration_ms: 1.941942
  ...
# Subtest: subtracts
not ok 2 - subtracts
  ---
  duration_ms: 1.382982
  location: '/app/test/math.test.js:4:1'
  failureType: 'testCodeFailure'
  ...
1..2
# tests 2
# suites 0
# pass 1
# fail 1
# cancelled 0
# skipped 0
# todo 0
# duration_ms 168.249358
"""

NODE_SPEC = """\
✔ adds (1.191538ms)
✖ subtracts (1.267681ms)
  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:

  1 !== 2

ℹ tests 2
ℹ suites 0
ℹ pass 1
ℹ fail 1
ℹ cancelled 0
ℹ skipped 0
ℹ todo 0
ℹ duration_ms 126.838358

✖ failing tests:

test at test/math.test.js:4:1
✖ subtracts (1.267681ms)
  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:
"""

MOCHA_FAILED = """\
  Array
    #indexOf()
      ✓ should return -1 when not present
      1) should return the index


  1 passing (8ms)
  1 failing

  1) Array
       #indexOf()
         should return the index:
     AssertionError [ERR_ASSERTION]: expected 0 to equal 1
"""

CARGO_FAILED = """\
running 2 tests
test tests::it_adds ... ok
test tests::it_subs ... FAILED

failures:

---- tests::it_subs stdout ----
thread 'tests::it_subs' panicked at src/lib.rs:8:20:
assertion `left == right` failed
  left: 1
 right: 2
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::it_subs

test result: FAILED. 1 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

error: test failed, to rerun pass `--lib`
"""

GO_FAILED = """\
--- FAIL: TestAdd (0.00s)
    math_test.go:10: Add(1, 2) = 4; want 3
FAIL
FAIL\texample.com/calc/math\t0.002s
ok  \texample.com/calc/strings\t0.003s
FAIL
"""

# `go test -v` in one package: the test binary's "exit status 1" follows the bare FAIL.
GO_VERBOSE_FAILED = """\
=== RUN   TestAdd
--- PASS: TestAdd (0.00s)
=== RUN   TestSub
--- FAIL: TestSub (0.00s)
    sub_test.go:9: got 1 want 2
FAIL
exit status 1
FAIL\texample.com/calc\t0.003s
"""

VITEST_FAILED = """\
 ✓ src/a.test.ts (3)
 ❯ src/b.test.ts (2)
   × b > fails

 Test Files  1 failed | 1 passed (2)
      Tests  1 failed | 4 passed (5)
   Start at  10:00:00
   Duration  1.20s
"""


@pytest.mark.parametrize(
    ("text", "counts", "failing", "rendered"),
    [
        (
            PYTEST_FAILED,
            (("failed", 1), ("passed", 16)),
            ("tests/test_a.py::test_b",),
            "1 failed, 16 passed in 0.12s (failing: tests/test_a.py::test_b)",
        ),
        (
            UNITTEST_FAILED,
            (("failed", 1), ("errors", 1), ("passed", 2)),
            ("tests.test_io.IOTests.test_load", "tests.test_math.MathTests.test_add"),
            "Ran 4 tests in 0.002s, FAILED (failures=1, errors=1) "
            "(failing: tests.test_io.IOTests.test_load, tests.test_math.MathTests.test_add)",
        ),
        (JEST_FAILED, (("failed", 1), ("passed", 11)), (), "1 failed, 11 passed"),
        (
            NODE_TAP,
            (("failed", 1), ("passed", 1)),
            ("subtracts",),
            "1 failed, 1 passed (failing: subtracts)",
        ),
        (MOCHA_FAILED, (("failing", 1), ("passing", 1)), (), "1 failing, 1 passing"),
        (CARGO_FAILED, (("failed", 1), ("passed", 1)), (), "1 failed, 1 passed"),
        (
            GO_FAILED,
            (("failed", 1), ("passed", 1)),
            ("TestAdd",),
            "1 failed, 1 passed (failing: TestAdd)",
        ),
        (
            "ok  \texample.com/calc\t0.002s\nok  \texample.com/calc/strings\t(cached)\n",
            (("passed", 2),),
            (),
            "2 passed",
        ),
        (
            PYTEST_FAILED + "\n",
            (("failed", 1), ("passed", 16)),
            ("tests/test_a.py::test_b",),
            "1 failed, 16 passed in 0.12s (failing: tests/test_a.py::test_b)",
        ),
        (
            UNITTEST_311_FAILED,
            (("failed", 1), ("passed", 1)),
            ("tests.test_math.MathTests.test_add",),
            "Ran 2 tests in 0.001s, FAILED (failures=1) "
            "(failing: tests.test_math.MathTests.test_add)",
        ),
        (
            GO_VERBOSE_FAILED,
            (("failed", 1),),
            ("TestSub",),
            "1 failed (failing: TestSub)",
        ),
        (
            VITEST_FAILED,
            (("failed", 1), ("passed", 4)),
            (),
            "1 failed, 4 passed",
        ),
    ],
)
def test_parse_test_outcome(text, counts, failing, rendered):
    outcome = parse_test_outcome(text)
    assert outcome is not None
    assert (outcome.counts, outcome.failing, outcome.render()) == (counts, failing, rendered)
    assert outcome.ok is not any(
        kind in ("failed", "failing", "error", "errors") for kind, _ in counts
    )


def test_node_spec_failing_tests():
    outcome = parse_test_outcome(NODE_SPEC)
    assert outcome.counts == (("failed", 1), ("passed", 1))
    assert [name.split(" (")[0] for name in outcome.failing] == ["subtracts"]


@pytest.mark.parametrize(
    "text",
    ["hello world\n", "Traceback (most recent call last):\nKeyError: 'k'\n"],
)
def test_no_test_outcome(text):
    assert parse_test_outcome(text) is None


@pytest.mark.parametrize(
    ("outcome", "rendered", "ok"),
    [
        (observations.TestOutcome(()), "no tests ran", True),
        (
            observations.TestOutcome((("failed", 4),), failing=("a", "b", "c", "d")),
            "4 failed (failing: a, b, c)",
            False,
        ),
        (
            observations.TestOutcome((("failing", 1),), summary="Ran 1 test in 0.1s, FAILED"),
            "Ran 1 test in 0.1s, FAILED",
            False,
        ),
    ],
)
def test_render(outcome, rendered, ok):
    assert (outcome.render(), outcome.ok) == (rendered, ok)


# -- errors ----------------------------------------------------------------------

DJANGO_IMPORT_ERROR = """\
Traceback (most recent call last):
  File "/testbed/reproduce.py", line 3, in <module>
    from django.db import models
  File "/testbed/django/db/models/__init__.py", line 3, in <module>
    from django.db.models.aggregates import *  # NOQA
ImportError: cannot import name 'Foo' from 'django.db.models.query' (/testbed/django/db/models/query.py)
"""

DJANGO_NOT_CONFIGURED = """\
Traceback (most recent call last):
  File "/testbed/reproduce.py", line 1, in <module>
    from tests.models import Book
  File "/testbed/django/conf/__init__.py", line 65, in _setup
    raise ImproperlyConfigured(
django.core.exceptions.ImproperlyConfigured: Requested setting INSTALLED_APPS, but settings are not configured.
"""


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            DJANGO_IMPORT_ERROR,
            "ImportError: cannot import name 'Foo' from 'django.db.models.query' "
            "(/testbed/django/db/models/query.py)",
        ),
        (PYTEST_FAILED, "FAILED tests/test_a.py::test_b - assert 3 == 4"),
        (PYTEST_COLLECTION_ERROR, "ERROR tests/test_x.py"),
        ("bash: pytest: command not found\n", "bash: pytest: command not found"),
        (
            "error: patch failed: django/db/models/query.py:120\n"
            "error: django/db/models/query.py: patch does not apply\n",
            "error: django/db/models/query.py: patch does not apply",
        ),
        (CARGO_FAILED, "error: test failed, to rerun pass `--lib`"),
        (NODE_SPEC, "AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:"),
        ("collected 3 items\n\n3 passed in 0.01s\n", None),
        (
            UNITTEST_311_FAILED,
            "AssertionError: 3 != 4",
        ),
        (
            DJANGO_NOT_CONFIGURED,
            "django.core.exceptions.ImproperlyConfigured: Requested setting INSTALLED_APPS, "
            "but settings are not configured.",
        ),
        (
            "patching file src/app.py\nHunk #1 FAILED at 12.\n"
            "1 out of 1 hunk FAILED -- saving rejects to file src/app.py.rej\n",
            "1 out of 1 hunk FAILED -- saving rejects to file src/app.py.rej",
        ),
    ],
)
def test_final_error(text, error):
    assert final_error(text) == error


@pytest.mark.parametrize(
    "line",
    [
        '    raise ValueError(f"bad {x}")',
        "    except KeyError:",
        "    logger.error('Error: %s', exc)",
        '    raise FileNotFoundError(f"No such file or directory: {path}")',
        "    except ModuleNotFoundError:  # No module named yaml",
        "print(f'{cmd}: command not found')",
        '    msg = "No such file or directory: {}".format(path)',
    ],
)
def test_final_error_skips_code(line):
    assert final_error(f"{line}\n") is None


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("/usr/bin/python: No module named pytest\n", "/usr/bin/python: No module named pytest"),
        ("cat: x: No such file or directory\n", "cat: x: No such file or directory"),
        # A traceback's last line is the error whatever the exception is called...
        (
            'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\n'
            "    f()\n    ^^^\nmymod.Boom\n",
            "mymod.Boom",
        ),
        # ...and its first line when the message goes on over several.
        (
            'Traceback (most recent call last):\n  File "a.py", line 1, in <module>\n'
            "    f()\nyaml.scanner.ScannerError: mapping values are not allowed\n"
            '  in "<unicode string>", line 1, column 5\n',
            "yaml.scanner.ScannerError: mapping values are not allowed",
        ),
        (
            "can't find file to patch at input line 3\n"
            "Perhaps you used the wrong -p or --strip option?\n",
            "can't find file to patch at input line 3",
        ),
        (UNITTEST_FAILED, "AssertionError: 3 != 4"),
    ],
)
def test_final_error_messages(text, error):
    assert final_error(text) == error


@given(
    st.from_regex(r"[A-Z][a-z]{0,8}(Error|Exception|Warning)", fullmatch=True),
    st.text(st.sampled_from("abcxyz 0123_.{}"), max_size=30),
    st.sampled_from(["", "    ", "\t"]),
)
def test_final_error_never_matches_raise_or_except(name, message, indent):
    code = f'{indent}raise {name}("{message}")\n{indent}except {name}:\n{indent}except {name} as e:'
    assert final_error(code) is None


def test_final_error_clips_long_lines():
    error = final_error("ValueError: " + "a " * 200)
    assert len(error) == ERROR_LINE_CHARS
    assert error.startswith("ValueError: a a")
    assert error.endswith("a...")


@given(st.text())
def test_final_error_never_raises(text):
    error = final_error(text)
    assert error is None or 0 < len(error) <= ERROR_LINE_CHARS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (DJANGO_IMPORT_ERROR, True),
        (PYTEST_FAILED, False),
        ("Traceback (most recent call last):\n" + "x" * 7_000, False),
    ],
)
def test_has_traceback(text, expected):
    assert has_traceback(text) is expected


# -- source ----------------------------------------------------------------------

SOURCE = """\
import os

MAX_RETRIES = 3
TIMEOUT: int = 30


def load(path):
    return open(path).read()


class Store:
    def __init__(self, root):
        self.root = root

    async def fetch(self, key):
        return key
"""

SCRIPT = """\
import sys


def main():
    return 0


if __name__ == "__main__":
    sys.exit(main())
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "     1\timport os\n     2\t\n     3\tdef f():\n     4\t    return 1",
            "import os\n\ndef f():\n    return 1",
        ),
        ("  1 │ a\n  2 │ b", "a\nb"),
        ("plain\ntext\n3\tx", "plain\ntext\n3\tx"),
    ],
)
def test_strip_line_numbers(text, expected):
    assert strip_line_numbers(text) == expected


def test_definitions_python():
    assert definitions(SOURCE) == {
        "MAX_RETRIES": "MAX_RETRIES = 3",
        "TIMEOUT": "TIMEOUT: int = 30",
        "load": "def load(path):\n    return open(path).read()",
        "Store": "class Store:",
        "Store.__init__": "    def __init__(self, root):\n        self.root = root",
        "Store.fetch": "    async def fetch(self, key):\n        return key",
    }


def test_definitions_javascript():
    source = (
        "const express = require('express');\n\n"
        "export async function handler(req, res) {\n  return res.json({});\n}\n\n"
        "const add = (a, b) => a + b;\n"
        "export const sub = async (a, b) => a - b;\n"
        "let mul = function (a, b) { return a * b; };\n"
        "function* gen() {}\n"
    )
    assert list(definitions(source)) == ["handler", "add", "sub", "mul", "gen"]


@pytest.mark.parametrize(
    ("line", "name"),
    [
        (1, None),
        (8, "load"),
        (13, "__init__"),
        (16, "fetch"),
    ],
)
def test_enclosing_definition(line, name):
    assert enclosing_definition(SOURCE, line) == name


def test_enclosing_definition_after_a_function():
    assert enclosing_definition(SCRIPT, 9) is None


LAYOUT = """\
@pytest.mark.parametrize(
    "a",
    [1, 2],
)
def test_x(a):
    assert a


def outer(
    a,
) -> int:
    MAX = 3

    def inner():
        return a

    return inner() + MAX


class K:
    X = 1

    @property
    def p(self):
        return 1
"""


@pytest.mark.parametrize(
    ("line", "name"),
    [(1, "test_x"), (4, "test_x"), (6, "test_x"), (11, "outer"), (15, "inner"), (18, "outer")]
    + [(22, "K"), (24, "p"), (26, "p"), (99, "p")],
)
def test_enclosing_definition_layout(line, name):
    assert enclosing_definition(LAYOUT, line) == name


def test_definitions_own_their_decorators_and_leave_out_nested_ones():
    assert definitions(LAYOUT) == {
        "test_x": '@pytest.mark.parametrize(\n    "a",\n    [1, 2],\n)\ndef test_x(a):\n    assert a',
        "outer": "def outer(\n    a,\n) -> int:\n    MAX = 3\n\n    return inner() + MAX",
        "inner": "    def inner():\n        return a",
        "K": "class K:\n    X = 1",
        "K.p": "    @property\n    def p(self):\n        return 1",
    }


def test_definitions_javascript_bodies_end_at_their_closing_brace():
    source = (
        "export function handler(req, res) {\n  if (x) {\n    return 1;\n  }\n}\n"
        "module.exports = { handler };\n"
    )
    assert definitions(source) == {
        "handler": "export function handler(req, res) {\n  if (x) {\n    return 1;\n  }\n}"
    }
    assert enclosing_definition(source, 6) is None


OLD_MODULE = """\
def a():
    return 1


def b():
    return 2


class C:
    def m(self):
        return 1

    def n(self):
        return 2
"""


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            OLD_MODULE,
            OLD_MODULE.replace("return 2\n\n\nclass", "return 3\n\n\nclass").replace(
                "        return 1\n\n    def n", "        return 10\n\n    def n"
            )
            + "\n    def o(self):\n        return 3\n\n\ndef d():\n    pass\n",
            (["C.o", "d"], [], ["b", "C.m"]),
        ),
        (
            OLD_MODULE,
            OLD_MODULE.replace("    def n", "    @property\n    def n"),
            ([], [], ["C.n"]),
        ),
        (
            SCRIPT,
            SCRIPT.replace("sys.exit(main())", "main()"),
            ([], [], []),
        ),
        (
            "def retry(fn):\n    MAX_TRIES = 3\n    for _ in range(MAX_TRIES):\n        fn()\n",
            "def retry(fn):\n    MAX_TRIES = 3\n    for _ in range(MAX_TRIES):\n        fn()\n"
            "        time.sleep(1)\n",
            ([], [], ["retry"]),
        ),
    ],
)
def test_compare_definitions(old, new, expected):
    assert compare_definitions(old, new) == expected


# -- diffs -----------------------------------------------------------------------

GIT_DIFF = '''\
diff --git a/django/db/models/query.py b/django/db/models/query.py
index 1234567..89abcde 100644
--- a/django/db/models/query.py
+++ b/django/db/models/query.py
@@ -120,7 +120,9 @@ class QuerySet:
     def count(self):
         if self._result_cache is not None:
             return len(self._result_cache)
-        return self.query.get_count(using=self.db)
+        if self.query.is_empty():
+            return 0
+        return self.query.get_count(using=self.db)
\x20
     def get(self, *args, **kwargs):
         """
@@ -300,6 +302,10 @@ def _helper(x):
     return x
\x20
\x20
+def new_helper(y):
+    return y * 2
+
+
 class RawQuerySet:
     pass
diff --git a/tests/test_new.py b/tests/test_new.py
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/tests/test_new.py
@@ -0,0 +1,2 @@
+def test_it():
+    assert True
diff --git a/old.py b/old.py
deleted file mode 100644
index 2222222..0000000
--- a/old.py
+++ /dev/null
@@ -1,2 +0,0 @@
-def gone():
-    pass
'''

DIFF_U = """\
--- src/app.py.orig\t2024-01-01 10:00:00.000000000 +0000
+++ src/app.py\t2024-01-01 10:05:00.000000000 +0000
@@ -1,6 +1,6 @@
 import os
\x20
 def load(path):
-    with open(path) as fh:
+    with open(path, encoding="utf-8") as fh:
         return fh.read()
\x20
@@ -20,4 +20,5 @@
 def save(path, data):
     with open(path, "w") as fh:
         fh.write(data)
+    return len(data)
"""

JS_DIFF = """\
--- a/src/index.js
+++ b/src/index.js
@@ -10,3 +10,3 @@ export function add(a, b) {
-  return a - b;
+  return a + b;
 }
@@ -30,1 +30,2 @@ const MAX_SIZE = 10;
+export const sub = (a, b) => a - b;
"""


@pytest.mark.parametrize(
    ("text", "files"),
    [
        (
            GIT_DIFF,
            [
                DiffFile(
                    "django/db/models/query.py",
                    lines=[(120, 128), (302, 311)],
                    added=["new_helper"],
                    touched=["count"],
                    plus=[
                        "if self.query.is_empty():",
                        "return 0",
                        "return self.query.get_count(using=self.db)",
                    ],
                    changes=6,
                ),
                DiffFile(
                    "tests/test_new.py",
                    lines=[(1, 2)],
                    added=["test_it"],
                    plus=["def test_it():", "assert True"],
                    changes=2,
                ),
            ],
        ),
        (
            DIFF_U,
            [
                DiffFile(
                    "src/app.py",
                    lines=[(1, 6), (20, 24)],
                    touched=["load", "save"],
                    plus=['with open(path, encoding="utf-8") as fh:', "return len(data)"],
                    changes=3,
                )
            ],
        ),
        (
            JS_DIFF,
            [
                DiffFile(
                    "src/index.js",
                    lines=[(10, 12), (30, 31)],
                    added=["sub"],
                    touched=["add"],
                    plus=["return a + b;", "export const sub = (a, b) => a - b;"],
                    changes=3,
                )
            ],
        ),
        ("", []),
        (
            "--- a/db/schema.sql\n+++ b/db/schema.sql\n@@ -1,3 +1,2 @@\n"
            "--- drop the old index first\n CREATE INDEX idx ON t (a);\n SELECT 1;\n",
            [DiffFile("db/schema.sql", lines=[(1, 2)], changes=1)],
        ),
    ],
)
def test_parse_diff(text, files):
    assert parse_diff(text) == files


def test_parse_diff_with_wrong_hunk_counts_still_finds_the_next_file():
    text = (
        "--- a/x.py\n+++ b/x.py\n@@ -1,5 +1,5 @@\n-a = 1\n+a = 2\n"
        "--- a/y.py\n+++ b/y.py\n@@ -1 +1 @@\n-b = 1\n+b = 2\n\\ No newline at end of file\n"
    )
    assert [(f.path, f.changes) for f in parse_diff(text)] == [("x.py", 2), ("y.py", 2)]


def test_parse_diff_reads_plus_lines_inside_a_hunk_as_content():
    text = "--- a/n.md\n+++ b/n.md\n@@ -1,1 +1,2 @@\n title\n+++ bold +++\n"
    (diff_file,) = parse_diff(text)
    assert (diff_file.path, diff_file.plus, diff_file.changes) == ("n.md", ["++ bold +++"], 1)


@given(st.text())
def test_parse_diff_never_raises(text):
    for diff_file in parse_diff(text):
        assert diff_file.changes >= len(diff_file.plus)


@given(
    st.lists(st.from_regex(r"[a-z]{1,8}(/[a-z]{1,8}){0,2}\.py", fullmatch=True), max_size=5),
    st.lists(st.text(st.sampled_from("abc xyz=()"), min_size=1, max_size=20), max_size=5),
)
def test_parse_diff_lists_every_file(paths, added):
    added = [line for line in added if line.strip()]
    hunk = f"@@ -0,0 +1,{len(added)} @@\n" + "".join(f"+{line}\n" for line in added)
    text = "".join(f"--- a/{p}\n+++ b/{p}\n{hunk}" for p in paths)
    files = parse_diff(text)
    assert [f.path for f in files] == paths
    assert all(f.changes == len(added) for f in files)
