"""The import contracts of docs/architecture.md, checked by reading every module's imports with `ast` (nothing is
imported, so a contract holds whatever optional dependency is installed):

- `petit` never imports Qt (PySide6, PyQt, shiboken) or `app`; only `petit/cli/` imports `trainer`;
- `petit/formats/` knows no model family: it never imports petit.models, petit.loading or petit.model;
- `app` uses the engine only through its public API (APP_API below);
- every import inside `petit` points down the layers (LAYERS below), and petit's import graph has no cycle, counting
  the imports inside functions too (a lazy import hides a circle from Python, not from the reader).
"""
import ast
import functools
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# petit's layers, lowest first: a module may import its own layer and the ones below, never one above. A module that
# fits no prefix fails test_every_petit_module_has_a_layer, so a new one is placed here (and in docs/architecture.md).
LAYERS = (
    ("native", ("petit.native", "petit.assets", "petit._assets")),      # the C boundary; where the bundled files are
    ("formats", ("petit.formats",)),                                    # file readers and writers
    ("models", ("petit.models", "petit.testing_faults", "petit.cache",  # families, the KV cache,
                "petit.tokenizer", "petit.hf", "petit.chat")),          # tokenizers, chat templates and formats
    ("loading", ("petit.loading", "petit.model", "petit.gpu")),         # petit.load, the Model object, the OpenCL offload
    ("generation", ("petit.generation",)),                              # sampling, stop strings, Session
    ("public API", ("petit",)),                         # petit/__init__.py only (load, Model, Sampler...), not below
    ("front ends", ("petit.server", "petit.cli", "petit.__main__")),
)

# what `app` may import from the engine: module -> the names it may take (None: any name the module defines)
APP_API = {
    "petit": {"__version__", "load", "describe", "Model", "Tokenizer", "Sampler", "Session", "Params", "Step", "Stats",
              "generate_tokens", "stream_text", "Embedder"},   # Embedder: the Documents tab's embedding model
    "petit.assets": None,                 # where the bundled model and fonts are
    "petit.chat.formats": None,           # the built-in chat formats (the settings' format list)
    "petit.generation": None,             # the one generation API: Session, Params, Sampler
    "petit.generation.sample": None,      # the sampling defaults the settings show
    "petit.generation.session": None,     # END_OF_TURN
    "petit.generation.grammar": {"GrammarTokenizer", "lark_grammar"},   # a forced tool call (app/tools/formats.py)
    "petit.generation.logits": {"Shaped"},                              # the sampler that keeps to that grammar
    "petit.gpu": {"GpuUnavailable", "attach", "list_devices"},    # the OpenCL devices, the setting's offload
    "petit.native": {"info"},             # the kernel path and thread count, for the status bar
    "petit.server": {"Server"},           # the OpenAI-compatible server, to embed (the Server tab runs a process)
    "petit.server.tools": {"detect", "describe", "forced_call_grammar", "parse", "call_id"},   # the tool-call formats
}
# app imports outside APP_API that are known and scheduled to go, (file, module): why; a waiver no longer needed
# fails the test
APP_WAIVERS: dict[tuple[str, str], str] = {}
QT = ("PySide6", "PyQt5", "PyQt6", "PySide2", "shiboken6", "shiboken2")


