"""YAML loading that remembers where each key is and refuses duplicate keys.

Any file, however hostile or generated, is judged in bounded time and memory: a file above
MAX_FILE_BYTES is refused before it is read, and documents are built from libyaml's events
without recursion, refusing (with the line) one that nests deeper than MAX_DEPTH, holds more
than MAX_NODES nodes once its aliases are expanded, or whose aliases add more than
MAX_ALIAS_NODES of them, before anything expands them.
"""

from __future__ import annotations

import gc
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from gpucluster.errors import InventoryError, Problem, format_path

# Ansible inventories may carry `!vault` tagged scalars; they are opaque to the model.
_VAULT_TAG = "!vault"

# Largest file the loader reads (hosts.yml and every group_vars file of `all`), checked before
# it is read. The largest inventories benchmarked are 1-2 MB (16,384 hosts listed one by one with
# an address each; 20,000 tenants), so real inventories fit many times over, while a file of the
# limit is read and scanned in under a second and ~100 MB (MAX_NODES bounds what it may hold).
MAX_FILE_BYTES = 16 * 1024 * 1024

# Most nodes (mapping keys, values, list items) a file may hold, what an alias names counted
# once per alias. Building, locating keys and validating cost grows with this number: at the
# limit, about 4 s of CPU and 200 MB for a whole `gpucluster validate` (a list of a million
# users). The 20,000-tenant benchmark inventory holds ~240,000.
MAX_NODES = 1_000_000

# Most nodes that aliases may add (what each alias names, counted once per alias), within
# MAX_NODES. Inventories alias a few shared blocks (a node type's settings, a tenant's limits),
# hundreds of nodes in all; a file whose aliases repeat more than this is an alias bomb, refused
# before validation pays for it. A bomb of nine aliases of the line before per line (9x the
# nodes per ~60 bytes) crosses it on its sixth line; within MAX_NODES, an 8-line bomb of
# 531,441 items would otherwise cost 1.3 s and 100 MB to load and validate.
MAX_ALIAS_NODES = 100_000

# Deepest nesting of mappings and lists, aliases expanded. Inventories nest about a dozen levels
# (each group of hosts.yml nested in another adds two). Deeper nesting crashed the process
# (libyaml's composer recursing in C, then Python's recursion limit) and scanning it costs
# libyaml time quadratic in the depth: it is refused at the first level too deep.
MAX_DEPTH = 100
DEPTH_MESSAGE = f"mappings and lists nest deeper than {MAX_DEPTH} levels (the limit; aliases expanded)"


# libyaml's parser when PyYAML was built with it (Debian's and PyPI's wheels are): inventories
# of thousands of hosts parse several times faster.
_Base: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[valid-type,misc]
    pass


def _vault(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return "<vaulted>"


_Loader.add_constructor(_VAULT_TAG, _vault)

_STR, _SEQ, _MAP = (_Loader.DEFAULT_SCALAR_TAG, _Loader.DEFAULT_SEQUENCE_TAG, _Loader.DEFAULT_MAPPING_TAG)
# Scalar tags whose SafeLoader constructors are plain functions of the node: _load_plain calls
# them directly (or does what they do); other tags (merge keys, timestamps, ...) go the standard way.
_PLAIN_SCALARS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("str", "int", "bool", "null", "float"))
_INT, _NULL = "tag:yaml.org,2002:int", "tag:yaml.org,2002:null"


class LoadedYaml:
    """Parsed data plus the line of every key path, for error messages."""

    def __init__(self, data: Any, lines: dict[str, int] | None, file: str, text: str = "") -> None:
        self.data = data
        self._lines = lines
        self._text = text  # to find the lines in when first asked, if not given
        self.file = file

    @property
    def lines(self) -> dict[str, int]:
        """Line of every key path. A valid inventory never asks: the lines of a plain document
        are found when first asked, from its text (a second reading, as fast as the first)."""
        if self._lines is None:
            with _gc_paused():
                loader = _Loader(self._text)
                try:
                    _, self._lines, _ = _load_plain(loader, record=True)
                finally:
                    loader.dispose()
            self._text = ""
        return self._lines

    def line_of(self, path: str) -> int | None:
        """Line of the key path, or of its nearest ancestor that has one."""
        while path:
            if path in self.lines:
                return self.lines[path]
            cut = max(path.rfind("."), path.rfind("["))
            path = path[:cut] if cut > 0 else ""
        return None

    def problem(self, path: str, message: str) -> Problem:
        return Problem(self.file, path, message, self.line_of(path))


