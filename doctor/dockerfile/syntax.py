"""Dockerfile syntax: logical instructions (continuations, comments, heredocs, the escape directive),
Docker's variable substitution, ENV/ARG pairs, and the simple commands of a RUN script. Read, never run."""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass


@dataclass(frozen=True)
class Instruction:
    line: int  # first line, 1-based
    keyword: str  # upper case
    args: str  # continuation lines joined


def read_instructions(text: str) -> list[Instruction]:
    """Logical instructions: continuation lines joined, comments dropped, heredocs folded into their RUN."""
    escape = "\\"
    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark: BuildKit strips it before reading the file
    lines = text.splitlines()
    for raw in lines[:5]:  # parser directives come first
        m = re.match(r"#\s*escape\s*=\s*(\S)", raw.strip(), re.I)
        if m:
            escape = m.group(1)
    out: list[Instruction] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        start = i + 1
        i += 1
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        parts = [stripped]
        while parts[-1].endswith(escape) and i <= len(lines):
            parts[-1] = parts[-1][:-1]
            while i < len(lines) and (not lines[i].strip() or lines[i].strip().startswith("#")):
                i += 1  # comment and empty lines inside a continuation are skipped by Docker
            if i >= len(lines):
                break
            parts.append(lines[i].strip())
            i += 1
        joined = " ".join(p for p in parts if p)
        keyword, _, args = joined.partition(" ")
        heredoc = re.search(r"<<-?\s*[\"']?(\w+)[\"']?", args) if keyword.upper() in ("RUN", "COPY") else None
        if heredoc:
            body = []
            while i < len(lines) and lines[i].strip() != heredoc.group(1):
                body.append(lines[i])
                i += 1
            i += 1
            args = args[: heredoc.start()] + "\n" + "\n".join(body)
        out.append(Instruction(start, keyword.upper(), args.strip()))
    return out


def exec_form(args: str) -> str:
    """RUN ["pip", "install", "x"] → pip install x (the JSON form is an argv)."""
    if args.startswith("["):
        try:
            argv = json.loads(args)
        except (ValueError, RecursionError):  # not JSON (Docker then runs it as a shell line), or nested too deep
            return args
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            return shlex.join(argv)
    return args


MAX_VALUE = 65_536  # an expanded ENV/ARG value, or a RUN word, longer than this is refused (bounded work)
MAX_DIGITS = 64  # a run of more digits is no version, stage index or build number (int() of it is quadratic)
_DIGITS = re.compile(rf"\d{{{MAX_DIGITS + 1},}}")


class TooLarge(ValueError):
    """A value that grew or was written past the reader's bounds (ENV PATH=$PATH:$PATH repeated, a
    number of thousands of digits): the Dockerfile is refused with one line, never read for minutes."""


def bounded(value: str, what: str) -> str:
    if len(value) > MAX_VALUE:
        raise TooLarge(f"{what} expands to more than {MAX_VALUE} characters; too large to judge")
    m = _DIGITS.search(value)
    if m:
        raise TooLarge(f"{what} holds a number of {len(m.group(0))} digits; not a version gpu-doctor can judge")
    return value


def substitute(text: str, scope: dict[str, str], _depth: int = 0) -> str:
    """Docker's variable substitution, as the shell does it: $X, ${X}, ${X:-word}, ${X-word}, ${X:+word},
    ${X+word}, the word itself holding substitutions (``${A:+${A}:}/lib``, ``${X:-${Y:-z}}``); unknown names
    stay as written. The result is bounded (MAX_VALUE)."""
    out: list[str] = []
    size = 0
    i = 0
    while i < len(text):
        j = text.find("$", i)
        if j < 0:
            out.append(text[i:])
            break
        out.append(text[i:j])
        piece, i_next = _one(text, j, scope, _depth)
        out.append(piece)
        size += (j - i) + len(piece)
        i = i_next
        if size > MAX_VALUE and size > len(text):  # grown by expansion, not merely long as written
            raise TooLarge(f"a value expands to more than {MAX_VALUE} characters; too large to judge")
    return "".join(out)


_NAME = re.compile(r"[A-Za-z_]\w*")


def _one(text: str, j: int, scope: dict[str, str], depth: int = 0) -> tuple[str, int]:
    """The expansion of the `$…` at text[j], and where the text goes on after it."""
    if j + 1 < len(text) and text[j + 1] == "{":
        end = _closing(text, j + 2)
        if end < 0 or depth > 16:
            return text[j:], len(text)
        inner = text[j + 2:end]
        m = _NAME.match(inner)
        if not m:
            return text[j:end + 1], end + 1
        name, rest = m.group(0), inner[m.end():]
        value = scope.get(name)
        op = re.match(r":?[-+=?]", rest)
        if not op:
            if rest:  # ${X#pat}, ${X/a/b}, ${#X} …: not read; kept as written
                return text[j:end + 1], end + 1
            return (value if value is not None else text[j:end + 1]), end + 1
        word = rest[op.end():]
        colon = op.group(0).startswith(":")
        # The value when the variable counts as set (with a colon, an empty value counts as unset).
        set_value = value if value is not None and (value != "" or not colon) else None
        kind = op.group(0)[-1]
        if kind in "-=":
            return (set_value if set_value is not None else substitute(word, scope, depth + 1)), end + 1
        if kind == "+":
            return (substitute(word, scope, depth + 1) if set_value is not None else ""), end + 1
        return (set_value if set_value is not None else ""), end + 1  # ${X:?msg}: the build fails when unset
    m = _NAME.match(text, j + 1)
    if not m:
        return "$", j + 1
    value = scope.get(m.group(0))
    return (value if value is not None else m.group(0).join(["$", ""])), m.end()


