"""The one reader of YAML and JSON that users hand us: dlprio's files (daemon config,
``--config``, tune's grid file, ``--log-config``: :func:`read_yaml`, :func:`load`) and dlsubmit's
job specs and site config (:func:`load_yaml`, :func:`load_json`, read by :mod:`submit.files`).

* **Syntax errors** become one line ``FILE:LINE:COL: YAML syntax error: <problem>`` (line and
  column 1-based, from PyYAML's problem mark, else its context mark; :func:`syntax_message`).
* **Duplicate keys.** YAML 1.2 (section 3.2.1.3, "each of the keys is unique") and RFC 8259
  section 4 ("The names within an object SHOULD be unique") leave a repeated key an error or
  undefined; PyYAML and ``json`` silently keep the last one, so ``interval_s: 30`` written again
  further down as ``interval_s: 10`` would change the cycle without a word. Here every repeat
  is reported together, one line ``FILE:LINE: key 'k' appears twice in the same mapping (lines
  A and B); keep one`` each (:class:`DuplicateKeyCheck`); two keys that differ only in what YAML
  read them as (``1:`` and ``"1":``) are refused alike.
* **Alias bombs** ("billion laughs"): YAML anchors and aliases let a 1 KB file describe a tree of
  10^9 nodes, which every later walk of the data pays for. The nodes of the *expanded* document
  are counted on the composed graph (memoised, linear in the file) and more than
  :data:`MAX_YAML_NODES` are refused before anything is constructed (:class:`TooLarge`).
* **Many nodes written out.** PyYAML's pure-Python composer takes about 25 µs and 800 bytes a
  node, so composing a 1 MiB flow list (``[1,1,...]``, 500,000 nodes) whole, for the count
  above to refuse it, takes 14 s and 400 MiB. dlprio's loader (:class:`Loader`) counts nodes as they are composed
  (:class:`NodeBound`) and refuses the document at node :data:`MAX_YAML_NODES` + 1, whatever
  the file's size: about 2 s and 80 MiB. The byte bound (:data:`MAX_YAML_BYTES`, checked
  before parsing) cannot stand in for it: 100,000 nodes fit in 200 KB, while a long value (a
  100,000-character path) is one node.
* **Floats.** dlprio's files are read with YAML 1.2's floats (:class:`Loader`: ``1e3`` is a
  number); job specs with PyYAML's own YAML 1.1 reading, libyaml first for speed
  (:func:`load_yaml`), as OpenPAI's tools read them.

Part of :mod:`slurm_plugin.common` (where it sits and why: its package doc).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from slurm_plugin.common.wording import shown
from slurm_plugin.common.cli import visible
from slurm_plugin.common.readfile import BadText, UnreadableFile, decode_utf8, read_regular

MAX_YAML_BYTES = 1024 * 1024
"""Largest YAML file dlprio reads, bytes (1 MiB). Its files (daemon config, tune grid, log
config, tenants) are a few KiB; the packaged conf/dlprio.yaml is 9 KiB. PyYAML's pure-Python
scanner takes about 0.6 s for 1 MiB written as one value, 5 s for 8 MiB; a document of many
small nodes is stopped at :data:`MAX_YAML_NODES` before (:class:`NodeBound`)."""


MAX_YAML_NODES = 100_000
"""Largest YAML document read, counted with every alias expanded (:func:`expanded_size`): a
"billion laughs" file of 1 KB describes 10^9 nodes, which every later walk of the data pays for."""


__all__ = ["DuplicateKey", "DuplicateKeyCheck", "DuplicateKeys", "Loader", "MAX_YAML_BYTES",
           "MAX_YAML_NODES", "NodeBound", "TooLarge", "YamlFileError", "duplicate_lines",
           "expanded_size", "key_text", "load", "load_json", "load_yaml", "read_text",
           "read_yaml", "size_problem", "syntax_message", "SourceText"]


class YamlFileError(ValueError):
    """The file cannot be read or is not YAML; the message is one line naming the file."""


class DuplicateKey(ValueError):
    """A mapping/object holds the same key twice. ``lines`` are 1-based (empty when unknown);
    the key is quoted, escaped and cut as every echo (:func:`slurm_plugin.common.wording.shown`).
    ``first``, when given, is the earlier key, read as another type (``1`` and ``"1"``, the
    same text; ``1`` and ``true``, equal in Python): the message names both, each with what
    YAML read it as."""

    def __init__(self, key: Any, lines: tuple[int, ...], first: Any = ...) -> None:
        self.key = key
        self.lines = lines
        where = (f" (lines {lines[0]} and {lines[1]})" if len(lines) == 2
                 else f" (written at lines {', '.join(map(str, lines))})" if lines else "")
        if first is ...:   # (None is a key: null)
            super().__init__(f"key {shown(str(key))} appears twice in the same mapping{where}; "
                             "keep one")
        else:
            super().__init__(f"keys {_as_read(first)} and {_as_read(key)} are one key in the "
                             f"same mapping{where}; keep one")


#: How :func:`_as_read` calls a key YAML did not read as text (``1:``, ``true:``, ``null:``).
_KEY_KINDS = {bool: "a boolean", int: "a number", float: "a number"}


def _as_read(key: Any) -> str:
    """A key as YAML read it: ``'1' (text)``, ``1 (a number)``, ``true (a boolean)``, ``null``."""
    if isinstance(key, str):
        return f"{shown(key)} (text)"
    if key is None:
        return "null"
    word = str(key).lower() if isinstance(key, bool) else shown(key)
    return f"{word} ({_KEY_KINDS.get(type(key), type(key).__name__)})"


def key_text(key: Any) -> str:
    """The text a key stands for once a reader takes every key as a name (``str(key)``, as
    ``dlprio tune``'s grid reader does): ``1`` and ``"1"`` are both ``1``, ``1.0`` and ``"1.0"``
    both ``1.0``, ``true`` and ``"True"`` both ``True``, ``null`` and ``"None"`` both ``None``."""
    return str(key)


class DuplicateKeys(ValueError):
    """Several repeated keys in one document: ``keys`` holds one :class:`DuplicateKey` each,
    in the order they are written."""

    def __init__(self, keys: list[DuplicateKey]) -> None:
        self.keys = keys
        super().__init__("; ".join(map(str, keys)))


def duplicate_lines(name: str, exc: DuplicateKeys) -> list[str]:
    """One ``name:LINE: key ... appears twice`` line per repeated key (LINE: the repeat), in
    file order."""
    keys = sorted(exc.keys, key=lambda d: d.lines[-1:])
    lines = [f"{name}:{d.lines[-1]}: {d}" if d.lines else f"{name}: {d}" for d in keys]
    return list(dict.fromkeys(lines))


class DuplicateKeyCheck:
    """Mixin for a PyYAML loader class: a key written twice in one mapping is collected, and
    :meth:`get_single_data` raises :class:`DuplicateKeys` with every one (``<<`` merge keys are
    overridden by design and not counted). So are two keys that differ only in what YAML read
    them as, ``1:`` (a number) and ``"1":`` (text), or ``true:`` and ``"True":``: every reader
    of these files takes keys as names (:func:`key_text`; ``dlprio tune``'s grid kept the last
    of the two without a word)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, tuple[Any, int]] = {}    # key -> the first equal key, its line
        texts: dict[str, tuple[Any, int]] = {}   # key_text -> the first key of that text, line
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[attr-defined]
            try:
                hash(key)
            except TypeError:
                continue  # the base class reports unhashable keys
            line = key_node.start_mark.line + 1
            if key in seen:   # equal to Python: the same key, or 1 and true, 1 and 1.0
                first, at = seen[key]
                self._dups.append(DuplicateKey(key, (at, line),
                                               first=... if type(first) is type(key) else first))
                continue
            seen[key] = (key, line)
            text = key_text(key)
            if text in texts:   # 1 and "1": one name to a reader that takes keys as text
                first, at = texts[text]
                self._dups.append(DuplicateKey(key, (at, line), first=first))
            else:
                texts[text] = (key, line)
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc, no-any-return]

    _dups: list[DuplicateKey]

    def get_single_data(self) -> Any:
        self._dups = []
        data = super().get_single_data()  # type: ignore[misc]
        if self._dups:
            raise DuplicateKeys(self._dups)
        return data


