#!/usr/bin/env python3
"""What the docs promise, checked against the schema and the files on disk.

Usage: tools/docs_check.py [ROOT]          check the tree at ROOT (default: this checkout)
       tools/docs_check.py --self_test [ROOT]
                                           copy ROOT's docs, protos and configs to a
                                           temporary directory, break them one way at a
                                           time, and check that each break is reported

Exits 1 when anything below fails, printing each problem on a line of its own
that names the file and the item; 0 when everything holds.

  config     Every field of ExperimentConfig and of every message reachable from
             it (proto/config.proto) has a table row in docs/CONFIG.md: under a
             `###` heading that names the message (e.g. "### DataConfig"), a row
             whose first cell is the field's name in backticks. A message used in
             several places needs one section.
  example    The first yaml block of CONFIG.md's "A complete example" holds every
             field as a key at its dotted path (a commented-out key, "# key: value",
             counts), and no key the schema lacks. Each message type is spelled out
             at its shallowest path (ties: field order); where it appears again
             (model.tables[].optimizer is an OptimizerConfig) its key alone is needed.
  results    Every field of RunResult and of every message reachable from it
             (proto/results.proto, proto/ps.proto) has a table row in
             docs/RESULTS.md, by the rule of `config`.
  readme     README.md's doc list (the list items under "## Where to go next")
             names exactly the docs/*.md files on disk, and its config list (the
             list items under "## Shipped configs") exactly the configs/**/*.yaml.
  matrices   The table under docs/COMPARE.md's "## Matrices shipped" has one row
             per configs/compare/*.yaml (first cell: its path in backticks) and
             nothing else, and its "variants" column says how many variants each
             file has (the items of its top-level `variants:` list).
  width      No line of README.md or docs/*.md outside fenced code blocks is over
             300 characters.
  commands   README.md names its two commands (tools/demo.sh, tools/test.sh) within
             its first 25 lines.
  contents   Every docs/*.md has a contents list before its first `##` heading
             (a line "Contents:" followed by list items) that links every `##`
             heading of the file.
  links      Every relative link of README.md and docs/*.md outside code leads to
             a file that exists and, with a #fragment, to a heading of that file
             (GitHub's anchors: lower case, punctuation dropped, spaces as '-').

The .proto files are read by a small parser of their own (messages, nested
messages and enums, fields with repeated/optional/required, oneof, map):
standard library only, so it runs wherever python3 does.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

MAX_LINE = 300
COMMANDS_BY_LINE = 25
README_DOCS_SECTION = "Where to go next"
README_CONFIGS_SECTION = "Shipped configs"
MATRICES_SECTION = "Matrices shipped"
EXAMPLE_SECTION = "A complete example"
SCALAR_TYPES = {"double", "float", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32",
                "fixed64", "sfixed32", "sfixed64", "bool", "string", "bytes"}


# ------------------------------------------------------------------ protos

class Message:
    def __init__(self, full_name, fields):
        self.full_name = full_name  # "pstrain.RunResult", "pstrain.Outer.Inner"
        self.fields = fields        # [(name, type as written, label)]

    @property
    def name(self):
        return self.full_name.split(".")[-1]


def _proto_tokens(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return re.findall(r'"(?:[^"\\]|\\.)*"|[A-Za-z_][\w.]*|\d[\w.+-]*|[{}\[\]()<>=;,.-]', text)


def parse_proto(text, messages, enums):
    """Adds the messages and enums of one .proto file's text, by full name."""
    tokens = _proto_tokens(text)
    package = ""
    i = 0
    while i < len(tokens):
        if tokens[i] == "package":
            package = tokens[i + 1]
            i += 3
        elif tokens[i] in ("message", "enum"):
            i = _parse_block(tokens, i, package, messages, enums)
        else:
            i += 1


def _skip_braces(tokens, i):
    """i at a '{': the index after its matching '}'."""
    depth = 0
    while True:
        depth += {"{": 1, "}": -1}.get(tokens[i], 0)
        i += 1
        if depth == 0:
            return i


def _skip_statement(tokens, i):
    while tokens[i] not in (";", "{"):
        i += 1
    return _skip_braces(tokens, i) if tokens[i] == "{" else i + 1


