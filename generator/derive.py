"""What a page can say that the code does not spell out: when an error happens in plain words,
the flags and environment variables it names, the docstring around it, and related errors.

Every function here is pure: records and text in, records and text out. `RelatedIndex` keeps
the related-errors ranking whole between builds, updated from the entries of changed blobs.
"""

from __future__ import annotations

import ast
import functools
import heapq
import math
import operator
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import replace
from itertools import repeat

from generator import callgraph, model
from generator.cache import BlobState
from generator.model import (
    Article,
    Curated,
    Family,
    ErrorEntry,
    LedgerRecord,
    ListedError,
    Location,
    Placeholder,
    Related,
    Site,
    Snippet,
    Upstream,
    scope_of,
)

# -- When it happens --------------------------------------------------------------------------

# Objects whose attributes are settings the user controls: `cfg.kv_cache_dtype` is shown as
# `kv_cache_dtype`, which is also the name of the flag.
# Where settings are read from: the server arguments, and the resolution hooks' views of them
# (`arg_groups/model_override_base.py`: `resolved_view(server_args)`, `resolving_view(...)`).
# And, from SGLang 0.5.23's runtime context, the server's arguments (`get_server_args()`) and the
# resolved snapshots of them by area (`get_mm().enable_broadcast_mm_inputs_process`,
# `get_exec().moe.moe_a2a_backend`, with at most one group, a plain word, before the leaf;
# `get_parallel().tp_size`), whose leaves are named as the arguments are: a leaf that is no
# flag's name stays as it is.
_CONTEXT_SETTINGS = (
    r"get_server_args\(\)|get_(?:device|model|exec|schedule|memory|spec|lora|mm|disagg|serving|observability|parallel)\(\)(?:\.[a-z]+)?"
)
_RECEIVERS = (
    r"(?:self\.server_args|self\.config|server_args|get_global_server_args\(\)|global_server_args|cfg|args|self"
    r"|view|resolved_view\(server_args\)|resolving_view\(server_args\)|" + _CONTEXT_SETTINGS + r")\."
)
_SETTINGS_RECEIVERS = re.compile("^" + _RECEIVERS)
_PLATFORMS = {
    "cuda": "CUDA",
    "hip": "ROCm (HIP)",
    "rocm": "ROCm (HIP)",
    "npu": "Ascend NPU",
    "musa": "MUSA",
    "xpu": "Intel XPU",
    "cpu": "CPU",
    "mps": "Apple MPS",
    "hpu": "Gaudi HPU",
    "cuda_alike": "CUDA or ROCm",
}
_PLATFORM_PREDICATE = re.compile(r"^_?is_(?P<name>cuda_alike|cuda|hip|rocm|npu|musa|xpu|cpu|mps|hpu|sm\d+[a-z]*)(?:_supported)?$")
_PLATFORM_RECEIVERS = ("", "get_platform()", "current_platform", "platform", "utils", "torch.version")
_COMPARISONS = {
    ast.Eq: ("is", "is not"),
    ast.NotEq: ("is not", "is"),
    ast.Lt: ("is less than", "is at least"),
    ast.LtE: ("is at most", "is greater than"),
    ast.Gt: ("is greater than", "is at most"),
    ast.GtE: ("is at least", "is less than"),
}


@functools.lru_cache(maxsize=None)
def describe_condition(expr: str, flags: frozenset[str] = frozenset()) -> str:
    """A guard condition in plain words, with names and values as Markdown code spans.

    `cfg.kv_cache_dtype in ("nvfp4", "fp4_mx_block16")` reads "`--kv-cache-dtype` is `nvfp4` or
    `fp4_mx_block16`" when `--kv-cache-dtype` is among `flags` (the server's arguments), else
    "`kv_cache_dtype` is ..."; `not get_platform().is_cuda` reads "the platform is not CUDA";
    `not namespace.model_id` reads "`namespace.model_id` is empty" (None, an empty string or
    list), `not is_ready` "`is_ready` is false". What the rules do not cover is quoted as it
    is: "`expr` is true".
    """
    try:
        node = ast.parse(expr.strip(), mode="eval").body
    except SyntaxError:
        return f"{_code(expr)} is true"
    return _describe(node, True, flags)


def _describe(node: ast.AST, positive: bool, flags: frozenset[str]) -> str:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _describe(node.operand, not positive, flags)
    if isinstance(node, ast.BoolOp):
        # De Morgan, so a negated group reads as a plain list.
        conjunction = isinstance(node.op, ast.And) == positive
        parts = [_describe(value, positive, flags) for value in node.values]
        word = " and " if conjunction else " or "
        nested = [f"({part})" if (" and " in part or " or " in part) else part for part in parts]
        return word.join(nested)
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        return _comparison(node.left, node.ops[0], node.comparators[0], positive, flags)
    platform = _platform(node)
    if platform is not None:
        return f"the platform is {'' if positive else 'not '}{platform}"
    subject = _subject(node, flags)
    if _looks_like_setting(node):
        return f"{subject} is {'set' if positive else 'not set'}"
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)) and not _BOOLEAN_NAME.search(_last_name(node)):
        # A value tested for truth (a string, a list, an object that may be None): what a
        # user reads is whether it was given, not whether it is "false".
        return f"{subject} is {'set' if positive else 'empty'}"
    return f"{subject} is {'true' if positive else 'false'}"