class NodeBound:
    """Mixin for a pure-Python PyYAML loader: raises :class:`TooLarge` as soon as more than
    :data:`MAX_YAML_NODES` nodes are composed (aliases not counted: :func:`size_problem`
    counts them once the document is composed), before the rest of the file is parsed."""

    _composed = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if not self.check_event(yaml.AliasEvent):  # type: ignore[attr-defined]
            self._composed += 1
            if self._composed > MAX_YAML_NODES:
                raise TooLarge(_MANY_NODES)
        return super().compose_node(parent, index)  # type: ignore[misc, no-any-return]


class Loader(NodeBound, DuplicateKeyCheck, yaml.SafeLoader):
    """``yaml.SafeLoader`` that reads floats as YAML 1.2 does.

    PyYAML implements YAML 1.1, whose float pattern needs a dot and a signed exponent, so
    ``1e3``, ``1.0e3`` and ``1e-9`` come back as strings and ``thresholds_gpu_s: [1e3]``
    failed with "expected a number". YAML 1.2's core schema (section 10.3.2, tag
    resolution) reads ``[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?`` as a float;
    plain integers stay ints (PyYAML's int resolver is tried for them first). A key written
    twice in one mapping raises :class:`DuplicateKeys` (:class:`DuplicateKeyCheck`). A document that
    expands past :data:`MAX_YAML_NODES` through aliases is refused before it is constructed.
    """

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        problem = None if node is None else size_problem(node)
        if problem:
            raise TooLarge(problem)
        return node


