"""Running part of a chapter: the ``sections`` parameter.

A chapter's code cells fall into sections. A section starts at a cell whose first statement is
``timed("name")`` (the chapter's alias of :meth:`paperlib.core.chapter.Chapter.section`) and runs up to
the next such cell; the cells before the first section (imports, the chapter's opening) and those from
the cell that calls ``chapter.verdicts()`` on (the Verdicts and the provenance) always run.

The chapter's schema declares its sections, in order, as the ``choices`` of its ``sections`` parameter,
and what each one uses from earlier ones as ``needs`` (section -> sections it reads results from), and as
``state_needs`` what it uses through the attributes of an object that an earlier section's method call set
(resnet-beyond-kernels' ``Study``), which its names do not show::

    sections: {type: "list[str]", nullable: true, unique: true, choices: [linear, sweep, summary],
               needs: {summary: [linear, sweep]}, help: ...}

With ``sections`` left ``null`` every cell runs. Given a list, the chapter runs those sections and every
section they need (:func:`closure`); the cells of the others are not executed, and the first cell of each
says so. Their claims are then absent from the ledger, not failed. A control of the chapter runs only the
sections whose claims it targets (:func:`for_claims`), so that it costs what it touches.

:func:`inferred_needs` reads the same dependencies off the notebook's code (which earlier section last
assigns each name a section reads); a unit test holds the declared ``needs`` to it.
"""

from __future__ import annotations

import ast

from paperlib.core.pysource import parse

#: the marker of the closing cells, which always run
VERDICTS_CALL = "verdicts"
MARKER_CALLS = ("timed", "section")


def spec(paper: str) -> dict | None:
    """The schema entry of ``paper``'s ``sections`` parameter, or None when the chapter has none."""
    from paperlib.core import params
    return params.load_schema(paper).get("sections")


def declared(paper: str) -> list[str]:
    """The chapter's sections in order ([] when it declares none)."""
    entry = spec(paper)
    return list(entry["choices"]) if entry else []


def needs(paper: str, state: bool = True) -> dict[str, list[str]]:
    """Section -> the earlier sections it uses: through the names it reads (``needs``) and, unless ``state`` is
    False, through an object's attributes that an earlier section's method call set (``state_needs``)."""
    entry = spec(paper) or {}
    keys = ("needs", "state_needs") if state else ("needs",)
    return {name: [n for key in keys for n in entry.get(key, {}).get(name, [])] for name in entry.get("choices", [])}


def closure(paper: str, requested) -> list[str]:
    """The sections that run when ``requested`` are asked for: those and, transitively, what they need,
    in the chapter's order. ``None`` asks for every section."""
    order = declared(paper)
    if requested is None:
        return order
    graph, todo, chosen = needs(paper), list(requested), set()
    while todo:
        name = todo.pop()
        if name not in chosen:
            chosen.add(name)
            todo.extend(graph.get(name, []))
    return [name for name in order if name in chosen]


def for_claims(paper: str, claim_ids, ledger: dict) -> list[str] | None:
    """The sections that record ``claim_ids`` in ``ledger`` (a run of every section, such as the committed
    smoke reference), in the chapter's order; None when the chapter declares no sections or a claim's
    section is unknown (then the whole chapter must run)."""
    order = declared(paper)
    where = {claim["id"]: claim.get("section") for claim in ledger["claims"]}
    found = {where.get(claim_id) for claim_id in claim_ids}
    if not order or None in found or not found <= set(order):
        return None
    return [name for name in order if name in found]


# ------------------------------------------------------------------ reading cells

def _call_name(node) -> str | None:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        func = node.value.func
        if isinstance(func, ast.Name):
            return func.id
        if isinstance(func, ast.Attribute):
            return func.attr
    return None


def _parse(source: str):
    try:
        return parse(source)
    except SyntaxError:  # IPython syntax the kernel has not yet transformed: not a marker
        return None


