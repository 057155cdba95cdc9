#!/usr/bin/env python3
"""Generate the sync face of alkstore from its async source (docs/adr/0017).

    python3 scripts/async_to_sync.py            rewrite every generated file
    python3 scripts/async_to_sync.py --check    exit 1 when a generated file is
                                                not what its source makes
    python3 scripts/async_to_sync.py FILE...    only these sources

``python3 scripts/dev.py generate [--check]`` runs this in the development
environment (it needs ruff, from the dev group).

A source is a module whose first line is ``# Async source of NAME.py ...``:
it is the one to edit, and ``NAME.py`` beside it is made from it. Making it:

1. Marked blocks. ``if True:  # ASYNC`` keeps its body in the async face; in
   the sync face the statement is replaced by its ``else:`` body (or by
   nothing without one). An ``if True`` has an unreachable ``else`` for
   mypy, so a source with such blocks says ``# mypy: warn-unreachable=False``
   under its first line; the sync face drops that line and is checked in
   full.
2. Tokens. ``async`` before ``def``, ``with`` and ``for`` and every ``await``
   are dropped; names are renamed by :data:`NAMES` (``AsyncKitQueue`` ->
   ``KitQueue``, ``__aenter__`` -> ``__enter__``, the compat module's
   ``AEvent`` -> ``Event``, ...). Strings and comments get the same renames
   as words, and lose ``await`` and ``async with|for|def``, so a docstring
   is written once and reads right in both faces.
3. Tidying. Imports a rename made twice are merged; ``ruff check --fix``
   (import order, unused imports) and ``ruff format`` run over the result,
   and the first line says it is generated and from which file.

Tokens, not the AST, so comments and layout survive: the sync face reads like
code a person wrote. Anything async left in the output (a coroutine, an
``await``, a name beginning ``Async`` that is not in :data:`KEEP`) stops the
run with its line: the map is missing an entry.
"""

from __future__ import annotations

import argparse
import ast
import io
import itertools
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Where sources are looked for.
SEARCH = [ROOT / "packages"]

SOURCE_MARK = re.compile(r"^# Async source of (?P<target>[A-Za-z_][A-Za-z0-9_]*\.py)\b")
GENERATED_MARK = "# Generated from "
HEADER = "# Generated from {source} by scripts/async_to_sync.py: edit that file, not this one.\n"

#: Renames, as whole names (tokens) and as words in strings and comments.
NAMES: dict[str, str] = {
    # Python's async protocol
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "StopAsyncIteration": "StopIteration",
    "asynccontextmanager": "contextmanager",
    "AbstractAsyncContextManager": "AbstractContextManager",
    "AsyncIterator": "Iterator",
    "AsyncIterable": "Iterable",
    "AsyncGenerator": "Generator",
    "aclose": "close",
    # the compat module (alkstore/_acompat.py)
    "AEvent": "Event",
    "ALock": "Lock",
    "ACondition": "Condition",
    "asleep": "sleep",
    "aspawn": "spawn",
    "aoffload": "offload",
    "acond_wait": "cond_wait",
    "aevent_wait": "event_wait",
    "ajoin": "join",
    "acall_handler": "call_handler",
    # psycopg 3's own pairs
    "AsyncConnection": "Connection",
    "AsyncCursor": "Cursor",
    "AsyncConnectionPool": "ConnectionPool",
    "AsyncNullConnectionPool": "NullConnectionPool",
    "AsyncTransaction": "Transaction",
    # the contract's protocols (alkstore/protocols)
    "AsyncStore": "Store",
    "AsyncQueue": "Queue",
    "AsyncJob": "Job",
    "AsyncTx": "Tx",
    "AsyncCursorLike": "CursorLike",
    "AsyncRateLimit": "RateLimit",
    "AsyncOutbox": "Outbox",
    "AsyncStream": "Stream",
    "AsyncLock": "Lock",
    "AsyncListener": "Listener",
    "AsyncHandler": "Handler",
    "AsyncHandlerJob": "HandlerJob",
    # the engine kit
    "AsyncExecutor": "Executor",
    "AsyncKitStore": "KitStore",
    "AsyncKitQueue": "KitQueue",
    "AsyncKitJob": "KitJob",
    "AsyncKitStream": "KitStream",
    "AsyncKitLock": "KitLock",
    "AsyncKitRateLimit": "KitRateLimit",
    "AsyncKitOutbox": "KitOutbox",
    "AsyncQueueListener": "QueueListener",
    "run_blocking_async": "run_blocking",
    "run_leader_async": "run_leader",
    "run_plan_async": "run_plan",
    "claim_async": "claim_sync",
    "wait_async": "wait",
    "unwrap_async": "unwrap",
    "open_async": "open",
    # the worker
    "AsyncWorker": "Worker",
    "AsyncSession": "Session",
    "AsyncSessionBase": "SessionBase",
    # the PostgreSQL engine
    "AsyncPgExecutor": "PgExecutor",
    "AsyncPostgresTx": "PostgresTx",
    "AsyncJoined": "Joined",
    "AsyncPostgresStore": "PostgresStore",
    "AsyncEnqueueCombiner": "EnqueueCombiner",
    "AsyncListenerLoop": "ListenerLoop",
    "AsyncPoller": "Poller",
    "resolve_async": "resolve_sync",
    # added for the worker and the PostgreSQL engine
    "drive_async": "drive",
    "ASpawned": "Spawned",
}