class TooLarge(ValueError):
    """The expanded YAML document has more than :data:`MAX_YAML_NODES` nodes (an alias bomb, or
    a text that large), or a YAML/JSON integer has more digits than Python converts
    (:func:`sys.get_int_max_str_digits`, 4300 by default: CPython's guard against quadratic-time
    conversion, CVE-2020-10735)."""


def expanded_size(root: yaml.Node) -> int:
    """Nodes of the document with every alias expanded (counting stops early past
    :data:`MAX_YAML_NODES`). Linear in the composed graph: each distinct node's size is computed
    once. A node that holds an alias of itself (``&a [*a]``, also through other nodes) expands
    without end: more than :data:`MAX_YAML_NODES`."""
    memo: dict[int, int] = {}
    open_: set[int] = set()   # nodes whose size is being counted: the path from the root
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in memo:
            continue
        if not done and id(node) in open_:
            return MAX_YAML_NODES + 1   # an alias inside its own anchor's node: an endless document
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            children = [x for pair in node.value for x in pair]
        if done:
            memo[id(node)] = min(MAX_YAML_NODES + 1, 1 + sum(memo[id(c)] for c in children))
            open_.discard(id(node))
            continue
        open_.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in memo)
    return memo[id(root)]


_MANY_NODES = (f"the document has more than {MAX_YAML_NODES:,} nodes (keys, values and list "
               "items); split it into smaller files")


def size_problem(root: yaml.Node) -> str | None:
    """Why the composed document ``root`` is too large to construct, or None: more than
    :data:`MAX_YAML_NODES` nodes once every alias is expanded, worded by the cause: aliases that
    multiply a small text (an alias bomb), or a text that is that large written out."""
    if expanded_size(root) <= MAX_YAML_NODES:
        return None
    if _distinct_nodes(root) > MAX_YAML_NODES:
        return _MANY_NODES
    return (f"the document expands to more than {MAX_YAML_NODES:,} nodes through anchors and "
            "aliases (&name / *name); write it out or use fewer aliases")