def _parse_block(tokens, i, scope, messages, enums):
    """i at 'message' or 'enum': parses the block, returns the index after it."""
    kind, name = tokens[i], tokens[i + 1]
    full = f"{scope}.{name}" if scope else name
    if kind == "enum":
        enums.add(full)
        return _skip_braces(tokens, i + 2)
    fields = []
    i += 3  # message Name {
    while tokens[i] != "}":
        i = _parse_member(tokens, i, full, fields, messages, enums)
    messages[full] = Message(full, fields)
    return i + 1


def _parse_member(tokens, i, scope, fields, messages, enums):
    t = tokens[i]
    if t in ("message", "enum"):
        return _parse_block(tokens, i, scope, messages, enums)
    if t == "oneof":  # its fields are the message's
        i += 3
        while tokens[i] != "}":
            i = _parse_member(tokens, i, scope, fields, messages, enums)
        return i + 1
    if t in ("option", "reserved", "extensions", "extend", ";"):
        return _skip_statement(tokens, i) if t != ";" else i + 1
    label = ""
    if t in ("repeated", "optional", "required"):
        label, i = t, i + 1
    if tokens[i] == "map":  # map<K, V> name = n;
        close = tokens.index(">", i)
        value_type = tokens[close - 1]
        fields.append((tokens[close + 1], value_type, "repeated"))
        return _skip_statement(tokens, close)
    fields.append((tokens[i + 1], tokens[i], label))
    return _skip_statement(tokens, i)


def load_protos(root, files):
    messages, enums = {}, set()
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8") as fh:
            parse_proto(fh.read(), messages, enums)
    return messages, enums


def resolve(type_name, scope, messages, enums):
    """The full name of a message `type_name` used inside `scope`; None for scalars and enums."""
    if type_name in SCALAR_TYPES:
        return None
    if type_name.startswith("."):
        type_name = type_name[1:]
        return type_name if type_name in messages else None
    parts = scope.split(".")
    while True:
        candidate = ".".join(parts + [type_name]) if parts else type_name
        if candidate in messages:
            return candidate
        if candidate in enums:
            return None
        if not parts:
            return None
        parts.pop()


def reachable(root_name, messages, enums):
    """[(message, dotted path)] in breadth-first order: each message type once, at its shallowest path."""
    root = next(m for m in messages.values() if m.name == root_name)
    seen, order, queue = {root.full_name}, [(root, "")], [(root, "")]
    while queue:
        message, path = queue.pop(0)
        for name, type_name, _ in message.fields:
            target = resolve(type_name, message.full_name, messages, enums)
            if target and target not in seen:
                seen.add(target)
                child = (messages[target], f"{path}.{name}" if path else name)
                order.append(child)
                queue.append(child)
    return order


# ------------------------------------------------------------------ markdown