# Names that hold a yes or no, for which "true" and "false" are the words.
_BOOLEAN_NAME = re.compile(
    r"^_*(?:is|are|has|have|had|should|can|could|use|uses|enable|enabled|disable|disabled|allow|support|supports|need|needs|"
    r"skip|force|must|require|requires|with|do|does|did|was|were)(?:_|$)"
    r"|_(?:enabled|disabled|supported|required|needed|allowed|available|valid|ok|done|only|mode|flag)$"
    r"|^_*(?:debug|strict|verbose|training|ready|found|success|ok|valid|done|first|last|overlap)$"
)


def _last_name(node: ast.AST) -> str:
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _subject(node: ast.AST, flags: frozenset[str]) -> str:
    """A name as a code span: a server setting by its flag when `flags` holds it
    (`cfg.kv_cache_dtype` -> `--kv-cache-dtype`), else without its settings receiver."""
    text = _source(node)
    name = _setting(text)
    if name != text and name.isidentifier():
        flag = "--" + name.replace("_", "-")
        if flag in flags:
            return _code(flag)
    return _code(name)


def _comparison(left: ast.AST, op: ast.cmpop, right: ast.AST, positive: bool, flags: frozenset[str]) -> str:
    subject = _subject(left, flags)
    if isinstance(op, (ast.Is, ast.IsNot)) and isinstance(right, ast.Constant) and right.value is None:
        is_none = isinstance(op, ast.Is) == positive
        return f"{subject} is {'not set' if is_none else 'set'}"
    if isinstance(op, (ast.In, ast.NotIn)):
        inside = isinstance(op, ast.In) == positive
        if isinstance(right, (ast.Tuple, ast.List, ast.Set)) and right.elts:
            values = [_value(element, flags) for element in right.elts]
            choices = values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]
            return f"{subject} is {choices}" if inside else f"{subject} is none of {', '.join(values)}"
        return f"{subject} is {'' if inside else 'not '}in {_subject(right, flags)}"
    words = _COMPARISONS.get(type(op))
    if isinstance(op, (ast.Eq, ast.NotEq)) and not isinstance(right, ast.Constant):
        # Two values compared: "is not" would read as Python's identity test.
        words = ("equals", "differs from") if isinstance(op, ast.Eq) else ("differs from", "equals")
    if words is not None:
        return f"{subject} {words[0] if positive else words[1]} {_value(right, flags)}"
    verb = ("is", "is not") if isinstance(op, ast.Is) else ("is not", "is")
    return f"{subject} {verb[0] if positive else verb[1]} {_value(right, flags)}"


def _platform(node: ast.AST) -> str | None:
    """The platform a predicate such as `is_cuda()`, `_is_hip` or `get_platform().is_npu` tests."""
    if isinstance(node, ast.Call) and not node.args:
        node = node.func
    if isinstance(node, ast.Name):
        receiver, name = "", node.id
    elif isinstance(node, ast.Attribute):
        receiver, name = _source(node.value), node.attr
    else:
        return None
    match = _PLATFORM_PREDICATE.match(name)
    if match is None or receiver not in _PLATFORM_RECEIVERS:
        return None
    platform = match["name"]
    if platform.startswith("sm"):
        return f"an {platform.upper()} GPU"
    return _PLATFORMS[platform]