class _Refused(Exception):
    """A limit or a recursive alias; the message, the line and the key path where it was met."""

    def __init__(self, message: str, line: int, path: str = "") -> None:
        self.message = message
        self.line = line
        self.path = path


class _Open:
    """A mapping or list being composed."""

    __slots__ = ("anchor", "first", "key", "node", "reach")

    def __init__(self, node: yaml.CollectionNode, anchor: str | None, first: int, depth: int) -> None:
        self.node = node
        self.anchor = anchor
        self.key: yaml.Node | None = None  # a mapping's key waiting for its value
        self.first = first  # nodes counted before this one: its expanded size is the difference
        self.reach = depth  # deepest level reached inside it, aliases expanded


def _line(mark: Any) -> int:
    return int(mark.line) + 1


def _open_path(stack: list[_Open]) -> str:
    """Key path of the place being composed, for a refusal."""
    parts: list[str | int] = []
    for entry in stack:
        if isinstance(entry.node, yaml.SequenceNode):
            parts.append(len(entry.node.value))
        elif isinstance(entry.key, yaml.ScalarNode):
            parts.append(entry.key.value)
        else:
            break
    return _refusal_path(parts)


def _refusal_path(parts: list[str | int]) -> str:
    # A path to a refusal for depth is as long as the limit: its beginning says where.
    return format_path(parts) if len(parts) <= 12 else format_path(parts[:12]) + "..."


def _too_many_aliased() -> str:
    return f"YAML aliases would add more than {MAX_ALIAS_NODES:,} keys, values and list items to the file (the limit)"


def _too_many(aliased: bool) -> str:
    if aliased:
        return f"YAML aliases would expand the file to more than {MAX_NODES:,} keys, values and list items (the limit)"
    return f"the file holds more than {MAX_NODES:,} keys, values and list items (the limit)"


def _compose(loader: _Loader) -> yaml.Node | None:
    """The single document's node graph, as PyYAML composes it, within MAX_NODES and MAX_DEPTH.

    An alias adds the expanded size (and height) of the node it names, known once that node is
    complete (memoised per anchored node), so expansion is judged without expanding anything;
    an alias to a node still open is a recursive alias. SafeLoader registers no path resolvers,
    so descend/ascend_resolver are not needed, a quoted scalar is a string and a list or mapping
    without a tag gets the default one.
    """
    get_event = loader.get_event
    get_event()  # StreamStartEvent
    event: Any = get_event()
    if type(event) is yaml.StreamEndEvent:
        return None
    root, cyclic = _compose_document(loader)
    _single_document(loader)
    if cyclic and root is not None:
        line = _recursion(root, set())
        if line is not None:
            raise _Refused("a YAML alias refers to itself (recursive anchor)", line)
    return root


def _compose_document(loader: _Loader) -> tuple[yaml.Node | None, bool]:
    """The root node of the document just started, composed up to its end, and whether an alias
    named a node still open (a cycle, as PyYAML composes it, judged once the document is read)."""
    get_event = loader.get_event
    resolve = loader.resolve
    anchors: dict[str, yaml.Node] = {}
    expanded: dict[str, tuple[int, int]] = {}  # anchor -> (expanded size, height) of its node
    plain_tags: dict[str, str] = {}  # resolve() of each plain scalar value seen
    stack: list[_Open] = []
    count = 0  # nodes so far, aliases expanded
    through_aliases = 0  # of those, nodes that aliases added
    aliased = cyclic = False
    root: yaml.Node | None = None
    while True:
        event = get_event()
        kind = type(event)  # not isinstance: the events' marks are typed too narrowly for libyaml's
        node: yaml.Node
        if kind is yaml.AliasEvent:
            node, size = _alias(event, anchors, expanded, stack, count, through_aliases)
            cyclic = cyclic or event.anchor not in expanded  # a node still open
            aliased = True
            count += size
            through_aliases += size
        elif kind is yaml.ScalarEvent or kind is yaml.SequenceStartEvent or kind is yaml.MappingStartEvent:
            anchor = event.anchor
            if anchor is not None and anchor in anchors:
                raise _duplicate_anchor(anchors[anchor], event)
            count += 1
            if count > MAX_NODES:
                raise _refused_at(_too_many(aliased), event, stack)
            if kind is yaml.ScalarEvent:
                tag, value = event.tag, event.value
                if tag is None or tag == "!":
                    if event.implicit[0]:  # plain: the tag depends on the value only
                        tag = plain_tags.get(value)
                        if tag is None:
                            tag = plain_tags[value] = resolve(yaml.ScalarNode, value, event.implicit)
                    else:
                        tag = _STR
                node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, style=event.style)
                if anchor is not None:
                    anchors[anchor] = node
                    expanded[anchor] = (1, 0)
            else:
                collection = _collection_node(event, kind is yaml.SequenceStartEvent)
                if anchor is not None:
                    anchors[anchor] = collection
                if len(stack) >= MAX_DEPTH:
                    raise _refused_at(DEPTH_MESSAGE, event, stack)
                stack.append(_Open(collection, anchor, count - 1, len(stack) + 1))
                continue
        elif kind is yaml.SequenceEndEvent or kind is yaml.MappingEndEvent:
            done = stack.pop()
            node = done.node
            node.end_mark = event.end_mark
            if done.anchor is not None:
                expanded[done.anchor] = (count - done.first, done.reach - len(stack))
            if stack:
                stack[-1].reach = max(stack[-1].reach, done.reach)
        else:  # DocumentEndEvent
            return root, cyclic
        if not stack:
            root = node
            continue
        top = stack[-1]
        if isinstance(top.node, yaml.SequenceNode):
            top.node.value.append(node)
        elif top.key is None:
            top.key = node
        else:
            top.node.value.append((top.key, node))
            top.key = None


