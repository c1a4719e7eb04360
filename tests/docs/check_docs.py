#!/usr/bin/env python3
"""Checks the documentation: its C++ blocks compile against the headers, its links resolve.

    check_docs.py --source-dir DIR --build-dir BUILD --cxx COMPILER --flags-file FILE [--jobs N]

Reads README.md and docs/*.md under DIR.

C++ blocks (```cpp fences). The first line of a block says how it is checked:

    (a block holding main())    compiled as it is
    // complete                 compiled as it is
    // fragment                 statements: its #include lines go first, the rest into
                                int main() { ... }
    // declarations             namespace-scope code (types, functions): compiled as it is,
                                its #include lines first
    // not compiled: <why>      skipped and counted (the reason is required)

Any other block is an error (mark it). Each block is compiled alone with
`COMPILER -std=c++20 -fsyntax-only @FILE`, where FILE holds the include flags (the build writes
it); errors are reported at the block's own lines in its Markdown file.

Links. Every relative link, [text](path) or [text](path#anchor) (images and reference
definitions too), must name a file or folder that exists inside DIR; an anchor into a Markdown
file must name one of its headings (GitHub's slugs). Links to other sites are not followed.

Prints one summary line; exits 1 when anything failed, 0 otherwise. Standard library only.
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import unicodedata

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)")
CPP_LANGUAGES = {"cpp", "c++", "cxx"}
MAIN = re.compile(r"\bint\s+main\s*\(")
INCLUDE = re.compile(r"^\s*#\s*include\b")
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^()\s]+(?:\([^()\s]*\)[^()\s]*)*)"
                         r"(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
MAX_ERROR_LINES = 12


class Block:
    """One fenced C++ block: where it sits, how it is marked, its lines."""

    def __init__(self, path, fence_line, lines):
        self.path = path              # relative to the source folder
        self.fence_line = fence_line  # 1-based line of the opening fence
        self.lines = lines            # the block's text lines
        self.first_line = fence_line + 1

    @property
    def where(self):
        return f"{self.path}:{self.fence_line}"


def markdown_files(source_dir):
    files = []
    if os.path.isfile(os.path.join(source_dir, "README.md")):
        files.append("README.md")
    docs = os.path.join(source_dir, "docs")
    if os.path.isdir(docs):
        files += sorted("docs/" + name for name in os.listdir(docs) if name.endswith(".md"))
    return files


def split_fences(text):
    """Yields (kind, first_line, lines, info): kind 'text' or 'code'; lines without the fences,
    code lines with the fence's indentation removed."""
    lines = text.split("\n")
    i = 0
    chunk_start, chunk = 1, []
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            chunk.append(lines[i])
            i += 1
            continue
        if chunk:
            yield "text", chunk_start, chunk, ""
        indent, fence, info = len(m.group("indent").expandtabs(4)), m.group("fence"), m.group("info")
        open_line = i + 1
        body = []  # an unclosed fence runs to the end of the file, as CommonMark reads it
        i += 1
        while i < len(lines):
            stripped = lines[i].lstrip(" \t")
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]).strip():
                i += 1
                break
            line = lines[i]
            remove = 0
            while remove < indent and remove < len(line) and line[remove] == " ":
                remove += 1
            body.append(line[remove:])
            i += 1
        yield "code", open_line, body, info.lower()
        chunk_start, chunk = i + 1, []
    if chunk:
        yield "text", chunk_start, chunk, ""


# ---------------------------------------------------------------------------------------------
# C++ blocks


def classify(block):
    """('compile', how) with how in complete/fragment/declarations, ('skip', why) or
    ('error', what)."""
    first = next((line.strip() for line in block.lines if line.strip()), "")
    if first.startswith("// not compiled"):
        why = first[len("// not compiled"):].lstrip(" :").strip()
        if not why:
            return "error", "'// not compiled' needs a reason: '// not compiled: <why>'"
        return "skip", why
    if first == "// fragment":
        return "compile", "fragment"
    if first == "// declarations":
        return "compile", "declarations"
    if first == "// complete":
        return "compile", "complete"
    if any(MAIN.search(line) for line in block.lines):
        return "compile", "complete"
    return "error", ("unmarked C++ block without main(): start it with '// fragment', "
                     "'// declarations', '// complete' or '// not compiled: <why>'")


