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
        except ValueError:
            return args
        if isinstance(argv, list) and all(isinstance(a, str) for a in argv):
            return shlex.join(argv)
    return args


_VAR = re.compile(r"\$(?:\{(\w+)(?::?([-+])([^}]*))?\}|(\w+))")


def substitute(text: str, scope: dict[str, str]) -> str:
    """Docker's variable substitution: $X, ${X}, ${X:-default}, ${X:+alt}; unknown names stay as written."""

    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(4)
        op, word = m.group(2), m.group(3)
        value = scope.get(name)
        if op == "-":
            return value if value else substitute(word or "", scope)
        if op == "+":
            return substitute(word or "", scope) if value else ""
        return value if value is not None else m.group(0)

    return _VAR.sub(one, text)


def key_values(args: str) -> list[tuple[str, str]]:
    """ENV/ARG pairs: `K=V K2="v 2"` or the legacy `K V` form."""
    try:
        words = shlex.split(args, posix=True)
    except ValueError:
        words = args.split()
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    return [tuple(w.split("=", 1)) if "=" in w else (w, "") for w in words]  # type: ignore[misc]


def commands(script: str) -> list[list[str]]:
    """The simple commands of a RUN script as argv lists; `case` arms for arm64/aarch64 only are dropped
    (an amd64 build does not run them)."""
    script = re.sub(r"(^|\s)#[^\n]*", r"\1", script)  # a trailing shell comment (`RUN rm -rf x  # why`)
    script = "\n".join(seg for seg in re.split(r";;", script)
                       if not re.search(r"[\"']?linux/arm64[\"']?\s*\)|\baarch64\s*\)", seg))
    lexer = shlex.shlex(script, posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""  # `${#VAR}` is not a comment; Docker already dropped the comment lines
    out: list[list[str]] = [[]]
    try:
        for tok in lexer:
            if tok and set(tok) <= set(";&|()<>"):
                out.append([])
            else:
                out[-1].append(tok)
    except ValueError:  # an unbalanced quote: fall back to whitespace
        out = [script.split()]
    return [c for c in out if c]