def _distinct_nodes(root: yaml.Node) -> int:
    """Nodes of the composed graph, each counted once however many aliases name it (counting
    stops past :data:`MAX_YAML_NODES`)."""
    seen: set[int] = set()
    stack = [root]
    while stack and len(seen) <= MAX_YAML_NODES:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(x for pair in node.value for x in pair)
    return len(seen)


_FLOAT_12 = re.compile(r"""^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)[eE][-+]?[0-9]+
    |[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$""", re.X)
Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT_12, list("-+0123456789."))


def load(text: str) -> Any:
    """``yaml.load`` with :class:`Loader` (safe, YAML 1.2 floats). Raises yaml.YAMLError, or
    :class:`DuplicateKeys` for a key written twice in one mapping."""
    return yaml.load(text, Loader=Loader)  # noqa: S506 - Loader is a SafeLoader


def _yaml_escape(code: int) -> str:
    """The escape that writes character ``code`` in a double-quoted YAML scalar."""
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def syntax_message(name: str, exc: yaml.YAMLError, text: str | None = None) -> str:
    """``NAME:LINE:COL: YAML syntax error: <context> <problem>`` for a PyYAML error. A character
    YAML does not allow (a control character, DEL, NUL, U+FFFE; PyYAML's ``ReaderError``, which
    gives an offset into ``text`` instead of a mark) is placed by line and column too, and
    written escaped with the fix: ``NAME:2:10: YAML syntax error: the character U+001B ('\\x1b')
    is not allowed in YAML; remove it, or write it as the escape "\\x1b" inside double quotes``."""
    if isinstance(exc, yaml.reader.ReaderError) and text is not None and exc.encoding == "unicode":
        pos = exc.position
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return (f"{name}:{line}:{col}: YAML syntax error: the character U+{code:04X} "
                f"({ascii(chr(code))}) is not allowed in YAML; remove it, or write it as the "
                f"escape \"{_yaml_escape(code)}\" inside double quotes")
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark else name
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        return f"{where}: YAML syntax error: {what}"
    return f"{name}: YAML syntax error: {' '.join(str(exc).split())}"


def read_text(path: str | Path, limit: int) -> str:
    """The UTF-8 text of the regular file ``path`` of at most ``limit`` bytes, read by
    :func:`slurm_plugin.common.readfile.read_regular` (a FIFO or ``/dev/zero`` is refused, never
    waited on or read without end): how dlprio reads every file a user names (this module's
    YAML, the ``gittins_samples`` CSV of :mod:`prioritizer.samplesfile`).

    Raises:
        YamlFileError: (a ``ValueError``) one line naming the path, control characters escaped:
            ``PATH: cannot read (<reason>)`` (``a FIFO; give a regular file``, the OS's
            words), ``PATH:LINE: not UTF-8 text (byte 0xff); save the file as UTF-8`` or
            ``PATH: larger than N bytes (M MiB), the most dlprio reads``.
    """
    name = visible(path)
    try:
        return decode_utf8(read_regular(path, limit)[0])
    except BadText as exc:
        raise YamlFileError(f"{name}:{exc.line}: {exc.reason}; save the file as UTF-8") from None
    except UnreadableFile as exc:
        raise YamlFileError(f"{name}: {exc.reason}, the most dlprio reads" if exc.too_big
                            else f"{name}: cannot read ({exc.reason})") from None