def module_files(root: str, package: str) -> dict[str, str]:
    """Every module of a package under root: dotted name -> file path."""
    out = {}
    for folder, dirs, files in os.walk(os.path.join(root, package)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                out[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


class Import:
    """One import: the module it names (a known module where the name resolves to one), the names it takes (a
    `from` import), where it is and whether it runs inside a function."""

    def __init__(self, target: str, names: tuple, path: str, line: int, lazy: bool):
        self.target, self.names, self.path, self.line, self.lazy = target, names, path, line, lazy

    def where(self, root: str) -> str:
        return f"{os.path.relpath(self.path, root)}:{self.line}{' (inside a function)' if self.lazy else ''}"


def imports_of(name: str, path: str, known) -> list[Import]:
    """The imports of one module. `from a import b` names the module a.b when there is one, else a; relative imports
    are resolved; `import a.b` names a.b."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = name.split(".") if path.endswith("__init__.py") else name.split(".")[:-1]
    out = []

    def visit(node, lazy):
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                out.extend(Import(a.name, (), path, child.lineno, lazy) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package[:len(package) - child.level + 1] + ([child.module] if child.module else []))
                plain = [a.name for a in child.names if f"{base}.{a.name}" not in known]
                out.extend(Import(f"{base}.{a.name}", (), path, child.lineno, lazy) for a in child.names
                           if f"{base}.{a.name}" in known)
                if plain:
                    out.append(Import(base, tuple(plain), path, child.lineno, lazy))
            visit(child, inner)
    visit(tree, False)
    return out


@functools.lru_cache(maxsize=None)
def graph(root: str, package: str = "petit") -> tuple[dict, dict]:
    """(modules, imports): every module of the package and its imports, keyed by dotted name."""
    modules = module_files(root, package)
    known = {**module_files(root, "petit"), **module_files(root, "app"), **module_files(root, "trainer"), **modules}
    return modules, {name: imports_of(name, path, known) for name, path in modules.items()}


def layer_of(module: str) -> int | None:
    """The rank in LAYERS of a module of petit (None: not placed); the longest matching prefix decides, and "petit"
    names the package's __init__ only."""
    best, rank = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or (p != "petit" and module.startswith(p + "."))) and len(p) > best:
                best, rank = len(p), i
    return rank


def cycles(modules: dict, imports: dict, lazy: bool = True) -> list[list[str]]:
    """The import circles between the modules (strongly connected components of two or more, or a module that
    imports itself), with or without the imports inside functions."""
    edges = {m: sorted({i.target for i in imports[m] if i.target in modules and (lazy or not i.lazy)})
             for m in modules}
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def connect(v):                     # Tarjan's algorithm, iterative (no recursion limit to meet)
        work = [(v, iter(edges[v]))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(edges[w])))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        part.append(w)
                        if w == node:
                            break
                    if len(part) > 1 or node in edges[node]:
                        found.append(sorted(part))
    for m in modules:
        if m not in index:
            connect(m)
    return found


def _top(name: str) -> str:
    return name.split(".")[0]


# ---------------------------------------------------------------------------------------------------------------


def test_petit_never_imports_qt_or_app_and_only_its_cli_imports_trainer():
    modules, imports = graph(ROOT)
    bad = []
    for m, found in imports.items():
        for i in found:
            if _top(i.target) in QT + ("app",):
                bad.append(f"{i.where(ROOT)} imports {i.target}")
            elif _top(i.target) == "trainer" and not m.startswith("petit.cli."):
                bad.append(f"{i.where(ROOT)} imports {i.target} (only petit/cli/ may import trainer)")
    assert not bad, "\n".join(bad)


def test_file_formats_know_no_model_family():
    modules, imports = graph(ROOT)
    bad = [f"{i.where(ROOT)} imports {i.target}" for m, found in imports.items() if m.startswith("petit.formats")
           for i in found if layer_of(i.target) is not None and i.target.startswith(("petit.models", "petit.loading",
                                                                                          "petit.model"))]
    assert not bad, "petit/formats/ must not know the model families:\n" + "\n".join(bad)


def test_every_petit_module_has_a_layer():
    modules, _ = graph(ROOT)
    unplaced = [m for m in modules if layer_of(m) is None]
    assert not unplaced, f"place these in LAYERS (and docs/architecture.md): {unplaced}"


def test_every_import_inside_petit_points_down():
    modules, imports = graph(ROOT)
    bad = []
    for m, found in imports.items():
        for i in found:
            low, high = layer_of(m), layer_of(i.target)      # an unplaced module fails the test above
            if i.target in modules and None not in (low, high) and high > low:
                bad.append(f"{i.where(ROOT)}: {m} ({LAYERS[low][0]}) imports {i.target} ({LAYERS[high][0]})")
    assert not bad, "imports that point up the layers:\n" + "\n".join(bad)


def test_the_import_graph_of_petit_has_no_cycles():
    modules, imports = graph(ROOT)
    at_import = cycles(modules, imports, lazy=False)
    assert not at_import, f"import circles: {at_import}"
    through_functions = cycles(modules, imports, lazy=True)
    assert not through_functions, f"import circles through imports inside functions: {through_functions}"