def source_of(block, how):
    """The translation unit of a block, with #line directives pointing at the Markdown file."""
    path = block.path.replace("\\", "/")
    out = []
    next_line = [None]  # the Markdown line the next emitted line stands for, when consecutive

    def emit(line_number, text):
        if line_number != next_line[0]:
            out.append(f'#line {line_number} "{path}"')
        out.append(text)
        next_line[0] = line_number + 1

    def emit_plain(text):
        out.append(text)
        next_line[0] = None

    numbered = [(block.first_line + n, line) for n, line in enumerate(block.lines)]
    if how == "complete":
        for number, line in numbered:
            emit(number, line)
        return "\n".join(out) + "\n"
    includes = [(number, line) for number, line in numbered if INCLUDE.match(line)]
    for number, line in includes:
        emit(number, line)
    if how == "fragment":
        emit_plain("int main() {")
    for number, line in numbered:
        if not INCLUDE.match(line):
            emit(number, line)
    if how == "fragment":
        emit_plain("return 0;")
        emit_plain("}")
    return "\n".join(out) + "\n"


def compile_block(block, how, args, work_dir, index):
    stem = re.sub(r"[^A-Za-z0-9]+", "_", block.path) + f"_{block.fence_line}_{index}"
    source = os.path.join(work_dir, stem + ".cpp")
    with open(source, "w", encoding="utf-8") as f:
        f.write(source_of(block, how))
    command = [args.cxx, "-std=c++20", "-fsyntax-only", "@" + args.flags_file, "-x", "c++", source]
    try:
        run = subprocess.run(command, cwd=args.source_dir, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return f"the compiler took more than {args.timeout} s"
    except OSError as e:
        return f"could not run the compiler '{args.cxx}': {e}"
    if run.returncode == 0:
        return None
    lines = run.stdout.splitlines()
    errors = [line for line in lines if re.search(r"\berror\b", line)]
    shown = (errors or lines)[:MAX_ERROR_LINES]
    more = len(errors or lines) - len(shown)
    text = "\n".join("    " + line for line in shown)
    if more > 0:
        text += f"\n    ... and {more} more (the translation unit: {source})"
    return f"does not compile ({how}; the translation unit: {source}):\n{text}"


# ---------------------------------------------------------------------------------------------
# Links


def strip_inline_code(line):
    """The line with the contents of code spans blanked (links inside them are not links)."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "`":
            j = i
            while j < len(line) and line[j] == "`":
                j += 1
            ticks = line[i:j]
            end = line.find(ticks, j)
            if end < 0:
                out.append(line[i:j])
                i = j
                continue
            out.append(" " * (end + len(ticks) - i))
            i = end + len(ticks)
            continue
        out.append(line[i])
        i += 1
    return "".join(out)


def slug(heading):
    """GitHub's anchor of a heading: its rendered text, lower case, punctuation dropped, spaces
    as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)                           # inline HTML
    text = re.sub(r"(\*\*|__|\*)", "", text)                      # emphasis marks
    text = text.strip().lower()
    kept = []
    for ch in text:
        category = unicodedata.category(ch)
        if ch in "-_ " or category[0] in "LN" or category == "Mn":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors_of(path, cache):
    if path in cache:
        return cache[path]
    with open(path, encoding="utf-8") as f:
        text = f.read()
    seen, anchors = {}, set()
    for kind, _, lines, _ in split_fences(text):
        if kind != "text":
            continue
        for line in lines:
            m = ATX_HEADING.match(line)
            if not m:
                continue
            base = slug(m.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            anchors.add(base if count == 0 else f"{base}-{count}")
    for m in re.finditer(r'<a\s+(?:name|id)="([^"]+)"', text):
        anchors.add(m.group(1))
    cache[path] = anchors
    return anchors


def links_of(text):
    """(line number, target) of every link outside code."""
    for kind, start, lines, _ in split_fences(text):
        if kind != "text":
            continue
        for n, line in enumerate(lines):
            visible = strip_inline_code(line)
            for m in INLINE_LINK.finditer(visible):
                yield start + n, m.group(1).strip("<>")
            m = REFERENCE_DEFINITION.match(visible)
            if m:
                yield start + n, m.group(1).strip("<>")


def check_link(source_dir, md_path, target, cache):
    """None when `target` (as written in `md_path`) resolves, else what is wrong."""
    if SCHEME.match(target) or target.startswith("//"):
        return None
    path, _, anchor = target.partition("#")
    path = re.sub(r"%20", " ", path)
    md_abs = os.path.join(source_dir, md_path)
    if path:
        if path.startswith("/"):
            return f"'{target}' is an absolute path; write it relative to {md_path}"
        resolved = os.path.normpath(os.path.join(os.path.dirname(md_abs), path))
        root = os.path.normpath(source_dir)
        if os.path.commonpath([resolved, root]) != root:
            return f"'{target}' points outside the repository"
        if not os.path.exists(resolved):
            return f"'{target}': no such file or folder ({os.path.relpath(resolved, root)})"
    else:
        resolved = md_abs
    if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
        anchors = anchors_of(resolved, cache)
        if anchor not in anchors:
            close = sorted(a for a in anchors if a.startswith(anchor[:4]))[:3]
            hint = f" (headings near it: {', '.join('#' + a for a in close)})" if close else ""
            return f"'{target}': {os.path.relpath(resolved, source_dir)} has no heading '#{anchor}'{hint}"
    return None


# ---------------------------------------------------------------------------------------------


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source-dir", required=True, help="the repository root")
    parser.add_argument("--build-dir", required=True, help="where the blocks' sources are written")
    parser.add_argument("--cxx", required=True, help="the C++ compiler")
    parser.add_argument("--flags-file", required=True,
                        help="a response file with the include flags (-I...)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="blocks compiled at once (default: the CPU count)")
    parser.add_argument("--timeout", type=int, default=600, help="seconds one block may take")
    args = parser.parse_args()
    args.source_dir = os.path.abspath(args.source_dir)
    args.flags_file = os.path.abspath(args.flags_file)

    failures = []
    if not os.path.isfile(args.flags_file):
        failures.append(f"{args.flags_file}: no flags file (the build writes it; it holds -I flags)")

    files = markdown_files(args.source_dir)
    if not files:
        failures.append(f"{args.source_dir}: neither README.md nor docs/*.md found")

    blocks, links = [], []
    for md in files:
        with open(os.path.join(args.source_dir, md), encoding="utf-8") as f:
            text = f.read()
        for kind, start, lines, info in split_fences(text):
            if kind == "code" and info in CPP_LANGUAGES:
                blocks.append(Block(md, start, lines))
        links += [(md, line, target) for line, target in links_of(text)]

    to_compile, skipped = [], 0
    for block in blocks:
        verdict, detail = classify(block)
        if verdict == "skip":
            skipped += 1
        elif verdict == "error":
            failures.append(f"{block.where}: {detail}")
        else:
            to_compile.append((block, detail))

    compiled = 0
    if to_compile and os.path.isfile(args.flags_file):
        work_dir = os.path.join(os.path.abspath(args.build_dir), "docs_check")
        os.makedirs(work_dir, exist_ok=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(compile_block, block, how, args, work_dir, i)
                       for i, (block, how) in enumerate(to_compile)]
            for (block, how), future in zip(to_compile, futures):
                error = future.result()
                compiled += 1
                if error:
                    failures.append(f"{block.where}: C++ block {error}")

    cache = {}
    for md, line, target in links:
        error = check_link(args.source_dir, md, target, cache)
        if error:
            failures.append(f"{md}:{line}: broken link {error}")

    for failure in failures:
        print(f"check_docs: {failure}")
    status = "FAILED" if failures else "OK"
    print(f"check_docs: {status}: {len(files)} files, {compiled} C++ blocks compiled, "
          f"{skipped} skipped (not compiled), {len(links)} links checked"
          + (f", {len(failures)} failure(s)" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