def read_yaml(path: str | Path) -> Any:
    """Parse the YAML file at ``path`` (:func:`load`: safe, YAML 1.2 floats; an empty file is
    None). The file must be a regular file of at most :data:`MAX_YAML_BYTES` in UTF-8, read by
    :func:`read_text` (a FIFO or ``/dev/zero`` is refused, never waited on or read without end);
    the path is shown with control characters escaped.

    Raises:
        YamlFileError: ``PATH: cannot read (<reason>)``, ``PATH:LINE:COL: YAML syntax
            error: <problem>``, a line ``PATH:LINE: key 'k' appears twice in the same mapping
            (lines A and B); keep one`` per repeated key, a document past :data:`MAX_YAML_NODES` once its aliases are
            expanded, or an integer of more digits than Python converts (4300).
    """
    name = visible(path)
    text = read_text(path, MAX_YAML_BYTES)
    try:
        return load(text)
    except TooLarge as exc:
        raise YamlFileError(f"{name}: {exc}") from None
    except DuplicateKeys as exc:
        raise YamlFileError("\n".join(duplicate_lines(name, exc))) from None
    except yaml.YAMLError as exc:
        raise YamlFileError(syntax_message(name, exc, text)) from None
    except RecursionError:
        raise YamlFileError(f"{name}: YAML syntax error: nested too deeply") from None
    except ValueError:   # int() of more digits than Python converts (CVE-2020-10735 guard)
        raise YamlFileError(f"{name}: a number of more than {sys.get_int_max_str_digits():,} "
                            "digits, more than this reader converts") from None


# ---- job specs (dlsubmit): PyYAML's YAML 1.1 reading, libyaml first; JSON with the same checks

def _too_many_digits(text: str, where: str = "") -> TooLarge:
    return TooLarge(f"{where}a number of {len(text.lstrip('+-')):,} digits: more than the "
                    f"{sys.get_int_max_str_digits():,} this reader converts (no field takes one)")


def _json_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _too_many_digits(text) from None