def marker(source: str) -> str | None:
    """The section a cell starts (its first statement is ``timed("name")`` or ``chapter.section("name")``),
    :data:`VERDICTS_CALL` for the cell that calls ``chapter.verdicts()``, else None."""
    tree = _parse(source)
    if tree is None or not tree.body:
        return None
    first = tree.body[0]
    if _call_name(first) in MARKER_CALLS:
        args = first.value.args
        if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
            return args[0].value
    if any(_call_name(node) == VERDICTS_CALL for node in tree.body):
        return VERDICTS_CALL
    return None


def split(code_cells: list[str]) -> list[tuple[str | None, list[str]]]:
    """The chapter's code cells grouped as (section, cells); None for the opening cells, which always run."""
    groups: list[tuple[str | None, list[str]]] = [(None, [])]
    for source in code_cells:
        name = marker(source)
        if name is not None:
            groups.append((name, []))
        groups[-1][1].append(source)
    return groups


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
           ast.GeneratorExp)


def _names(node, local: frozenset = frozenset()) -> tuple[set, set]:
    """(global names assigned, global names read) by ``node``: names bound inside a function, lambda or
    comprehension (its arguments, targets and assignments) are local to it."""
    assigned, read = set(), set()
    if isinstance(node, _SCOPES):
        inner = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
        inner |= {a.arg for a in ast.walk(node) if isinstance(a, ast.arg)}
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            assigned.add(node.name)
            for default in node.args.defaults + node.decorator_list:
                read |= _names(default, local)[1]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            children = node.body if isinstance(node.body, list) else [node.body]
        else:
            children = list(ast.iter_child_nodes(node))
        local = local | inner
    else:
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.Name) and node.id not in local:
            (read if isinstance(node.ctx, ast.Load) else assigned).add(node.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id not in local:
            read.add(node.target.id)  # x += 1 reads x before it assigns it
        elif isinstance(node, ast.ClassDef):
            assigned.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            assigned.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    for child in children:
        a, r = _names(child, local)
        assigned |= a
        read |= r
    return assigned, read


def _in_order(statements):
    """(assigned, read) of each simple step of ``statements`` in execution order: the bodies of ``if``,
    ``for``, ``while``, ``with`` and ``try`` statement by statement, a loop's variable before its body."""
    for statement in statements:
        if isinstance(statement, (ast.For, ast.AsyncFor)):
            yield _names(statement.iter)
            yield _names(statement.target)
            yield from _in_order(statement.body + statement.orelse)
        elif isinstance(statement, (ast.If, ast.While)):
            yield _names(statement.test)
            yield from _in_order(statement.body + statement.orelse)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                yield _names(item)
            yield from _in_order(statement.body)
        elif isinstance(statement, ast.Try):
            yield from _in_order(statement.body)
            for handler in statement.handlers:
                yield from _in_order(handler.body)
            yield from _in_order(statement.orelse + statement.finalbody)
        else:
            yield _names(statement)


def inferred_needs(code_cells: list[str]) -> dict[str, set[str]]:
    """For each section (and :data:`VERDICTS_CALL`, the closing cells), the earlier sections whose results
    it reads: for every name a statement reads that the section has not assigned before it (the globals read
    by a function it calls that a cell defines included), the section that assigned it last. Names from the
    opening cells, which always run, are not counted."""
    defined_by: dict[str, str | None] = {}
    found: dict[str, set[str]] = {}
    calls: dict[str, set[str]] = {}  # a function defined in a cell -> the globals its body reads

    def with_callees(read: set) -> set:
        todo, seen = list(read), set(read)
        while todo:
            for more in calls.get(todo.pop(), set()) - seen:
                seen.add(more)
                todo.append(more)
        return seen

    for name, cells in split(code_cells):
        uses, own = set(), set()
        for source in cells:
            tree = _parse(source)
            for node in tree.body if tree is not None else []:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    calls[node.name] = _names(node)[1]
            for assigned, read in _in_order(tree.body if tree is not None else []):
                uses |= {n for n in with_callees(read) - own if defined_by.get(n) not in (None, name)}
                own |= assigned
        if name is not None:
            found[name] = {defined_by[n] for n in uses}
        defined_by.update(dict.fromkeys(own, name))
    return found


def _attribute_flows(module_source: str) -> dict[str, tuple[set, set]]:
    """Method name -> (attributes of ``self`` it sets, those it reads), through the methods it calls on ``self``,
    for every class of ``module_source`` (``__init__`` left out: construction sets them before any section)."""
    direct: dict[str, tuple[set, set, set]] = {}
    for cls in (n for n in ast.walk(parse(module_source)) if isinstance(n, ast.ClassDef)):
        methods = {f.name for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        for f in (f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name != "__init__"):
            sets, reads, calls = set(), set(), set()
            for node in ast.walk(f):
                target = node.value if isinstance(node, ast.Subscript) else node
                if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"):
                    continue
                if isinstance(node.ctx, ast.Store):
                    sets.add(target.attr)
                elif target.attr in methods:
                    calls.add(target.attr)
                else:
                    reads.add(target.attr)
            direct[f.name] = (sets, reads, calls)

    def flows(name, seen):
        if name in seen or name not in direct:
            return set(), set()
        seen.add(name)
        sets, reads, calls = (set(x) for x in direct[name])
        for call in calls:
            more_sets, more_reads = flows(call, seen)
            sets |= more_sets
            reads |= more_reads
        return sets, reads

    return {name: flows(name, set()) for name in direct}


def inferred_state_needs(code_cells: list[str], module_source: str) -> dict[str, set[str]]:
    """For each section, the earlier sections whose method calls set an attribute that this section's method
    calls read (on objects of the classes of ``module_source``, matched by method name)."""
    flows = _attribute_flows(module_source)
    set_by: dict[str, str] = {}
    found: dict[str, set[str]] = {}
    for name, cells in split(code_cells):
        reads, sets = set(), set()
        for source in cells:
            tree = _parse(source)
            for node in ast.walk(tree) if tree is not None else []:
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in flows:
                    sets |= flows[node.func.attr][0]
                    reads |= flows[node.func.attr][1]
        if name is not None:
            found[name] = {set_by[a] for a in reads if set_by.get(a) not in (None, name)}
        set_by.update(dict.fromkeys(sets, name))
    return found


# ------------------------------------------------------------------ skipping cells in the kernel

class SectionFilter:
    """An IPython input transformer: a cell of a section that is not selected becomes a no-op (the first one
    shows a line saying so). Registered by :func:`paperlib.core.chapter.open_chapter` only when ``sections``
    is set, so that a whole run executes its cells untouched."""

    def __init__(self, selected: list[str]):
        self.selected = set(selected)
        self.current: str | None = None

    def __call__(self, lines: list[str]) -> list[str]:
        name = marker("".join(lines))
        if name is not None:
            self.current = name
        if self.current is None or self.current == VERDICTS_CALL or self.current in self.selected:
            return lines
        if name is not None:
            return [f"__import__('paperlib.core.sections', fromlist=['show_skipped']).show_skipped({name!r})\n"]
        return ["pass\n"]


def show_skipped(name: str) -> None:
    from IPython.display import Markdown, display
    display(Markdown(f"*Section `{name}` did not run in this run: the `sections` parameter leaves it out.*"))


_FILTERS: list = []


def install_filter(selected: list[str] | None) -> None:
    """Replace this kernel's section filter: none when ``selected`` is None (every cell runs)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    for old in _FILTERS:
        if old in shell.input_transformers_post:
            shell.input_transformers_post.remove(old)
    _FILTERS.clear()
    if selected is not None:
        new = SectionFilter(selected)
        shell.input_transformers_post.append(new)
        _FILTERS.append(new)