def _refused_at(message: str, event: Any, stack: list[_Open]) -> _Refused:
    return _Refused(message, _line(event.start_mark), _open_path(stack))


def _duplicate_anchor(first: yaml.Node, event: Any) -> yaml.composer.ComposerError:
    return yaml.composer.ComposerError(
        "found duplicate anchor; first occurrence", first.start_mark, "second occurrence", event.start_mark
    )


def _alias(
    event: Any,
    anchors: dict[str, yaml.Node],
    expanded: dict[str, tuple[int, int]],
    stack: list[_Open],
    count: int,
    through_aliases: int,
) -> tuple[yaml.Node, int]:
    """The node an alias names and the nodes it adds (what that node expands to; 1 while it is
    still open). Refused past MAX_NODES, MAX_ALIAS_NODES or MAX_DEPTH, in that order, given the
    `count` and `through_aliases` before it; else the collection it is in notes the depth it reaches."""
    anchor = event.anchor
    if anchor not in anchors:
        raise yaml.composer.ComposerError(None, None, "found undefined alias", event.start_mark)
    size, height = expanded.get(anchor, (1, 0))
    if count + size > MAX_NODES:
        raise _refused_at(_too_many(True), event, stack)
    if through_aliases + size > MAX_ALIAS_NODES:
        raise _refused_at(_too_many_aliased(), event, stack)
    if stack:
        reach = len(stack) + height
        if reach > MAX_DEPTH:
            raise _refused_at(DEPTH_MESSAGE, event, stack)
        stack[-1].reach = max(stack[-1].reach, reach)
    return anchors[anchor], size


def _collection_node(event: Any, is_list: bool) -> yaml.CollectionNode:
    """A list's or mapping's node, still empty (its end mark is set when it ends); the default tag
    if none."""
    tag = event.tag
    if is_list:
        if tag is None or tag == "!":
            tag = _SEQ
        return yaml.SequenceNode(tag, [], event.start_mark, None, flow_style=event.flow_style)
    if tag is None or tag == "!":
        tag = _MAP
    return yaml.MappingNode(tag, [], event.start_mark, None, flow_style=event.flow_style)


def _single_document(loader: _Loader) -> None:
    """After the first document: the end of the stream, or the error PyYAML gives."""
    event: Any = loader.get_event()
    if type(event) is not yaml.StreamEndEvent:
        raise yaml.composer.ComposerError(
            "expected a single document in the stream", None, "but found another document", event.start_mark
        )


def _recursion(node: yaml.Node, ancestors: set[int]) -> int | None:
    """Line of the first node that is its own descendant through values, in the order of _walk
    (through keys, the constructor refuses it)."""
    if id(node) in ancestors:
        return _line(node.start_mark)
    ancestors.add(id(node))
    children: list[yaml.Node] = []
    if isinstance(node, yaml.MappingNode):
        children = [value for _, value in node.value]
    elif isinstance(node, yaml.SequenceNode):
        children = node.value
    for child in children:
        line = _recursion(child, ancestors)
        if line is not None:
            return line
    ancestors.discard(id(node))
    return None