class _Checks(DuplicateKeyCheck):
    """Refuses duplicate keys (:class:`DuplicateKeyCheck`), too-long integers and documents that
    expand past :data:`MAX_YAML_NODES` (mixed into a loader): the job specs' checks."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        try:
            return super().construct_yaml_int(node)  # type: ignore[misc, no-any-return]
        except ValueError:
            value = str(node.value).replace("_", "")
            raise _too_many_digits(value, f"line {node.start_mark.line + 1}: ") from None

    def get_single_node(self) -> yaml.Node | None:
        node: yaml.Node | None = super().get_single_node()  # type: ignore[misc]  # a mixin: the loader it joins has it
        problem = None if node is None else size_problem(node)
        if problem:
            raise TooLarge(problem)
        return node


class _SpecLoader(_Checks, yaml.SafeLoader):
    """Pure-Python safe loader with the checks (PyYAML's own messages and escapes)."""


_SpecLoader.add_constructor("tag:yaml.org,2002:map", _SpecLoader.construct_yaml_map)  # type: ignore[type-var]  # PyYAML's stubs type the constructor as BaseConstructor's; _SpecLoader is a SafeLoader
_SpecLoader.add_constructor("tag:yaml.org,2002:int", _SpecLoader.construct_yaml_int)  # type: ignore[type-var]  # PyYAML's stubs type the constructor as BaseConstructor's; _SpecLoader is a SafeLoader

_CLoader: Any = None   # libyaml's loader class with the checks, when PyYAML has libyaml
if getattr(yaml, "CSafeLoader", None) is not None:
    class _CLoader(_Checks, yaml.CSafeLoader):  # type: ignore[no-redef]
        """libyaml's parser with the checks: about 10x faster on a valid document."""

    _CLoader.add_constructor("tag:yaml.org,2002:map", _CLoader.construct_yaml_map)
    _CLoader.add_constructor("tag:yaml.org,2002:int", _CLoader.construct_yaml_int)


def load_yaml(text: str) -> Any:
    """How a job spec is read: ``yaml.safe_load`` that raises :class:`DuplicateKeys` (every repeated key) or
    :class:`TooLarge` (and PyYAML's
    own errors for syntax).

    libyaml parses first when available; on any YAML error the pure-Python parser reads the
    text again, so messages and escapes (JSON-style surrogate pairs, which libyaml refuses) are
    PyYAML's in every case."""
    loaders = [_CLoader, _SpecLoader] if _CLoader is not None else [_SpecLoader]
    for i, cls in enumerate(loaders):
        loader = cls(text)
        try:
            return loader.get_single_data()
        except yaml.YAMLError:
            if i + 1 == len(loaders):
                raise
        finally:
            loader.dispose()
    raise AssertionError("unreachable")


#: leading node properties of a YAML value: anchors (``&name``) and tags (``!t``, ``!!int``)
_PROPERTIES = re.compile(r"^(?:[&!]\S*\s+)+")


class SourceText:
    """The text a YAML document's nodes were written as, found by their path in the loaded data,
    for hints that must show the value as the user wrote it (``0755``, which YAML 1.1 read as
    493; ``echo step: 1``, which it read as a mapping). The document is composed again, once,
    on the first call: only a document that failed a check pays for it.

    ``source(parts)``: ``parts`` are keys and list indices from the top, with ``"[key]"`` after
    a key for the key itself; returns the node's text without the blanks around it, or None when
    no node is there (a merged or joined key)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._loader: Any = None
        self._root: yaml.Node | None = None

    def __call__(self, parts: tuple[Any, ...]) -> str | None:
        try:
            if self._loader is None:
                self._loader = _SpecLoader(self.text)
                self._root = self._loader.get_single_node()
            node = self._find(self._root, parts)
        except (yaml.YAMLError, ValueError, RecursionError):
            return None
        if node is None:
            return None
        if isinstance(node, yaml.ScalarNode) and node.style in ('"', "'"):
            return str(node.value)   # quoted (a tag made it no text: !!int "5"): the text inside
        # the node's properties (an anchor &a, a tag !t) are no part of the value as written
        return _PROPERTIES.sub("", self.text[node.start_mark.index:_end(node).index].strip())

    def _find(self, node: yaml.Node | None, parts: tuple[Any, ...]) -> yaml.Node | None:
        i = 0
        while node is not None and i < len(parts):
            part, want_key = parts[i], parts[i + 1:i + 2] == ("[key]",)
            if isinstance(node, yaml.MappingNode):
                found = None
                for k, v in node.value:
                    if k.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self._loader.construct_object(k, deep=True)
                    if type(key) is type(part) and key == part:
                        found = k if want_key else v
                node = found
            elif isinstance(node, yaml.SequenceNode) and type(part) is int and 0 <= part < len(node.value):
                node = node.value[part]
            else:
                return None
            i += 2 if want_key else 1
        return node


def _end(node: yaml.Node) -> Any:
    """Where ``node``'s text ends: a block collection's own end mark lies at the next token,
    past any comment after its last value, so it ends where its last value does."""
    while isinstance(node, yaml.MappingNode | yaml.SequenceNode) and not node.flow_style and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(node, yaml.MappingNode) else last
    return node.end_mark


def _json_pairs(text: str, dups: list[DuplicateKey]) -> Any:
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in pairs:
            if k in out:
                dups.append(DuplicateKey(k, _json_key_lines(text, k)))
            out[k] = v
        return out
    return hook


def _json_key_lines(text: str, key: str) -> tuple[int, ...]:
    """Lines (1-based) where ``"key":`` is written; ``json`` does not report positions of keys,
    so every place the key is written is listed."""
    pat = re.compile(re.escape(json.dumps(key)) + r"\s*:")
    return tuple(text.count("\n", 0, m.start()) + 1 for m in pat.finditer(text))


def load_json(text: str) -> Any:
    """``json.loads`` that raises :class:`DuplicateKeys` listing every repeated object key, or
    :class:`TooLarge` for an integer of more digits than Python converts."""
    dups: list[DuplicateKey] = []
    data = json.loads(text, object_pairs_hook=_json_pairs(text, dups), parse_int=_json_int)
    if dups:
        raise DuplicateKeys(dups)
    return data