#: Names beginning with ``Async`` that may stay in a sync face: the ones
#: that name the other face on purpose (an error message naming the class
#: to use, A-7), inside strings this never looks at.
KEEP: frozenset[str] = frozenset()

#: The renames in force: :data:`NAMES` and the module names (:func:`generate`).
_names: dict[str, str] = dict(NAMES)
_TEXT_NAMES = re.compile("$^")


def _use_names(names: dict[str, str]) -> None:
    global _TEXT_NAMES
    _names.clear()
    _names.update(names)
    alternatives = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    _TEXT_NAMES = re.compile(r"\b(" + alternatives + r")\b")


_TEXT_AWAIT = re.compile(r"\bawait\s+")
_TEXT_ASYNC = re.compile(r"\basync\s+(?=(?:with|for|def)\b)")
_LEFTOVER = re.compile(r"^Async[A-Z]")


class GenerateError(Exception):
    """The source cannot be turned into a sync face as it stands."""


# ------------------------------------------------------------ marked blocks


def _is_marked(node: ast.If, lines: list[str]) -> bool:
    test = node.test
    if not (isinstance(test, ast.Constant) and test.value is True):
        return False
    return lines[node.lineno - 1].rstrip().endswith("# ASYNC")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _drop_marked_blocks(text: str, source: Path) -> str:
    """Replace each ``if True:  # ASYNC`` by its ``else`` body, innermost
    last: one block per parse, from the bottom up."""
    while True:
        lines = text.splitlines(keepends=True)
        tree = ast.parse(text, filename=str(source))
        marked = [n for n in ast.walk(tree) if isinstance(n, ast.If) and _is_marked(n, lines)]
        if not marked:
            return text
        node = max(marked, key=lambda n: n.lineno)
        start = node.lineno - 1
        end = node.end_lineno or node.lineno  # exclusive index of the lines after it
        base = _indent(lines[start])
        keep: list[str] = []
        if node.orelse:
            first = node.orelse[0]
            if isinstance(first, ast.If) and lines[first.lineno - 1].lstrip().startswith("elif"):
                raise GenerateError(f"{source}:{node.lineno}: a marked block takes no elif")
            else_at = next(
                i
                for i in range(first.lineno - 2, start, -1)
                if lines[i].strip().startswith("else:") and _indent(lines[i]) == base
            )
            body = lines[else_at + 1 : end]
            depth = min(_indent(line) for line in body if line.strip())
            shift = depth - base
            keep = [line[shift:] if line[:shift].strip() == "" else line for line in body]
        text = "".join(lines[:start] + keep + lines[end:])


# ------------------------------------------------------------------ tokens


def _text(value: str) -> str:
    value = _TEXT_ASYNC.sub("", value)
    value = _TEXT_AWAIT.sub("", value)
    return _TEXT_NAMES.sub(lambda m: _names[m.group(1)], value)


def _matching_bracket(tokens: list[tokenize.TokenInfo], start: int) -> tokenize.TokenInfo:
    """The ``]`` that closes the ``[`` at ``tokens[start]``."""
    depth = 0
    for tok in tokens[start:]:
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
            if depth == 0:
                return tok
    raise SyntaxError(f"unclosed bracket at line {tokens[start].start[0]}")


def _rewrite_tokens(text: str) -> str:
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    significant = [
        t
        for t in tokens
        if t.type not in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)
    ]
    after = {id(a): b for a, b in itertools.pairwise(significant)}
    edits: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    strings = {tokenize.STRING, tokenize.COMMENT}
    strings |= {getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    for tok in tokens:
        if tok.type == tokenize.NAME:
            nxt = after.get(id(tok))
            if tok.string == "async" and nxt is not None and nxt.string in ("def", "with", "for"):
                edits.append((tok.start, nxt.start, ""))
            elif tok.string == "await" and nxt is not None:
                end = nxt.start if nxt.start[0] == tok.start[0] else tok.end
                edits.append((tok.start, end, ""))
            elif tok.string == "Awaitable" and nxt is not None and nxt.string == "[":
                # Awaitable[X] -> X: drop the name, its "[" and the matching "]".
                close = _matching_bracket(significant, significant.index(tok) + 1)
                edits.append((tok.start, nxt.end, ""))
                edits.append((close.start, close.end, ""))
            elif tok.string in _names:
                edits.append((tok.start, tok.end, _names[tok.string]))
        elif tok.type in strings:
            new = _text(tok.string)
            if new != tok.string:
                edits.append((tok.start, tok.end, new))
    lines = text.splitlines(keepends=True)
    for (srow, scol), (erow, ecol), new in sorted(edits, reverse=True):
        head = lines[srow - 1][:scol]
        tail = lines[erow - 1][ecol:]
        lines[srow - 1 : erow] = [head + new + tail]
    return "".join(lines)


# ----------------------------------------------------------------- tidying


def _merge_imports(text: str) -> str:
    """A ``from m import a, b`` that names one thing twice after the renames
    (``AsyncIterator, Iterator``) names it once."""
    tree = ast.parse(text)
    lines = text.splitlines(keepends=True)
    for node in sorted(
        (n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)),
        key=lambda n: n.lineno,
        reverse=True,
    ):
        spelled = [a.name if a.asname is None else f"{a.name} as {a.asname}" for a in node.names]
        unique = list(dict.fromkeys(spelled))
        if unique == spelled:
            continue
        indent = " " * node.col_offset
        module = "." * node.level + (node.module or "")
        stmt = f"{indent}from {module} import {', '.join(unique)}\n"
        lines[node.lineno - 1 : node.end_lineno or node.lineno] = [stmt]
    return "".join(lines)