def _walk(node: yaml.Node, path: str, lines: dict[str, int], dups: list[tuple[str, int]]) -> None:
    """Record the line of every key path (first occurrence wins) and every duplicate key.

    Aliases are followed, so the walk visits the expanded document: _compose bounded its size
    and depth, and refused recursive aliases.
    """
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = f"{path}.{key}" if path else key
            if key in seen:
                dups.append((child, key_node.start_mark.line + 1))
            seen.add(key)
            lines.setdefault(child, key_node.start_mark.line + 1)
            _walk(value_node, child, lines, dups)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            child = f"{path}[{index}]"
            lines.setdefault(child, item.start_mark.line + 1)
            _walk(item, child, lines, dups)


class _Unusual(Exception):
    """A document _load_plain leaves to the standard way."""


class _Frame:
    """A mapping or list being filled by _load_plain, put in its parent's container as it opens
    (the parent None: the document's root), its line recorded in `lines` if given. An anchor, a
    tag, nesting beyond MAX_DEPTH or a mapping or list as a key raises _Unusual. (All in the one
    call a frame costs anyway: _plain_document's loop runs once per event.)"""

    __slots__ = ("data", "key", "key_text", "part", "path", "seen")

    def __init__(
        self, is_map: bool, parent: _Frame | None, depth: int, event: Any, lines: dict[str, int] | None
    ) -> None:
        tag = event.tag
        if event.anchor is not None or depth >= MAX_DEPTH:
            raise _Unusual
        if not (tag is None or tag == "!" or tag == (_MAP if is_map else _SEQ)):
            raise _Unusual
        data: Any = {} if is_map else []
        self.data = data
        # A mapping's key texts so far; None for a list.
        self.seen: set[str] | None = set() if is_map else None
        self.key: Any = None  # a mapping's key waiting for its value...
        self.key_text: str | None = None  # ... and its text (None: no key waiting)
        path: str
        part: str | int
        if parent is None:
            path = part = ""  # the root has none
        elif parent.seen is None:
            part = len(parent.data)
            path = f"{parent.path}[{part}]"
            if lines is not None:
                lines.setdefault(path, event.start_mark.line + 1)
            parent.data.append(data)
        elif parent.key_text is None:
            raise _Unusual  # a mapping or list as a key
        else:
            part = parent.key_text
            path = f"{parent.path}.{part}" if parent.path else part
            parent.data[parent.key] = data
            parent.key_text = None
        self.path: str = path
        self.part: str | int = part  # the last part of its path: its key or its index


def _load_plain(loader: _Loader, record: bool) -> tuple[Any, dict[str, int], list[tuple[str, int]]]:
    """Data, duplicate keys and (if `record`) line of every key path of a document made of
    mappings, lists and plain scalars (str, int, bool, null, float, `!vault`), built straight from
    libyaml's events: what _compose, _walk and construct_document give, in a fraction of the time
    and memory.

    Anything else (an anchor or alias, another tag, a key that is not a scalar, an error, a
    limit) raises _Unusual, and the standard way decides: the same result, the same errors.
    """
    get_event = loader.get_event
    lines: dict[str, int] = {}
    dups: list[tuple[str, int]] = []
    try:
        get_event()  # StreamStartEvent
        event: Any = get_event()
        if type(event) is yaml.StreamEndEvent:
            return None, lines, dups
        data = _plain_document(loader, record, lines, dups)
        if type(get_event()) is not yaml.StreamEndEvent:
            raise _Unusual
    except _Refused:
        raise
    except Exception as exc:  # an error of the document, or _Unusual: the standard way words it
        raise _Unusual from exc
    return data, lines, dups