def test_app_uses_only_the_public_engine_api():
    app_modules, app_imports = graph(ROOT, "app")
    petit_modules = module_files(ROOT, "petit")
    bad, used_waivers = [], set()
    for m, found in app_imports.items():
        for i in found:
            if _top(i.target) != "petit":
                continue
            key = (os.path.relpath(i.path, ROOT).replace(os.sep, "/"), i.target)
            if key in APP_WAIVERS:
                used_waivers.add(key)
            elif i.target not in APP_API:
                bad.append(f"{i.where(ROOT)} imports {i.target}, which is not the public API")
            elif i.target == "petit" and not i.names:
                pass                                        # `import petit`: its attributes are checked below
            elif APP_API[i.target] is not None and not (i.names and set(i.names) <= APP_API[i.target]):
                bad.append(f"{i.where(ROOT)} takes {sorted(set(i.names) - APP_API[i.target]) or 'the whole module'} "
                           f"from {i.target} (public: {sorted(APP_API[i.target])})")
            assert i.target in petit_modules, f"{i.where(ROOT)} imports {i.target}, which does not exist"
        bad += [f"{os.path.relpath(app_modules[m], ROOT)}:{line}: petit.{attr} is not the public API"
                for line, attr in _petit_attributes(app_modules[m])]
    stale = sorted(set(APP_WAIVERS) - used_waivers)
    assert not bad, "\n".join(bad)
    assert not stale, f"waivers no longer needed, remove them from APP_WAIVERS: {stale}"