def _closing(text: str, start: int) -> int:
    """The index of the `}` closing a `${` whose body starts at start (nested `${…}` counted), or -1."""
    depth = 0
    i = start
    while i < len(text):
        c = text[i]
        if c == "$" and i + 1 < len(text) and text[i + 1] == "{":
            depth += 1
            i += 2
            continue
        if c == "}":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return -1


def key_values(args: str) -> list[tuple[str, str]]:
    """ENV/ARG pairs: `K=V K2="v 2"` or the legacy `K V` form."""
    words = [w for kind, w in lex(args, shell=False) if kind == "w"]
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    return [(k, v) for k, _, v in (w.partition("=") for w in words)]


def lex(script: str, shell: bool = True) -> list[tuple[str, str]]:
    """A shell script as ("w", word) and ("op", operator) tokens: quotes removed as the shell removes them,
    `$(…)` and backquotes kept inside their word, `#` comments and redirections (with their target and file
    descriptor) dropped, a newline read as `;`. ``shell=False`` (ENV/ARG values): quotes and escapes only.
    Linear in the length of the script (shlex is quadratic in the length of one token)."""
    out: list[tuple[str, str]] = []
    buf: list[str] = []
    in_word = False
    i, n = 0, len(script)

    def end_word() -> None:
        nonlocal in_word
        if in_word:
            out.append(("w", "".join(buf)))
        buf.clear()
        in_word = False

    while i < n:
        c = script[i]
        if c in " \t\r":
            end_word()
            i += 1
        elif c == "\n":
            end_word()
            out.append(("op", ";"))
            i += 1
        elif not shell and c not in "'\"\\":
            buf.append(c)
            in_word = True
            i += 1
        elif c == "#" and not in_word:
            j = script.find("\n", i)
            i = n if j < 0 else j
        elif c == "\\":
            if i + 1 < n and script[i + 1] != "\n":
                buf.append(script[i + 1])
                in_word = True
            i += 2
        elif c == "'":
            j = script.find("'", i + 1)
            j = n if j < 0 else j
            buf.append(script[i + 1:j])
            in_word = True
            i = j + 1
        elif c == '"':
            j = i + 1
            while j < n and script[j] != '"':
                if script[j] == "\\" and j + 1 < n and script[j + 1] in '"\\$`\n':
                    j += 1
                buf.append(script[j])
                j += 1
            in_word = True
            i = j + 1
        elif c == "$" and script[i + 1:i + 2] == "(":
            depth, j = 0, i + 1
            while j < n:
                depth += {"(": 1, ")": -1}.get(script[j], 0)
                if depth == 0:
                    break
                j += 1
            buf.append(script[i:j + 1])
            in_word = True
            i = j + 1
        elif c == "`":
            j = script.find("`", i + 1)
            j = n - 1 if j < 0 else j
            buf.append(script[i:j + 1])
            in_word = True
            i = j + 1
        elif c in "<>":
            if in_word and "".join(buf).isdigit():  # 2>/dev/null: the descriptor is no argument
                buf.clear()
                in_word = False
            end_word()
            j = i
            while j < n and script[j] in "<>&|-":
                j += 1
            while j < n and script[j] in " \t":
                j += 1
            while j < n and script[j] not in " \t\n;&|()<>":
                j += 1
            i = j
        elif c in ";&|()":
            end_word()
            two = script[i:i + 2]
            if two in ("&&", "||", ";;"):
                out.append(("op", two))
                i += 2
            else:
                out.append(("op", c))
                i += 1
        else:
            buf.append(c)
            in_word = True
            i += 1
    end_word()
    return out


@dataclass(frozen=True)
class Command:
    argv: list[str]
    conditional: str | None = None  # why the build may or may not run it: "if", "case", "for", "||" …


_OPENERS = {"if": "fi", "case": "esac", "for": "done", "while": "done", "until": "done", "select": "done"}
_CLOSERS = {"fi", "esac", "done"}
_JOINERS = {"then", "else", "elif", "do", "in", "!", "{", "}"}


TESTS = {"[", "[[", "test", "command", "which", "type", "hash", "grep"}  # commands whose status is a condition


def commands(script: str) -> list[Command]:
    """The simple commands of a RUN script, each with whether it runs only on a branch the reader cannot
    decide: inside if/case/for/while, on either side of `||`, or after a test (`[ -f x ] && pip install …`).
    Nothing is evaluated: a condition is never taken to be true or false."""
    cmds: list[Command] = []
    cur: list[str] = []
    stack: list[str] = []
    after_or = False
    after_test = False  # the chain runs on after a test only when it holds: `[ … ] && a && b`

    def flush(op: str | None) -> None:
        nonlocal cur, after_or, after_test
        if cur:
            why = stack[-1] if stack else ("||" if (after_or or op == "||") else "&&" if after_test else None)
            cmds.append(Command(cur, why))
            if op == "&&" and cur[0] in TESTS:
                after_test = True
        elif op == "||" and cmds and not stack:  # `{ a; } || b`: the command before the || is conditional
            cmds[-1] = Command(cmds[-1].argv, "||")
        if op not in ("&&", "|"):
            after_test = False
        cur = []
        after_or = op == "||"

    for kind, tok in lex(script):
        if kind == "op":
            if tok == "||" and cmds and not cur and not stack:
                cmds[-1] = Command(cmds[-1].argv, "||")
            flush(tok)
            continue
        if not cur and tok in _OPENERS:
            stack.append(tok)
            continue
        if not cur and tok in _CLOSERS:
            if stack:
                stack.pop()
            continue
        if not cur and tok in _JOINERS:
            continue
        cur.append(tok)
    flush(None)
    return cmds