def _ruff(args: list[str], text: str, target: Path) -> str:
    cmd = [sys.executable, "-m", "ruff", *args, "--stdin-filename", str(target), "-"]
    done = subprocess.run(cmd, input=text, capture_output=True, text=True, cwd=ROOT)
    if done.returncode not in (0, 1) or not done.stdout:
        raise GenerateError(f"ruff {args[0]} failed on {target}:\n{done.stderr}")
    return done.stdout


def _check_output(text: str, target: Path) -> None:
    tree = ast.parse(text, filename=str(target))
    for node in ast.walk(tree):
        if isinstance(node, (ast.AsyncFunctionDef, ast.Await, ast.AsyncWith, ast.AsyncFor)):
            raise GenerateError(f"{target}:{node.lineno}: still async after the rewrite")
        if isinstance(node, ast.comprehension) and node.is_async:
            raise GenerateError(f"{target}: an async comprehension is left")
        name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
        if isinstance(name, str) and _LEFTOVER.match(name) and name not in KEEP:
            line = getattr(node, "lineno", "?")
            raise GenerateError(f"{target}:{line}: {name!r} has no sync name in NAMES")


# ------------------------------------------------------------------- files


def target_of(source: Path) -> Path | None:
    """The generated file of *source*, if *source* is an async source."""
    with source.open(encoding="utf-8") as f:
        first = f.readline()
    match = SOURCE_MARK.match(first)
    return None if match is None else source.with_name(match.group("target"))


def sources() -> list[Path]:
    found = []
    for base in SEARCH:
        for path in sorted(base.rglob("*.py")):
            if any(part.startswith(".") or part == "build" for part in path.parts):
                continue
            if target_of(path) is not None:
                found.append(path)
    return found


def generated_files() -> list[Path]:
    """Every file that says it is generated (to find one whose source is gone)."""
    found = []
    for base in SEARCH:
        for path in sorted(base.rglob("*.py")):
            with path.open(encoding="utf-8") as f:
                if f.readline().startswith(GENERATED_MARK):
                    found.append(path)
    return found


def _module_names() -> dict[str, str]:
    """Each source module's name to its generated module's name, so that
    ``from .queue_async import AsyncKitQueue`` becomes ``from .queue import
    KitQueue``."""
    names: dict[str, str] = {}
    for source in sources():
        target = target_of(source)
        assert target is not None
        names[source.stem] = target.stem
    return names


def generate(source: Path) -> tuple[Path, str]:
    """The sync face of *source*: its path and its text."""
    target = target_of(source)
    if target is None:
        raise GenerateError(f"{source}: not an async source (no '# Async source of' line)")
    _use_names({**NAMES, **_module_names()})
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    body = [line for line in lines[1:] if not line.startswith("# mypy:")]
    text = _drop_marked_blocks("".join(body), source)
    text = _rewrite_tokens(text)
    text = _merge_imports(text)
    text = HEADER.format(source=source.name) + text
    text = _ruff(["check", "--fix", "--quiet", "--select", "I,F401", "--exit-zero"], text, target)
    text = _ruff(["format", "--quiet"], text, target)
    _check_output(text, target)
    return target, text


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 on a difference"
    )
    parser.add_argument("files", nargs="*", type=Path, help="sources (default: all)")
    args = parser.parse_args(argv)
    todo = [p.resolve() for p in args.files] or sources()
    stale = 0
    made: set[Path] = set()
    for source in todo:
        try:
            target, text = generate(source)
        except GenerateError as exc:
            print(f"async_to_sync: {exc}", file=sys.stderr)
            return 2
        made.add(target)
        old = target.read_text(encoding="utf-8") if target.exists() else None
        rel = target.relative_to(ROOT)
        if old == text:
            continue
        if args.check:
            print(f"{rel} differs from what {source.name} makes", file=sys.stderr)
            stale += 1
        else:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {rel}")
    if not args.files:
        for path in generated_files():
            if path not in made:
                print(
                    f"{path.relative_to(ROOT)} says it is generated, but no source makes it",
                    file=sys.stderr,
                )
                stale += 1
    if args.check:
        if stale:
            print("run: python3 scripts/dev.py generate", file=sys.stderr)
            return 1
        print(f"{len(made)} generated file(s) match their sources")
    return 1 if stale and not args.check else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