def _petit_attributes(path: str):
    """`import petit` then `petit.X`: (line, X) for every X outside the public API that a module of app uses."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    bound = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
             if a.name == "petit"}
    for n in ast.walk(tree):
        if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in bound
                and n.attr not in APP_API["petit"] and f"petit.{n.attr}" not in APP_API):
            yield n.lineno, n.attr


def test_the_checks_find_a_circle_an_upward_import_and_a_family_in_formats(tmp_path):
    # the checks above on a made-up petit: they must see each kind of fault, including inside a function
    files = {
        "petit/__init__.py": "",
        "petit/formats/__init__.py": "",
        "petit/formats/reader.py": "def f():\n    from petit.models import llama\n",
        "petit/models/__init__.py": "",
        "petit/models/llama.py": "from petit.formats import reader\nfrom . import rope\n",
        "petit/models/rope.py": "import petit.models.llama\n",
        "petit/native.py": "from petit.loading import load\n",
        "petit/loading.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    modules, imports = graph(str(tmp_path))
    assert cycles(modules, imports, lazy=False) == [["petit.models.llama", "petit.models.rope"]]
    assert cycles(modules, imports) == [["petit.formats.reader", "petit.models.llama", "petit.models.rope"]]
    lazy = [i for i in imports["petit.formats.reader"] if i.target == "petit.models.llama"]
    assert len(lazy) == 1 and lazy[0].lazy
    up = [(m, i.target) for m, found in imports.items() for i in found
          if i.target in modules and layer_of(i.target) > layer_of(m)]
    assert sorted(up) == [("petit.formats.reader", "petit.models.llama"), ("petit.native", "petit.loading")]


def kinds(root: str) -> dict[str, tuple[dict, dict]]:
    """kind -> (MODEL_TYPES, HELPERS) as petit/models/families/<kind>/__init__.py declares them (read, not imported)."""
    out = {}
    base = os.path.join(root, "petit", "models", "families")
    for kind in sorted(os.listdir(base)):
        init = os.path.join(base, kind, "__init__.py")
        if os.path.isfile(init):
            tables = {t.id: ast.literal_eval(n.value) for n in ast.parse(open(init, encoding="utf-8").read()).body
                      if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
            out[kind] = (tables.get("MODEL_TYPES", {}), tables.get("HELPERS", {}))
    return out


FAMILIES = "petit.models.families."
BLOCKS = "petit.models.blocks"
# the most lines a module under families/ has: a family states what differs from the blocks it builds on, and what it
# holds beyond that (a mixer, a config reader of its own) goes to blocks/ or to a helper module named for it
FAMILY_LINES = 150
# family modules over FAMILY_LINES, module -> why it is not split yet; a waiver no longer needed fails the test
LINE_WAIVERS: dict[str, str] = {}


def test_every_family_module_is_registered_or_a_declared_helper():
    modules, _ = graph(ROOT)
    declared, helpers, owner = {}, {}, {}
    for kind, (types, helps) in kinds(ROOT).items():
        for model_type, module in types.items():
            assert model_type not in owner, f"model_type {model_type!r} is in two kinds: {owner[model_type]}, {kind}"
            owner[model_type] = kind
            declared[f"{FAMILIES}{kind}.{module}"] = kind
        for module, users in helps.items():
            helpers[f"{FAMILIES}{kind}.{module}"] = {f"{FAMILIES}{kind}.{u}" for u in users}
    on_disk = {m for m in modules if m.startswith(FAMILIES) and m.count(".") == 4}
    assert not set(declared) - on_disk, f"registered, no such module: {sorted(set(declared) - on_disk)}"
    assert not set(helpers) - on_disk, f"declared helpers, no such module: {sorted(set(helpers) - on_disk)}"
    assert not set(declared) & set(helpers), f"both a family and a helper: {sorted(set(declared) & set(helpers))}"
    stray = sorted(on_disk - set(declared) - set(helpers))
    assert not stray, f"register these in their kind's MODEL_TYPES or declare them in its HELPERS: {stray}"
    bad_users = {h: sorted(u - set(declared) - set(helpers)) for h, u in helpers.items() if u - set(declared) -
                 set(helpers)}
    assert not bad_users, f"helpers declared for modules that are no family of their kind: {bad_users}"
    folders = {m.rsplit(".", 1)[0] for m in modules if m.startswith(FAMILIES)} - {"petit.models.families"}
    assert folders == {FAMILIES + k for k in kinds(ROOT)}, "every folder under families/ is a kind, one level deep"


def test_families_import_blocks_their_parent_family_and_lower_layers_only():
    # a family imports blocks/, the families it extends (qwen3 from qwen2, a wrapper from its text family: any kind),
    # its own helpers and the layers below the models; never the registry, another family's helper or anything else
    # of the models layer. blocks/ imports no family.
    modules, imports = graph(ROOT)
    helpers, families = {}, set()
    for kind, (types, helps) in kinds(ROOT).items():
        families |= {f"{FAMILIES}{kind}.{m}" for m in types.values()}
        for module, users in helps.items():
            helpers[f"{FAMILIES}{kind}.{module}"] = {f"{FAMILIES}{kind}.{u}" for u in users} | {f"{FAMILIES}{kind}."
                                                                                               f"{module}"}
    models = next(i for i, (name, _) in enumerate(LAYERS) if name == "models")
    bad = []
    for m, found in imports.items():
        if m.startswith(BLOCKS):
            bad += [f"{i.where(ROOT)}: a block imports the family {i.target}" for i in found
                    if i.target.startswith(FAMILIES)]
        if not m.startswith(FAMILIES) or m.count(".") != 4:
            continue
        for i in found:
            t = i.target
            if _top(t) != "petit" or t.startswith(BLOCKS + ".") or t == BLOCKS or t in families:
                continue
            if t in helpers and m in helpers[t] or m in helpers and t in helpers and helpers[m] & helpers[t]:
                continue                                    # its own helper, or a helper of the same family
            if layer_of(t) is not None and layer_of(t) < models:
                continue
            bad.append(f"{i.where(ROOT)}: {m} imports {t}")
    assert not bad, "\n".join(bad)


def test_family_modules_stay_under_the_line_limit():
    modules, _ = graph(ROOT)
    lines = {m: sum(1 for _ in open(p, encoding="utf-8")) for m, p in modules.items() if m.startswith(FAMILIES)}
    over = {m: n for m, n in lines.items() if n > FAMILY_LINES}
    unwaived = sorted(f"{m}: {n} lines" for m, n in over.items() if m.removeprefix(FAMILIES) not in LINE_WAIVERS)
    assert not unwaived, f"over {FAMILY_LINES} lines, split by what the code holds:\n" + "\n".join(unwaived)
    stale = sorted(w for w in LINE_WAIVERS if FAMILIES + w not in over)
    assert not stale, f"waivers no longer needed, remove them from LINE_WAIVERS: {stale}"


def test_opening_a_model_imports_its_own_family_only():
    # the registry imports a family when its model_type is looked up (issue 31: importing all 160 took 0.5-1 s of a
    # 7B GGUF's open); a llama folder brings llama's module and what it builds on, not the others
    import subprocess
    import sys
    code = ("import sys, petit; petit.load(sys.argv[1]); "
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('petit.models.'))))")
    out = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "tests", "fixtures", "hf", "llama")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    tables = {"petit.models.blocks", FAMILIES[:-1]} | {FAMILIES + k for k in kinds(ROOT)}  # docstrings and tables only
    loaded = set(out.stdout.split()) - tables
    f = "petit.models.families."
    assert f + "dense.llama" in loaded and not loaded & {f + "wrappers.gemma4", f + "mla.deepseek_v4",
                                                          f + "hybrid.qwen3_next", f + "recurrent.mamba"}
    assert len(loaded) < 25, sorted(loaded)