def read_lines(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read().split("\n")


def prose_lines(lines):
    """(1-based number, line) of every line outside fenced code blocks."""
    fence = None
    for n, line in enumerate(lines, 1):
        m = re.match(r"\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
            elif line.strip().startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, line


def headings(lines):
    """(1-based number, level, text) of every heading outside code."""
    for n, line in prose_lines(lines):
        m = re.match(r"(#{1,6})\s+(.*?)\s*#*\s*$", line)
        if m:
            yield n, len(m.group(1)), m.group(2)


def slug(text):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text
    text = text.lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(lines):
    counts, out = {}, set()
    for _, _, text in headings(lines):
        base = slug(text)
        n = counts.get(base, 0)
        counts[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def section(lines, title, level=2):
    """(first line number, lines) of the section whose heading of `level` is `title` (or starts with it)."""
    heads = list(headings(lines))
    for k, (n, lv, text) in enumerate(heads):
        if lv == level and (text == title or text.startswith(title)):
            end = next((m for m, lv2, _ in heads[k + 1:] if lv2 <= level), len(lines) + 1)
            return n, lines[n:end - 1]
    return None, []


def table_first_cells(lines):
    """The backticked first cell of each table row: '| `x` | ...' -> 'x'."""
    cells = []
    for line in lines:
        m = re.match(r"\s*\|\s*`([^`]+)`\s*\|", line)
        if m:
            cells.append(m.group(1))
    return cells


def message_sections(lines):
    """{heading text: its lines} for every ### (and ##) heading."""
    heads = list(headings(lines))
    out = {}
    for k, (n, level, text) in enumerate(heads):
        if level not in (2, 3):
            continue
        end = next((m for m, lv, _ in heads[k + 1:] if lv <= level), len(lines) + 1)
        out[text] = lines[n:end - 1]
    return out


# ------------------------------------------------------------------ checks

def check_field_rows(root, doc, root_message, proto_files, what):
    problems = []
    messages, enums = load_protos(root, proto_files)
    sections = message_sections(read_lines(os.path.join(root, doc)))
    for message, path in reachable(root_message, messages, enums):
        where = path or "top level"
        titles = [t for t in sections if re.search(rf"(?<![\w.]){re.escape(message.name)}(?!\w)", t)]
        if not titles:
            problems.append(f"{doc}: {what}: no section (### heading) for {message.name} ({where})")
            continue
        rows = set()
        for t in titles:
            rows.update(table_first_cells(sections[t]))
        for name, _, _ in message.fields:
            if name not in rows:
                dotted = f"{path}.{name}" if path else name
                problems.append(f"{doc}: {what}: field {dotted} ({message.name}.{name}) has no row under "
                                f"'{titles[0]}'")
    return problems


def _strip_comment(value):
    quote = None
    for k, c in enumerate(value):
        if c in "\"'" and quote is None:
            quote = c
        elif c == quote:
            quote = None
        elif c == "#" and quote is None and (k == 0 or value[k - 1] in " \t"):
            return value[:k].strip()
    return value.strip()


def _flow_keys(text, prefix, keys):
    """Adds the dotted keys of a YAML flow map '{a: 1, b: {c: 2}}'."""
    body, depth, part, parts = text.strip()[1:-1], 0, "", []
    for c in body:
        depth += {"{": 1, "[": 1, "}": -1, "]": -1}.get(c, 0)
        if c == "," and depth == 0:
            parts.append(part)
            part = ""
        else:
            part += c
    parts.append(part)
    for p in parts:
        m = re.match(r"\s*([A-Za-z_]\w*)\s*:\s*(.*)$", p, flags=re.S)
        if not m:
            continue
        key = f"{prefix}.{m.group(1)}" if prefix else m.group(1)
        keys.append(key)
        if m.group(2).strip().startswith("{"):
            _flow_keys(m.group(2), key, keys)


def yaml_keys(block):
    """Dotted key paths of a YAML block; list items add no index; '# key:' lines count as keys."""
    keys, stack = [], []  # stack: (indent, path)
    for raw in block:
        line = raw.rstrip()
        m = re.match(r"^(\s*)#( ?)(\s*)(- )?([A-Za-z_]\w*):(\s|$)", line)
        if m:  # a commented-out key
            indent = len(m.group(1)) + len(m.group(3))
            rest = line[m.start(4) if m.group(4) else m.start(5):]
        else:
            m = re.match(r"^(\s*)(- )?([A-Za-z_]\w*):(\s|$)", line)
            if not m:
                continue
            indent = len(m.group(1))
            rest = line[indent:]
        if rest.startswith("- "):
            indent, rest = indent + 2, rest[2:]
        key, _, value = rest.partition(":")
        value = _strip_comment(value)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = f"{stack[-1][1]}.{key}" if stack else key
        keys.append(path)
        if value.startswith("{"):
            _flow_keys(value, path, keys)
        elif not value:
            stack.append((indent, path))
    return keys


def schema_paths(root_message, messages, enums):
    """(every valid dotted path, the paths an example must hold)."""
    valid, required = set(), set()
    spelled = {m.full_name: p for m, p in reachable(root_message, messages, enums)}

    def walk(message, path, expand):
        for name, type_name, _ in message.fields:
            dotted = f"{path}.{name}" if path else name
            valid.add(dotted)
            if expand:
                required.add(dotted)
            target = resolve(type_name, message.full_name, messages, enums)
            if target and dotted.count(".") < 8:
                walk(messages[target], dotted, expand and spelled.get(target) == dotted)

    root = next(m for m in messages.values() if m.name == root_message)
    walk(root, "", True)
    return valid, required


def check_config_example(root):
    doc = "docs/CONFIG.md"
    _, lines = section(read_lines(os.path.join(root, doc)), EXAMPLE_SECTION)
    block, inside = [], False
    for line in lines:
        if not inside and re.match(r"\s*```ya?ml\s*$", line):
            inside = True
        elif inside and line.strip().startswith("```"):
            break
        elif inside:
            block.append(line)
    if not block:
        return [f"{doc}: example: no yaml block under '## {EXAMPLE_SECTION}'"]
    messages, enums = load_protos(root, ["proto/config.proto"])
    valid, required = schema_paths("ExperimentConfig", messages, enums)
    keys = set(yaml_keys(block))
    problems = [f"{doc}: example: field {p} is missing from the complete example" for p in sorted(required - keys)]
    problems += [f"{doc}: example: key {k} is not a field of ExperimentConfig" for k in sorted(keys - valid)]
    return problems


def list_items(lines):
    return [line for line in lines if re.match(r"\s*([-*+]|\d+\.)\s", line)]


def docs_on_disk(root):
    return sorted(f"docs/{f}" for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))


def configs_on_disk(root):
    found = []
    for dirpath, _, files in os.walk(os.path.join(root, "configs")):
        for f in files:
            if f.endswith(".yaml"):
                found.append(os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/"))
    return sorted(found)


def _compare_sets(doc, what, named, on_disk):
    problems = [f"{doc}: {what} lacks {p}" for p in sorted(set(on_disk) - set(named))]
    problems += [f"{doc}: {what} names {p}, which is not on disk" for p in sorted(set(named) - set(on_disk))]
    return problems


def check_readme(root):
    doc, lines = "README.md", read_lines(os.path.join(root, "README.md"))
    problems = []
    for title, pattern, on_disk, what in (
            (README_DOCS_SECTION, r"(?<![\w/.])docs/[\w.-]+\.md", docs_on_disk(root), "doc list"),
            (README_CONFIGS_SECTION, r"(?<![\w/.])configs/[\w./-]+\.yaml", configs_on_disk(root), "config list")):
        start, body = section(lines, title)
        if start is None:
            problems.append(f"{doc}: no '## {title}' section (its {what})")
            continue
        named = {p for line in list_items(body) for p in re.findall(pattern, line)}
        problems += _compare_sets(doc, what, named, on_disk)
    for command in ("tools/demo.sh", "tools/test.sh"):
        first = next((n for n, line in enumerate(lines, 1) if command in line), None)
        if first is None or first > COMMANDS_BY_LINE:
            problems.append(f"{doc}: {command} first appears at line {first}, not within the first "
                            f"{COMMANDS_BY_LINE} lines")
    return problems


def count_variants(path):
    """Items of the top-level `variants:` list of a matrix file."""
    count, inside, item_indent = 0, False, None
    for line in read_lines(path):
        if re.match(r"variants:\s*(#.*)?$", line):
            inside = True
            continue
        if not inside or not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0 and not line.startswith("-"):
            break
        if line.lstrip().startswith("- ") and item_indent in (None, indent):
            item_indent = indent
            count += 1
    return count


def check_matrices(root):
    doc = "docs/COMPARE.md"
    start, body = section(read_lines(os.path.join(root, doc)), MATRICES_SECTION)
    if start is None:
        return [f"{doc}: no '## {MATRICES_SECTION}' section"]
    header = next((line for line in body if line.strip().startswith("|")), "")
    columns = [c.strip() for c in header.strip().strip("|").split("|")]
    if "variants" not in columns:
        return [f"{doc}: the table of '## {MATRICES_SECTION}' has no 'variants' column"]
    col = columns.index("variants")
    on_disk = sorted(p for p in configs_on_disk(root) if re.fullmatch(r"configs/compare/[^/]+\.yaml", p))
    named, problems = [], []
    for line in body:
        m = re.match(r"\s*\|\s*`(configs/[^`]+)`\s*\|", line)
        if not m:
            continue
        path = m.group(1)
        named.append(path)
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if path in on_disk:
            actual = count_variants(os.path.join(root, path))
            if col >= len(cells) or cells[col] != str(actual):
                said = cells[col] if col < len(cells) else "nothing"
                problems.append(f"{doc}: matrices shipped: {path} has {actual} variants, the table says {said}")
    return _compare_sets(doc, "table of matrices shipped", named, on_disk) + problems


def doc_files(root):
    return ["README.md"] + docs_on_disk(root)


def check_widths(root):
    problems = []
    for doc in doc_files(root):
        for n, line in prose_lines(read_lines(os.path.join(root, doc))):
            if len(line) > MAX_LINE:
                problems.append(f"{doc}:{n}: line of {len(line)} characters outside code (at most {MAX_LINE})")
    return problems


def check_contents(root):
    problems = []
    for doc in docs_on_disk(root):
        lines = read_lines(os.path.join(root, doc))
        heads = [(n, text) for n, level, text in headings(lines) if level == 2]
        first = heads[0][0] if heads else len(lines)
        start = next((n for n, line in prose_lines(lines[:first]) if re.match(r"\s*\**Contents\**:?\**\s*$", line)),
                     None)
        if start is None:
            problems.append(f"{doc}: no contents list ('Contents:' and its items) before the first ## heading")
            continue
        linked = set(re.findall(r"\]\(#([^)]+)\)", "\n".join(lines[start:first])))
        for _, text in heads:
            if slug(text) not in linked:
                problems.append(f"{doc}: contents list lacks a link to '## {text}' (#{slug(text)})")
    return problems


def check_links(root):
    problems, cache = [], {}
    for doc in doc_files(root):
        lines = read_lines(os.path.join(root, doc))
        for n, line in prose_lines(lines):
            line = re.sub(r"`[^`]*`", "", line)
            for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, fragment = target.partition("#")
                file = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
                full = os.path.join(root, file)
                if not os.path.exists(full):
                    problems.append(f"{doc}:{n}: link to {target}: {file} does not exist")
                    continue
                if fragment and file.endswith(".md"):
                    if file not in cache:
                        cache[file] = anchors(read_lines(full))
                    if fragment not in cache[file]:
                        problems.append(f"{doc}:{n}: link to {target}: {file} has no heading #{fragment}")
    return problems


def check(root):
    checks = [
        lambda: check_field_rows(root, "docs/CONFIG.md", "ExperimentConfig", ["proto/config.proto"], "config"),
        lambda: check_config_example(root),
        lambda: check_field_rows(root, "docs/RESULTS.md", "RunResult", ["proto/results.proto", "proto/ps.proto"],
                                 "results"),
        lambda: check_readme(root),
        lambda: check_matrices(root),
        lambda: check_widths(root),
        lambda: check_contents(root),
        lambda: check_links(root),
    ]
    problems = []
    for run in checks:
        try:
            problems += run()
        except FileNotFoundError as e:
            problems.append(f"{os.path.relpath(e.filename, root)}: missing ({e.strerror})")
    return problems


# ------------------------------------------------------------------ self test

def _copy_tree(root, to):
    for sub in ("docs", "configs", "proto"):
        shutil.copytree(os.path.join(root, sub), os.path.join(to, sub))
    shutil.copy(os.path.join(root, "README.md"), to)
    for sub in ("tools", "tests", "common", "worker", "ps", "models", "deploy", "cmake", "device", "optim"):
        if os.path.isdir(os.path.join(root, sub)):  # link targets only need to exist
            os.symlink(os.path.join(os.path.abspath(root), sub), os.path.join(to, sub))
    for f in os.listdir(root):
        if os.path.isfile(os.path.join(root, f)) and not os.path.exists(os.path.join(to, f)):
            os.symlink(os.path.join(os.path.abspath(root), f), os.path.join(to, f))


def _edit(path, change):
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    changed = change(text)
    assert changed != text, f"the mutation changed nothing in {path}"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(changed)


def _drop_row(name):
    return lambda text: re.sub(rf"\n\|\s*`{re.escape(name)}`\s*\|[^\n]*", "", text, count=1)


def _write(path, text):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


# (what is broken, [(file, change)], what the report must say)
MUTATIONS = [
    ("a config field's row", [("docs/CONFIG.md", _drop_row("chunk_batches"))], "data.chunk_batches"),
    ("a config field the docs do not know",
     [("proto/config.proto", lambda t: t.replace("message TrainConfig {",
                                                 "message TrainConfig {\n  optional int32 fake_knob = 99;", 1))],
     "train.fake_knob"),
    ("a key of the complete example",
     [("docs/CONFIG.md", lambda t: re.sub(r"\n  shuffle_seed: [^\n]*", "", t, count=1))],
     "field data.shuffle_seed is missing from the complete example"),
    ("a result field's row", [("docs/RESULTS.md", _drop_row("step_arena_bytes"))], "workers.step_arena_bytes"),
    ("a result field the docs do not know",
     [("proto/ps.proto", lambda t: t.replace("message ShardLoad {",
                                             "message ShardLoad {\n  int64 fake_counter = 99;", 1))],
     "ps_load.fake_counter"),
    ("a docs file the README does not list",
     [("docs/FAKE.md", lambda t: "# Fake\n\nContents:\n\n- nothing\n")], "doc list lacks docs/FAKE.md"),
    ("a config the README does not list",
     [("configs/emulated/fake.yaml", lambda t: "name: fake\n")], "config list lacks configs/emulated/fake.yaml"),
    ("a matrix COMPARE.md does not list",
     [("configs/compare/fake.yaml", lambda t: "name: fake\nvariants:\n  - {label: a}\n")],
     "table of matrices shipped lacks configs/compare/fake.yaml"),
    ("a matrix that grew a variant",
     [("configs/compare/precision.yaml", lambda t: t + '  - {label: "fake"}\n')],
     "configs/compare/precision.yaml has 5 variants"),
    ("a line of 301 characters",
     [("docs/DATA.md", lambda t: t.replace("\n\n", "\n\n" + "x" * 301 + "\n\n", 1))], "line of 301 characters"),
    ("the two commands pushed down",
     [("README.md", lambda t: t.replace("\n", "\n" + "filler\n" * 30, 1))], "tools/demo.sh first appears at line"),
    ("a contents list missing a section",
     [("docs/ELASTIC.md", lambda t: t.replace("\n## ", "\n## A section nobody listed\n\nText.\n\n## ", 1))],
     "lacks a link to '## A section nobody listed'"),
    ("a link to a heading that is not there",
     [("docs/ELASTIC.md", lambda t: t + "\nSee [nowhere](CONFIG.md#no-such-heading).\n")],
     "has no heading #no-such-heading"),
]


def self_test(root):
    """Each mutation must add a report naming what it broke; problems the tree already has are left to the check."""
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        clean = os.path.join(tmp, "clean")
        _copy_tree(root, clean)
        before = set(check(clean))
        if before:
            print(f"self test: the unchanged tree has {len(before)} problems of its own (the plain check lists them); "
                  "each mutation must add its own")
        for k, (what, changes, expected) in enumerate(MUTATIONS):
            copy = os.path.join(tmp, f"m{k}")
            _copy_tree(root, copy)
            for path, change in changes:
                full = os.path.join(copy, path)
                if os.path.exists(full):
                    _edit(full, change)
                else:
                    _write(full, change(""))
            run = subprocess.run([sys.executable, os.path.abspath(__file__), copy], capture_output=True, text=True)
            added = [line for line in run.stdout.splitlines() if line.replace(copy, clean) not in before]
            if run.returncode == 1 and any(expected in line for line in added):
                print(f"self test: ok: {what}: reported ({expected})")
            else:
                failures += 1
                print(f"self test: FAILED: {what}: exit {run.returncode}, expected a new line with '{expected}'; got:")
                print(run.stdout + run.stderr)
    print(f"self test: {len(MUTATIONS) - failures} of {len(MUTATIONS)} mutations reported")
    return 1 if failures else 0


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    if any(a not in ("--self_test",) for a in argv if a.startswith("--")) or len(args) > 1:
        print(__doc__)
        return 2
    root = args[0] if args else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if "--self_test" in argv:
        return self_test(root)
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"docs_check: {len(problems)} problems (tools/docs_check.py says what each check wants)")
        return 1
    print("docs_check: README.md and docs/*.md agree with the schema and the files on disk")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