def _plain_document(loader: _Loader, record: bool, lines: dict[str, int], dups: list[tuple[str, int]]) -> Any:
    """The data of the document just started, read up to its end, for _load_plain."""
    get_event = loader.get_event
    resolve = loader.resolve
    constructors = loader.yaml_constructors
    # Locals: this loop runs once per event, hundreds of thousands of times.
    scalar, mapping_start, sequence_start = yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent
    str_tag, int_tag, null_tag, limit = _STR, _INT, _NULL, MAX_NODES
    plain_tags: dict[str, str] = {}  # resolve() of each plain scalar value seen
    stack: list[_Frame] = []
    top: _Frame | None = None  # stack[-1]
    count = 0
    data: Any = None
    frame_lines = lines if record else None
    while True:
        event: Any = get_event()
        kind = type(event)
        if kind is scalar:
            count += 1
            if count > limit:
                raise _plain_refusal(stack, event)
            if event.anchor is not None:
                raise _Unusual
            tag, raw = event.tag, event.value
            if tag is None or tag == "!":
                if event.implicit[0]:
                    tag = plain_tags.get(raw)
                    if tag is None:
                        tag = plain_tags[raw] = resolve(yaml.ScalarNode, raw, event.implicit)
                else:
                    tag = str_tag
            if tag == str_tag:
                value = raw
            elif tag == int_tag and raw.isascii() and raw.isdigit() and (raw[0] != "0" or raw == "0"):
                value = int(raw)  # what construct_yaml_int gives a plain decimal
            elif tag == null_tag:
                value = None
            elif tag in _PLAIN_SCALARS or tag == _VAULT_TAG:
                node = yaml.ScalarNode(tag, raw, event.start_mark, event.end_mark, style=event.style)
                value = constructors[tag](loader, node)
            else:
                raise _Unusual
            if top is None:
                data = value
            elif top.seen is None:
                if record:
                    lines.setdefault(f"{top.path}[{len(top.data)}]", event.start_mark.line + 1)
                top.data.append(value)
            elif top.key_text is None:
                if raw in top.seen:
                    dups.append((f"{top.path}.{raw}" if top.path else raw, event.start_mark.line + 1))
                top.seen.add(raw)
                if record:
                    lines.setdefault(f"{top.path}.{raw}" if top.path else raw, event.start_mark.line + 1)
                top.key, top.key_text = value, raw
            else:
                top.data[top.key] = value
                top.key_text = None
        elif kind is mapping_start or kind is sequence_start:
            count += 1
            if count > limit:
                raise _plain_refusal(stack, event)
            top = _Frame(kind is mapping_start, top, len(stack), event, frame_lines)
            if not stack:
                data = top.data
            stack.append(top)
        elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
            stack.pop()
            top = stack[-1] if stack else None
        elif kind is yaml.DocumentEndEvent:
            return data
        else:  # an alias
            raise _Unusual


def _plain_refusal(stack: list[_Frame], event: Any) -> _Refused:
    """The refusal _compose gives a document without aliases at this event: same line, same path.
    Refused here, the nodes of a million items are never built."""
    parts: list[str | int] = [frame.part for frame in stack[1:]]
    if stack:
        top = stack[-1]
        if top.seen is None:
            parts.append(len(top.data))
        elif top.key_text is not None:
            parts.append(top.key_text)
    return _Refused(_too_many(False), _line(event.start_mark), _refusal_path(parts))


def syntax_problem(display: str, text: str, exc: yaml.MarkedYAMLError) -> Problem:
    """`file:line: YAML syntax error at column C: ...`, saying so when a tab is the cause (YAML
    indents with spaces only; libyaml's words do not always name the tab)."""
    mark = exc.problem_mark
    if mark is None:
        return Problem(display, "", f"YAML syntax error: {exc.problem}")
    lines = text.split("\n")
    line_text = lines[mark.line] if mark.line < len(lines) else ""
    problem = str(exc.problem or "").replace("'\\t'", "a tab")
    message = f"YAML syntax error at column {mark.column + 1}: {problem}"
    if "tab" in problem or "\t" in line_text[: mark.column + 1]:
        message += (
            " (a tab character: YAML indents with spaces only; replace the tabs on this line with spaces)"
        )
    else:
        message += _indentation_hint(exc, lines)
    return Problem(display, "", message, mark.line + 1)


# libyaml's context of an error inside a block -> what that block holds in one column.
_BLOCKS = {
    "while parsing a block mapping": ("mapping", "keys"),
    "while parsing a block collection": ("list", "items (`- `)"),
}