def _looks_like_setting(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and _SETTINGS_RECEIVERS.match(_source(node)) is not None


def _value(node: ast.AST, flags: frozenset[str] = frozenset()) -> str:
    if isinstance(node, ast.Constant) and node.value == "":
        return "empty"
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return _code(node.value)
    return _subject(node, flags)


def _source(node: ast.AST) -> str:
    return ast.unparse(node)


def _setting(text: str) -> str:
    return _SETTINGS_RECEIVERS.sub("", text)


def _code(text: str) -> str:
    """A Markdown code span holding `text` whatever backticks it contains."""
    text = " ".join(text.split())
    fence = "`"
    while fence in text:
        fence += "`"
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def derive_trigger(sites: Site | Sequence[Site], flags: frozenset[str] = frozenset()) -> str | None:
    """When an error is raised, in Markdown, from its sites' code: each place's own guard
    first (the innermost `if` around it, then the ones around that), conditions that only say
    an earlier check above it did not raise folded into one line, the loops and handlers
    around it, and for an assert the check that fails; settings named by their flag when
    `flags` holds it. Every place is described, places in one function with the same
    conditions once. None when the code says nothing beyond "this line ran"."""
    sites = (sites,) if isinstance(sites, Site) else tuple(sites)
    described = {}
    for site in sites:
        key = (site.kind, site.function, site.conditions, site.checks_passed, site.context, site.assert_condition)
        if key not in described:
            described[key] = (site, _trigger_parts(site, flags))
    if len(described) == 1:
        site, parts = next(iter(described.values()))
        return _trigger_text(site, parts)
    lines = [f"It is {_verb(sites[0])} in {len(described)} places:", ""]
    for site, (where, clauses) in described.values():
        place = f"In {_code(site.function)}" if site.function else "At module level"
        place += f" ({_code(site.path.rsplit('/', 1)[-1] + ':' + str(site.line))})"
        if where:
            place += " " + " and ".join(where)
        if clauses:
            place += " when " + "; ".join(clauses)
        elif not where:
            place += ", whenever it runs"
        lines.append(f"- {place}.")
    return "\n".join(lines) + "\n"


def _verb(site: Site) -> str:
    return {"raise": "raised", "assert": "raised", "warning": "issued"}[site.kind]


def _trigger_parts(site: Site, flags: frozenset[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The loops and handlers around a site, and its conditions in words: its own, innermost
    first, then one clause for the earlier checks it comes after."""
    named = functools.partial(_field_named, site.validates)
    own = [describe_condition(named(c), flags) for c in site.own_conditions]
    own.reverse()
    clauses = []
    if site.kind == "assert" and site.assert_condition:
        clauses.append(f"the check {_code(site.assert_condition)} fails, that is {describe_condition(named(f'not ({site.assert_condition})'), flags)}")
    clauses.extend(own)
    if len(site.validates) > 2 and (own or site.assert_condition):
        fields = [_code(field) for field in site.validates[1:]]
        clauses.append(f"{_code(site.validates[0])} is the field {', '.join(fields[:-1])} or {fields[-1]} being validated")
    if site.checks_passed:
        count = len(site.checks_passed)
        clauses.append("the check above it passed" if count == 1 else f"the {count} checks above it passed")
    return tuple(_context(context) for context in site.context), tuple(clauses)


def _field_named(validates: tuple[str, ...], condition: str) -> str:
    """A condition of a pydantic field validator with the value's parameter (`v`) named by the
    one field it validates (`max_tokens`); as it is otherwise."""
    if len(validates) != 2:
        return condition
    parameter, field = validates
    try:
        tree = ast.parse(condition.strip(), mode="eval")
    except SyntaxError:
        return condition
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == parameter:
            node.id = field
    return ast.unparse(tree)


def _trigger_text(site: Site, parts: tuple[tuple[str, ...], tuple[str, ...]]) -> str | None:
    where, clauses = parts
    function = f" in {_code(site.function)}" if site.function else ""
    verb = _verb(site)
    if not clauses:
        if not where:
            return None
        return f"It is {verb}{function} {' and '.join(where)}, whatever the settings."
    lead = f"It is {verb}{function}" + (" " + " and ".join(where) if where else "")
    if len(clauses) == 1:
        return f"{lead} when {clauses[0]}."
    return f"{lead} when all of these hold:\n\n" + "\n".join(f"- {clause}" for clause in clauses) + "\n"


def _context(context: str) -> str:
    head, _, rest = context.partition(" ")
    if head == "for" or head == "async":
        return f"inside the loop {_code(context)}"
    if head == "while":
        return f"inside the loop {_code(context)}"
    if head == "with":
        return f"inside {_code(context)}"
    if head == "except":
        return f"while handling {_code(rest.split(' as ')[0] or 'an exception')}"
    if head == "try":
        return "inside a `try` block"
    return f"inside {_code(context)}"


# -- Names a message mentions -----------------------------------------------------------------

_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
_ENV_VAR = re.compile(
    r"\b(?:SGLANG|SGL|CUDA|NCCL|NVSHMEM|HF|TORCH|PYTORCH|TORCHINDUCTOR|FLASHINFER|MOONCAKE|NIXL|OMP|TRITON|VLLM|ROCM|HIP|MC|UCX)_[A-Z0-9_]*[A-Z0-9]\b"
)


def mentioned_names(
    entry_or_site: ErrorEntry | Site, flags: frozenset[str] = frozenset(), parts: MentionParts | None = None
) -> tuple[str, ...]:
    """The flags and environment variables an error's message names, plus the flags among
    `flags` whose setting its guard conditions test (`cfg.kv_cache_dtype` -> `--kv-cache-dtype`).
    Sorted: flags first, then environment variables. `parts` are the first site's
    `mention_parts` when already known."""
    site = entry_or_site.sites[0] if isinstance(entry_or_site, ErrorEntry) else entry_or_site
    named_flags, variables, candidates = parts or mention_parts(site)
    found = {*named_flags, *variables, *(flag for flag in candidates if flag in flags)}
    return tuple(sorted(found, key=_mention_order))


def _mention_order(name: str) -> tuple[bool, str]:
    """Flags first, then environment variables, each by name."""
    return not name.startswith("--"), name


def _with_setting_flags(named: tuple[str, ...], site: Site, settings: Mapping[str, model.Setting]) -> tuple[str, ...]:
    """`named` and the server's flags a site reads as settings where "When it happens" shows
    the code as it is (`0 <= self.conditioning_cache_max_size_mb < float('inf')`): the
    attributes of settings receivers (`self.`, `server_args.`, `cfg.`) that are flags of the
    page's server, and, in the server's own argument code (`ServerArgs` and `arg_groups/`),
    the field names its message names (`scheduler_rpc_timeout must be ...`)."""
    if not settings:
        return named
    arguments = _in_argument_code(site)
    # Elsewhere `self.dtype` or `cfg.model` are a layer's or a config's, not the server's. Its
    # own conditions only: the earlier checks it comes after name their own flags.
    pattern = _SETTING_ATTRIBUTE if arguments else _SERVER_ARGS_ATTRIBUTE
    names = set(pattern.findall(_code_text(site, site.own_conditions)))
    if arguments:
        names.update(word for word in _IDENTIFIER.findall(_literal_text(site)) if "_" in word.strip("_"))
    return _with_flags(named, {flag for name in names if (flag := "--" + name.replace("_", "-")) in settings})


def _with_trigger_flags(named: tuple[str, ...], trigger: str | None, settings: Mapping[str, model.Setting] | None) -> tuple[str, ...]:
    """`named` and the server's flags that "When it happens" names (`--kv-cache-dtype` for
    `cfg.kv_cache_dtype`, in any of its places, or in a curated text), so that every flag a
    page names is shown with its help."""
    if not trigger or not settings:
        return named
    return _with_flags(named, {flag for flag in _TRIGGER_FLAG.findall(trigger) if flag in settings})


def _with_flags(named: tuple[str, ...], found: set[str]) -> tuple[str, ...]:
    """`named` and `found`, in mention order; `named` itself when `found` adds nothing."""
    if found <= set(named):
        return named
    return tuple(sorted({*named, *found}, key=_mention_order))


_TRIGGER_FLAG = re.compile(r"`(--[A-Za-z0-9][A-Za-z0-9-]*)`")

MentionParts = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]


def mention_parts(site: Site) -> MentionParts:
    """What `mentioned_names` and `known_flags` read of a site: the flags and the environment
    variables its message names, and the flags its conditions' names would be."""
    literal = _literal_text(site)
    return (
        tuple(sorted(set(_named_flags(site)))),
        tuple(sorted(set(_ENV_VAR.findall(literal)))),
        tuple(sorted({"--" + name.replace("_", "-") for name in _setting_names(site)})),
    )


def _literal_text(site: Site) -> str:
    if site.template is None:
        return ""
    return "".join(part for part in site.template.parts if isinstance(part, str))


def _named_flags(site: Site) -> list[str]:
    """The `--flags` a site's message names whole: a flag glued to a value filled in at run
    time (`--dsa-{label}-backend`) is none of the flags its pieces would read as."""
    if site.template is None:
        return []
    parts = site.template.parts
    found = []
    for number, part in enumerate(parts):
        if not isinstance(part, str):
            continue
        before = number > 0 and not isinstance(parts[number - 1], str)
        after = number + 1 < len(parts) and not isinstance(parts[number + 1], str)
        for match in _FLAG.finditer(part):
            if before and match.start() == 0 or after and not part[match.end() :].strip("-"):
                continue
            found.append(match.group())
    return found


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _identifiers(site: Site) -> set[str]:
    """Attribute and variable names a site's conditions and placeholders use."""
    return _names(_IDENTIFIER.findall(_code_text(site)))


def _setting_names(site: Site) -> set[str]:
    """The names in a site's conditions and placeholders that may be the server's settings:
    attributes of the receivers settings are read from (`server_args.`, `cfg.`, `self.`), not
    `namespace.page_size`, which is a field of something else; and in the server's own
    argument code (`_in_argument_code`), bare names, which there are settings read into
    locals. Elsewhere a bare name is a parameter or a local of that code: a kernel's `out` or
    `page_size`, a loader's `config`, never the flag of that name."""
    text = _code_text(site)
    bare = _BARE_NAME.findall(text) if _in_argument_code(site) else ()
    return _names([*bare, *_SETTING_ATTRIBUTE.findall(text)])


def _in_argument_code(site: Site) -> bool:
    """Whether a site is in the server's own argument code: `ServerArgs`, `arg_groups/`, a
    `server_args.py` (the diffusion server's too)."""
    return site.function.startswith("ServerArgs.") or "/arg_groups/" in site.path or site.path.endswith("/server_args.py")


def _code_text(site: Site, conditions: tuple[str, ...] | None = None) -> str:
    """A site's conditions (or `conditions` of its), assert condition and placeholders, without
    string literals (values, not names)."""
    text = " ".join(site.conditions if conditions is None else conditions)
    if site.assert_condition:
        text += " " + site.assert_condition
    if site.template is not None:
        text += " " + " ".join(p.expr for p in site.template.parts if isinstance(p, Placeholder))
    return re.sub(r"(['\"]).*?\1", " ", text)


def _names(found: Iterable[str]) -> set[str]:
    return {name for name in found if len(name) > 2 and name not in _NOT_NAMES}


_BARE_NAME = re.compile(r"(?<![\w.])[A-Za-z_][A-Za-z0-9_]*")
_SETTING_ATTRIBUTE = re.compile(r"(?<![\w.])" + _RECEIVERS + r"([A-Za-z_][A-Za-z0-9_]*)")
# The receivers that are the server's arguments wherever they are read.
_SERVER_ARGS_ATTRIBUTE = re.compile(r"(?<![\w.])(?:self\.server_args|server_args|get_global_server_args\(\)|global_server_args|" + _CONTEXT_SETTINGS + r")\.([A-Za-z_][A-Za-z0-9_]*)")


_NOT_NAMES = frozenset(
    "and or not None True False self cfg args len str int isinstance getattr hasattr server_args "
    "shape dtype ndim size is_contiguous device get_platform stride".split()
)


def known_flags(entries: Iterable[ErrorEntry], parts: Mapping[str, MentionParts] | None = None) -> frozenset[str]:
    """Every `--flag` any message names: the flags upstream's messages teach its users.
    `parts` maps ids to their first site's `mention_parts` when already known."""
    flags: set[str] = set()
    for entry in entries:
        flags.update(parts[entry.id][0] if parts is not None else _named_flags(entry.sites[0]))
    return frozenset(flags)


# -- Related errors ---------------------------------------------------------------------------

# How much sharing one thing says about two errors, before rarity is weighed in. Sharing a
# function means one piece of code checks both; a setting or flag means the same knob the
# user turned; a platform means the same "not supported here" family; words are weakest.
_WEIGHTS = {"function": 3.0, "file": 1.2, "name": 2.0, "platform": 2.0, "word": 1.0, "exception": 0.3}
# A feature shared by more errors than this says too little to rank by, and costs the most.
_MAX_SHARED = 200
# Errors from the page's own file are a click away on its module page; leave room for others.
_SAME_FILE = 2
_WORD = re.compile(r"[a-z][a-z0-9]+")
# Platforms are shared by thousands of errors, yet "not on this platform" is exactly what a
# user at an unsupported combination wants to compare, so they are never dropped as too common.
_ALWAYS_COUNTED = ("platform",)
_STOPWORDS = frozenset(
    """a an the of to in on for and or not is are be been was were with by as at from this that
    it its must should can cannot could only but got expected expect found use using please set
    when than then there no yes if else has have does do did which into out up per all any one
    two support supported unsupported currently yet now also will would may""".split()
)


def entry_features(entry: ErrorEntry) -> dict[str, str]:
    """What an error shares with others, as feature -> kind (one of `_WEIGHTS`'s keys).

    Settings are unified across spellings: `cfg.kv_cache_dtype`, `--kv-cache-dtype` and the
    words "KV cache dtype" in a message are all the feature `name:kv_cache_dtype`.
    """
    site = entry.sites[0]
    features: dict[str, str] = {}
    for member in entry.sites:
        if member.function:
            features[f"function:{member.path}:{member.function}"] = "function"
        features[f"file:{member.path}"] = "file"
    literal = _literal_text(site)
    for name in _identifiers(site):
        stripped = name.lstrip("_")
        platform = _PLATFORM_PREDICATE.match(name) or _PLATFORM_PREDICATE.match("is_" + stripped)
        if platform:
            features["platform"] = "platform"
            features[f"platform:{platform['name']}"] = "platform"
        else:
            features[f"name:{stripped.lower()}"] = "name"
    for flag in _named_flags(site):
        features[f"name:{flag[2:].replace('-', '_')}"] = "name"
    for variable in _ENV_VAR.findall(literal):
        features[f"name:{variable.lower()}"] = "name"
    words = [_stem(word) for word in _WORD.findall(literal.lower().replace("non-", "non"))]
    for first, second, third in zip(words, words[1:], words[2:]):
        features[f"name:{first}_{second}_{third}"] = "name"
    for first, second in zip(words, words[1:]):
        features[f"name:{first}_{second}"] = "name"
    for word in words:
        if word in _PLATFORM_WORDS:
            features["platform"] = "platform"
            features[f"platform:{word.removeprefix('non')}"] = "platform"
        if word not in _STOPWORDS:
            features[f"word:{word}"] = "word"
    if entry.exception:
        features[f"exception:{entry.exception}"] = "exception"
    return features


_PLATFORM_WORDS = frozenset("cuda noncuda hip rocm npu musa xpu mps hpu platform".split())


def _stem(word: str) -> str:
    return word[:-1] if len(word) > 4 and word.endswith("s") and not word.endswith("ss") else word


def related_errors(entries: tuple[ErrorEntry, ...], limit: int = 5) -> dict[str, tuple[str, ...]]:
    """For each error, up to `limit` related error ids, best first.

    Two errors score the sum, over what they share, of the kind's weight times the feature's
    rarity (inverse document frequency), so sharing `kv_cache_dtype` counts for far more than
    sharing the word "size". Only names and words that occur in both count: a phrase such as
    "kv_cache" becomes a name only where some error uses it as one. Ties break by id.
    """
    return RelatedIndex(limit).update(entries, None)


def entry_names(entry: ErrorEntry) -> tuple[str, ...]:
    """The names an error's code and message use as such, as `name:` features: a phrase of a
    message's words is a name only if some error's code or message uses it so."""
    site = entry.sites[0]
    names = {"name:" + name.lstrip("_").lower() for name in _identifiers(site)}
    names.update("name:" + flag[2:].replace("-", "_") for flag in _named_flags(site))
    return tuple(sorted(names))


class RelatedIndex(BlobState):
    """`related_errors` with what it was ranked from, kept between builds: given the blob shas
    the entries came from, an update works out features only for the errors of changed files
    (`model.changed_errors`), and ranks again only the errors that share a feature whose count
    moved; the result is the same as ranking every error.

    Rarity is measured against the error count rounded up to a power of two (`scale`), not the
    count itself, so that adding one error leaves the weight of every feature it lacks as it
    was; when the scale moves, everything is ranked again. An error's features are kept as one
    string (joined by NUL; a feature's kind is the part before its first colon), and postings
    only for the features that weigh something: the state is read and written on every build."""

    def __init__(self, limit: int = 5) -> None:
        self.limit = limit
        self.blobs: dict[str, str] | None = None
        self.scale = 0
        # By id: its own features and its names, each sorted and joined; its paths, joined;
        # the features it is ranked by (names only where some error's code uses them).
        self.own: dict[str, tuple[str, str]] = {}
        self.paths: dict[str, str] = {}
        self.features: dict[str, str] = {}
        # How many errors use each name, and have each feature they are ranked by; for the
        # features that weigh something, which errors.
        self.names: dict[str, int] = {}
        self.frequency: dict[str, int] = {}
        self.postings: dict[str, set[str]] = {}
        self.related: dict[str, tuple[str, ...]] = {}

    def update(self, entries: tuple[ErrorEntry, ...], blobs: Mapping[str, str] | None) -> dict[str, tuple[str, ...]]:
        """Related ids by id for `entries`, extracted from `blobs` (path -> blob sha; None:
        rank everything again)."""
        changed = self.since(entries, blobs)
        scale = 1 << max(len(entries) - 1, 0).bit_length()
        if changed is None or scale != self.scale:
            taken = self.blobs
            self.__init__(self.limit)
            self.scale, self.blobs = scale, taken
            changed = {entry.id for entry in entries}
        # By feature stepped: its count before, and the errors that took or lost it.
        self._was: dict[str, int] = {}
        self._moved: dict[str, set[str]] = {}
        # An error's first file and its scope are part of how others rank it (`_best` keeps few
        # from one file, and lists for an error of the product only errors of the product).
        was_paths = {error: self.paths[error] for error in changed if error in self.paths}
        named = self._take([error for error in changed if error in self.own])
        put = [entry for entry in entries if entry.id in changed]
        named.update(self._put(put))
        # Errors whose ranked features change: those put in, and those holding a name that
        # came into or went out of every error's code.
        again = {entry.id for entry in put}
        flipped = {name for name, used in named.items() if used != (name in self.names)}
        if flipped:
            again.update(error for error, (own, _) in self.own.items() if error not in again and not flipped.isdisjoint(own.split("\0")))
        for error in again:
            self._rank_by(error)
        for entry in put:
            was = was_paths.get(entry.id)
            if was is not None and (was.split("\0", 1)[0] != entry.sites[0].path or _product(was) != _product(self.paths[entry.id])):
                for feature in _split(self.features.get(entry.id, "")):
                    self._was.setdefault(feature, self.frequency[feature])
                    self._moved.setdefault(feature, set()).add(entry.id)
        # An error can rank differently when it shares a feature, weighed now or before, that
        # some error took or lost: found in the postings before those of features no longer
        # weighed go. Not only when the feature's count moved: one error taking it as another
        # loses it leaves the count as it was, and the one that came is a new candidate.
        counted = {
            feature
            for feature, was in self._was.items()
            if self._moved[feature] and (_weighed(feature, was) or _weighed(feature, self.frequency.get(feature, 0)))
        }
        todo = {error for error in again if error in self.features}
        for feature in counted:
            todo.update(self.postings.get(feature, ()))
        self._repost(counted)
        for feature in counted:
            todo.update(self.postings.get(feature, ()))
        for error in self.related.keys() - self.features.keys():
            del self.related[error]
        del self._was, self._moved
        files = {entry.id: entry.sites[0].path for entry in entries}
        weights: dict[str, float | None] = {}
        product = {error for error, paths in self.paths.items() if _product(paths)} if todo else set()
        for error in sorted(todo):
            scores: dict[str, float] = {}
            current = scores.get
            for feature in _split(self.features[error]):
                if feature not in weights:
                    weights[feature] = self._weight(feature)
                value = weights[feature]
                if value is not None:
                    # `scores[other] += value` for each error that has the feature, in C: ten
                    # million of them in a cold build (each key is read before it is written).
                    postings = self.postings[feature]
                    scores.update(zip(postings, map(operator.add, map(current, postings, repeat(0.0)), repeat(value))))
            scores.pop(error, None)
            allowed = product.__contains__ if error in product else None
            self.related[error] = tuple(_best(scores, files, error, self.limit, allowed))
        return {entry.id: self.related[entry.id] for entry in entries}

    def _weight(self, feature: str) -> float | None:
        count = self.frequency[feature]
        if not _weighed(feature, count):
            return None
        return _WEIGHTS[feature.split(":", 1)[0]] * math.log(self.scale / count)

    def _take(self, errors: list[str]) -> dict[str, bool]:
        """Take `errors` out; the names they used, each with whether some error used it before."""
        named: dict[str, bool] = {}
        for error in errors:
            _, names = self.own.pop(error)
            del self.paths[error]
            self._count(error, None)
            for name in _split(names):
                named.setdefault(name, True)
                count = self.names[name] - 1
                if count:
                    self.names[name] = count
                else:
                    del self.names[name]
        return named

    def _put(self, entries: list[ErrorEntry]) -> dict[str, bool]:
        """Put `entries` in, not yet ranked; the names they use, each with whether some error
        used it before."""
        named: dict[str, bool] = {}
        for entry in entries:
            names = entry_names(entry)
            self.own[entry.id] = ("\0".join(sorted(entry_features(entry))), "\0".join(names))
            self.paths[entry.id] = "\0".join(dict.fromkeys(site.path for site in entry.sites))
            for name in names:
                count = self.names.get(name, 0)
                named.setdefault(name, bool(count))
                self.names[name] = count + 1
        return named

    def _rank_by(self, error: str) -> None:
        """The features `error` is ranked by, from its own: names only where some error's code
        uses them."""
        ranked = "\0".join(f for f in _split(self.own[error][0]) if not f.startswith("name:") or f in self.names)
        if self.features.get(error) != ranked:
            self._count(error, ranked)

    def _count(self, error: str, ranked: str | None) -> None:
        """`error` ranked by `ranked` (None: taken out), its features counted anew."""
        for feature in _split(self.features.pop(error, "")):
            self._step(feature, -1, error)
        if ranked is not None:
            self.features[error] = ranked
            for feature in _split(ranked):
                self._step(feature, 1, error)

    def _step(self, feature: str, step: int, error: str) -> None:
        count = self.frequency.get(feature, 0)
        self._was.setdefault(feature, count)
        # Taken out and put back (an entry of a changed file, ranked by the same features), an
        # error has neither taken nor lost the feature.
        self._moved.setdefault(feature, set()).symmetric_difference_update((error,))
        if count + step:
            self.frequency[feature] = count + step
        else:
            del self.frequency[feature]
        found = self.postings.get(feature)
        if found is not None:
            if step > 0:
                found.add(error)
            else:
                found.discard(error)

    def _repost(self, features: set[str]) -> None:
        """Postings for the `features` weighed now, none for those no longer weighed."""
        missing = set()
        for feature in features:
            if not _weighed(feature, self.frequency.get(feature, 0)):
                self.postings.pop(feature, None)
            elif feature not in self.postings:
                missing.add(feature)
                self.postings[feature] = set()
        if missing:
            for error, ranked in self.features.items():
                for feature in missing.intersection(_split(ranked)):
                    self.postings[feature].add(error)


def _split(joined: str) -> list[str]:
    return joined.split("\0") if joined else []


def _weighed(feature: str, count: int) -> bool:
    return 1 < count and (count <= _MAX_SHARED or feature.startswith(_ALWAYS_COUNTED))


def _best(scores: dict[str, float], files: Mapping[str, str], error: str, limit: int, allowed: Callable[[str], bool] | None = None) -> list[str]:
    """The best-scoring ids, ties broken by id, with at most `_SAME_FILE` from the error's own
    file (`files`: each error's first file, by id) so the list reaches beyond one module, and
    only those `allowed` (when given) holds true of."""
    chosen = _pick(_top(scores, limit * 3), files, error, limit, allowed)
    if len(chosen) < limit and len(scores) > limit * 3:
        # The best were crowded out by the error's own file or by errors not allowed: look
        # further, elsewhere.
        others = _top({o: s for o, s in scores.items() if files[o] != files[error] and (allowed is None or allowed(o))}, limit)
        chosen = _pick(sorted(_top({o: scores[o] for o in chosen}, limit) + others), files, error, limit, allowed)
    return chosen


@functools.lru_cache(maxsize=1 << 16)
def _product(paths: str) -> bool:
    """Whether an error raised in `paths` (joined by NUL) is the product's (`model.scope_of`)."""
    return scope_of(paths.split("\0")) == "product"


def _top(scores: dict[str, float], count: int) -> list[tuple[float, str]]:
    """The `count` best (negated score, id) pairs, and any tied with the last of them, ties
    broken by id."""
    if len(scores) <= count:
        return sorted((-score, other) for other, score in scores.items())
    # The cut from the scores alone, taken in C: an error shares features with hundreds.
    cut = heapq.nlargest(count, scores.values())[-1]
    return sorted((-score, other) for other, score in scores.items() if score >= cut)


def _pick(candidates: list[tuple[float, str]], files: Mapping[str, str], error: str, limit: int, allowed: Callable[[str], bool] | None = None) -> list[str]:
    chosen, same_file = [], 0
    for _, other in candidates:
        if allowed is not None and not allowed(other):
            continue
        if files[other] == files[error]:
            if same_file == _SAME_FILE:
                continue
            same_file += 1
        chosen.append(other)
        if len(chosen) == limit:
            break
    return chosen


# -- Joining it all -----------------------------------------------------------------------------


def with_excerpts(article: Article, excerpts: Mapping[tuple[str, int], tuple[Snippet | None, str | None]]) -> Article:
    """`article` with the snippet and docstring of each of its sites, from `excerpts` by the
    site's (path, line)."""
    locations = tuple(
        replace(location, snippet=snippet, docstring=docstring)
        for location in article.locations
        for snippet, docstring in (excerpts.get((location.site.path, location.site.line), (None, None)),)
    )
    return replace(article, locations=locations)


def aliases_of(ledger: Iterable[LedgerRecord]) -> dict[str, tuple[str, ...]]:
    """The ids moved to each id, sorted, by id: what its page lists as its old ids."""
    aliases: dict[str, list[str]] = defaultdict(list)
    for record in ledger:
        if record.status == "moved" and record.moved_to:
            aliases[record.moved_to].append(record.id)
    return {error: tuple(sorted(old)) for error, old in aliases.items()}


def listed_errors(
    entries: tuple[ErrorEntry, ...],
    curated: Mapping[str, Curated],
    ledger: tuple[LedgerRecord, ...] = (),
    routes=None,
) -> tuple[ListedError, ...]:
    """The errors as the lists of errors show them (home and browse pages, the API's index),
    sorted by id: each `derive_articles` article without what only its own page shows."""
    listed = [
        ListedError(
            entry.id, "active", entry.title, entry.kind, entry.exception, entry.message, entry.sites, curated.get(entry.id), None,
            model.error_phase(curated.get(entry.id), (routes.phase((site.path, site.function)) for site in entry.sites) if routes else ()),
        )
        for entry in entries
    ]
    active = {entry.id for entry in entries}
    for record in ledger:
        if record.status != "active" and record.id not in active:
            listed.append(ListedError(record.id, record.status, record_title(record), record.kind, record.exception, None, (), curated.get(record.id), record))
    return tuple(sorted(listed, key=lambda error: error.id))


def record_title(record: LedgerRecord) -> str:
    """What the page of an error no longer raised calls it, as `ErrorEntry.title` called it
    while raised: its message, an assert's condition, or where it was."""
    return record.seen_message or f"{record.exception or 'error'} in {record.function or record.path}"


def derive_articles(
    entries: tuple[ErrorEntry, ...],
    curated: Mapping[str, Curated],
    upstream: Upstream,
    ledger: tuple[LedgerRecord, ...] = (),
    related: Mapping[str, tuple[str, ...]] | None = None,
    stale: Mapping[str, str] | None = None,
    pins: Mapping[str, Upstream] | None = None,
    triggers: Mapping[str, str | None] | None = None,
    mentions: Mapping[str, MentionParts] | None = None,
    flags: frozenset[str] | None = None,
    ids: Collection[str] | None = None,
    settings: model.Servers | None = None,
    families: Mapping[str, Family] | None = None,
    versions: Mapping[str, model.Versions] | None = None,
    routes=None,
) -> tuple[Article, ...]:
    """One article per active error and per retired or moved ledger id, sorted by id, without
    snippets and docstrings (`with_excerpts` adds them to the pages rendered); with `ids`, only
    the articles of those ids.

    `stale` maps an id to the revision its curated text was written for, when the code changed since;
    `pins` maps an id to the upstream revision its page names and links to (the last one at
    which its code changed), `upstream` being used for ids without one; `triggers` maps an id
    to its `derive_trigger` text when already known, `mentions` to its first site's
    `mention_parts`; `flags` are `known_flags` of all the entries when already known;
    `settings` are the command lines' arguments by flag (`flags.servers_of`), shown for those
    named, the diffusion server's on the pages of its code;
    `families` maps an id to the family that explains it (`families.family_of`), shown on the
    page of an error without curated text of its own; `versions` maps an id to the releases
    that raised it (`history.versions_of`); `routes` map a site's (path, function) to its phase
    and callers (`callgraph.Routes`): the server's flags the callers' tests name are shown
    with the others.
    """
    routes = routes or callgraph.Routes({}, {}, {}, {})
    related = related if related is not None else related_errors(entries)
    settings = settings or model.Servers({})
    versions = versions or {}
    stale = stale or {}
    pins = pins or {}
    titles = {entry.id: entry.title for entry in entries}
    flags = flags if flags is not None else known_flags(entries, mentions)
    # One record per error linked to: each is linked from about five pages.
    links: dict[str, Related] = {}
    aliases = aliases_of(ledger)
    articles = []
    for entry in entries:
        if ids is not None and entry.id not in ids:
            continue
        curated_entry = curated.get(entry.id)
        pinned = pins.get(entry.id, upstream)
        locations = tuple(Location(site, pinned.url(site.path, site.line), None, None, routes.get((site.path, site.function))) for site in entry.sites)
        server = settings.of(entry.sites[0].path)
        derived = triggers[entry.id] if triggers is not None and entry.id in triggers else derive_trigger(entry.sites, frozenset(server))
        trigger = curated_entry.trigger if curated_entry and curated_entry.trigger else derived
        articles.append(
            Article(
                id=entry.id,
                status="active",
                title=entry.title,
                kind=entry.kind,
                exception=entry.exception,
                template=entry.template if entry.message is not None else None,
                locations=locations,
                curated=curated_entry,
                trigger=trigger,
                trigger_curated=bool(curated_entry and curated_entry.trigger),
                mentions=(
                    named := _with_trigger_flags(
                        _with_setting_flags(mentioned_names(entry, flags, mentions[entry.id] if mentions is not None else None), entry.sites[0], server),
                        trigger,
                        server,
                    )
                ),
                settings=tuple(server[name] for name in named if name in server)
                + tuple(server[name] for name in routes.flags_of(entry.sites) if name in server and name not in named),
                related=tuple(
                    links.get(other) or links.setdefault(other, Related(other, titles[other])) for other in related.get(entry.id, ())
                ),
                aliases=aliases.get(entry.id, ()),
                stale=stale.get(entry.id),
                upstream=pinned,
                family=families.get(entry.id) if families and curated_entry is None else None,
                versions=versions.get(entry.id),
            )
        )
    active = {entry.id for entry in entries}
    for record in ledger:
        if record.status == "active" or record.id in active or (ids is not None and record.id not in ids):
            continue
        targets = (record.moved_to,) if record.status == "moved" and record.moved_to else record.split_into
        articles.append(
            Article(
                id=record.id,
                status=record.status,
                title=record_title(record),
                kind=record.kind,
                exception=record.exception,
                template=None,
                locations=(),
                curated=curated.get(record.id),
                trigger=None,
                trigger_curated=False,
                mentions=(),
                related=tuple(Related(target, titles.get(target, target)) for target in targets),
                aliases=tuple(sorted(record.aliases)),
                record=record,
                upstream=pins.get(record.id, upstream),
                versions=versions.get(record.id),
            )
        )
    return tuple(sorted(articles, key=lambda article: article.id))