def _indentation_hint(exc: yaml.MarkedYAMLError, lines: list[str]) -> str:
    """Where a block's entries do not line up, the line and column each of them starts at: a line
    indented off its siblings is met where the block cannot go on, which may be lines later."""
    mark, context = exc.problem_mark, exc.context_mark
    if mark is None or mark.line >= len(lines):
        return ""
    text = lines[mark.line]
    column = len(text) - len(text.lstrip(" ")) + 1
    if context is not None and exc.context in _BLOCKS:
        kind, what = _BLOCKS[exc.context]
        return (
            f" (indentation: line {mark.line + 1} starts at column {column}, but the {kind} that begins at "
            f"line {context.line + 1} has its {what} at column {context.column + 1}: give every entry of one "
            f"{kind} the same indentation, and indent what belongs to an entry further than the entry)"
        )
    if "mapping values are not allowed" in str(exc.problem):
        return (
            f" (a `key:` where a value goes on: check the indentation of this line (column {column}) against "
            "the line above it, or quote a value that holds `: `)"
        )
    return ""


def _reader_problem(display: str, text: str, exc: yaml.reader.ReaderError) -> Problem:
    """A character YAML does not take (a control character, a lone surrogate), at its line."""
    position = exc.position if isinstance(exc.position, int) else 0
    before = text[:position]
    line = before.count("\n") + 1
    column = position - (before.rfind("\n") + 1) + 1
    code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
    return Problem(
        display,
        "",
        f"column {column}: the character U+{code:04X} is not allowed in YAML (a control character): "
        "remove it (an editor may show it as ^ and a letter, or not at all)",
        line,
    )


def _load_any(
    loader: _Loader, display: str, text: str = ""
) -> tuple[Any, dict[str, int], list[tuple[str, int]]]:
    """The standard way: compose (within the limits), walk for the lines, construct."""
    lines: dict[str, int] = {}
    dups: list[tuple[str, int]] = []
    try:
        node = _compose(loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        if exc.problem and "maximum nesting depth" in exc.problem:
            # libyaml's own limit (PyYAML >= 6.0.3), met while it scans ahead of our count.
            line = mark.line + 1 if mark else None
            raise InventoryError([Problem(display, "", DEPTH_MESSAGE, line)]) from None
        raise InventoryError([syntax_problem(display, text, exc)]) from None
    except yaml.reader.ReaderError as exc:
        raise InventoryError([_reader_problem(display, text, exc)]) from None
    except yaml.YAMLError as exc:
        raise InventoryError([Problem(display, "", f"YAML error: {exc}")]) from None
    if node is None:
        return None, lines, dups
    _walk(node, "", lines, dups)
    try:
        data = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise InventoryError([Problem(display, "", f"YAML error: {exc}")]) from None
    except (ValueError, OverflowError) as exc:  # PyYAML's own: `0x_` as an int, `2001-13-45` as a date
        raise InventoryError([Problem(display, "", f"YAML error: a value cannot be read: {exc}")]) from None
    return data, lines, dups


@contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while building the node graph and the data: they are all
    alive, and each collection pass would scan them again (more than half the loading time).
    The node graph holds no cycles (recursive aliases are refused), so dropping it frees it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _read(path: Path, display: str) -> str:
    """The file's text, refused unreadable, not a regular file, or above MAX_FILE_BYTES
    (checked before reading, and by reading at most one byte more than the limit)."""

    def refused(message: str) -> InventoryError:
        return InventoryError([Problem(display, "", message)])

    too_big = f"the file is larger than {MAX_FILE_BYTES:,} bytes (the limit)"
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise refused("cannot read file: not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise refused(too_big)
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise refused(too_big)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise refused(f"cannot read file: {exc}") from None
    # Universal newlines, as Path.read_text reads.
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def _load(text: str, display: str) -> tuple[Any, dict[str, int] | None, list[tuple[str, int]]]:
    """Data, lines (None: found when asked) and duplicate keys: the fast way if it can, else the
    standard way."""
    loader = _Loader(text)
    try:
        data, _, dups = _load_plain(loader, record=False)
        return data, None, dups
    except _Unusual:
        pass
    finally:
        loader.dispose()
    loader = _Loader(text)
    try:
        return _load_any(loader, display, text)
    finally:
        loader.dispose()


def load_yaml(path: Path, display: str) -> LoadedYaml:
    """Parse one YAML file; syntax errors, duplicate keys and limits become Problems with a line."""
    text = _read(path, display)
    try:
        with _gc_paused():
            data, lines, dups = _load(text, display)
    except _Refused as exc:
        raise InventoryError([Problem(display, exc.path, exc.message, exc.line)]) from None
    if dups:
        raise InventoryError(
            [Problem(display, p, "duplicate key (the later one would silently win)", ln) for p, ln in dups]
        )
    return LoadedYaml(data, lines, display, text if lines is None else "")
