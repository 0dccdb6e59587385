"""Write src/trainplan/data/framework_models.yaml: which catalog model each torchtune model builder and
each torchtitan model flavor builds, read from the frameworks' source at a pinned commit.

A torchtune training config names its model by a builder function (`_component_: torchtune.models.
llama3_1.lora_llama3_1_8b`), a torchtitan TOML config by `[model] name` and `flavor`. This script parses
the frameworks' source with `ast` (nothing is imported) and, for every builder and flavor, works out the
shapes the model is built with:

* torchtune: every function (and `partial`/alias assignment) in `torchtune/models/*/_model_builders.py`.
  The literal arguments of the component-builder call it returns are read, simple indirections are
  followed (an alias, a `partial`, a builder that returns another builder's call, the decoder of a fusion
  model), an argument the call leaves out takes the component builder's own default, and the values the
  component builder derives from its arguments (`head_dim = embed_dim // num_heads`, `hidden_dim =
  intermediate_dim if intermediate_dim else scale_hidden_dim_for_mlp(embed_dim)`) are evaluated, helper
  functions included, when their code is plain arithmetic. Tied embeddings come from the
  `tie_word_embeddings` argument, or else from whether the component builds a `TiedLinear` head.
  `lora_`/`qlora_` builders wrap the same component builder with the same shape arguments: they are keyed
  under the builder without the prefix, as its variants.
* torchtitan: every flavor of the `model_args` dict each train spec registers (`torchtitan/models/*/
  __init__.py`, the args dataclasses in `model/args.py` supplying the defaults). The FFN width of the
  Llama-style models is computed by torchtitan's own rule (see `ffn_rule` in the output).

Each is compared with every record of the model catalog (data/models.yaml, read through trainplan's own
config reading so that a key a config.json leaves out takes its transformers default): hidden size, layers,
attention heads, key/value heads, intermediate size, vocabulary, head dim, tied embeddings, the LM head's
width, and the MoE and MLA counts where either side has them. `catalog` names the record whose shapes are
all equal, else is null, with `differs` naming the fields that differ from the closest record.

    .venv/bin/python scripts/framework_models.py [--mirrors DIR] [--torchtune-ref REF]
        [--torchtitan-ref REF] [--out PATH]

The mirrors are bare git repositories, `OWNER+NAME/repo` under --mirrors (pytorch+torchtune,
pytorch+torchtitan). torchtitan is read at the last commit that has TOML train configs (the default
--torchtitan-ref); later commits define their flavors as Python config builders instead.
"""

from __future__ import annotations

import argparse
import ast
import operator
import os
import re
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainplan.inputs.architecture_families import GENERIC, ArchitectureFamily, find_architecture_family
from trainplan.inputs.catalogs.models import ModelRecord, model_records
from trainplan.inputs.hf import language_config
from trainplan.inputs.hf.values import flag

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "trainplan" / "data" / "framework_models.yaml"
MIRRORS = Path(os.environ.get("TRAINPLAN_MIRRORS", "mirrors"))  # OWNER+NAME/repo git mirrors
TORCHTUNE_REPO = "pytorch/torchtune"
TORCHTITAN_REPO = "pytorch/torchtitan"
TORCHTUNE_REF = "HEAD"
# The last torchtitan commit whose train configs are TOML files ([model] name / flavor).
TORCHTITAN_REF = "238fa9953e4aec2a62582121564273d7cbb1e9f1"

MAX_DEPTH = 12
VARIANT_PREFIXES = ("qlora_", "lora_")

# torchtune arguments reported as a builder's shapes, in this order.
TUNE_SHAPE_ARGS = (
    "vocab_size", "num_layers", "num_heads", "num_kv_heads", "embed_dim", "intermediate_dim", "hidden_dim",
    "mlp_hidden_dim", "mlp_dim", "head_dim", "tie_word_embeddings", "num_classes", "norm_eps", "max_seq_len",
    "num_experts", "experts_per_token", "use_shared_expert", "moe_every_n_layers", "fusion_interval",
    "num_special_tokens",
)  # fmt: skip
# Names a component builder derives from its arguments in its body.
TUNE_DERIVED = ("head_dim", "hidden_dim", "num_kv_heads", "intermediate_dim")

# torchtitan args fields reported as a flavor's shapes (MoEArgs fields flattened as moe_args.<name>).
TITAN_SHAPE_FIELDS = (
    "dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "head_dim", "multiple_of", "ffn_dim_multiplier",
    "hidden_dim", "inter_dim", "moe_inter_dim", "n_dense_layers", "moe_enabled", "interleave_moe_layer_step",
    "auto_scale_hidden_dim", "enable_weight_tying", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
    "qk_rope_head_dim", "v_head_dim", "norm_eps", "max_seq_len", "hidden_size", "num_heads", "depth",
    "depth_single_blocks", "in_channels", "out_channels", "vec_in_dim", "context_in_dim", "mlp_ratio",
    "axes_dim", "qkv_bias",
)  # fmt: skip
TITAN_MOE_FIELDS = ("num_experts", "num_shared_experts", "top_k")

# Fields compared with the catalog. STRICT ones must agree even when one side lacks them (None: dense, GQA);
# the others are compared only when the catalog gives them.
STRICT = (
    "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
    "vocab_size", "tie_word_embeddings", "output_features", "num_experts", "kv_lora_rank",
    "num_layers", "num_single_layers", "attention_head_dim", "joint_attention_dim", "pooled_projection_dim",
    "in_channels", "guidance_embeds", "axes_dims_rope", "vision_encoder",
)  # fmt: skip
WHERE_GIVEN = (
    "head_dim", "num_experts_per_tok", "moe_intermediate_size", "n_shared_experts", "first_k_dense_replace",
    "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
)  # fmt: skip

Data = dict[str, Any]


# --- Sources ------------------------------------------------------------------------------------------------


def git(git_dir: Path, *args: str) -> str:
    """Run git on a bare repository and return its standard output."""
    done = subprocess.run(
        ["git", "-C", str(git_dir), *args], check=True, capture_output=True, text=True, encoding="utf-8"
    )
    return done.stdout


class GitTree:
    """The files of a bare repository at one commit."""

    def __init__(self, git_dir: Path, ref: str) -> None:
        self.git_dir = git_dir
        self.commit = git(git_dir, "rev-parse", f"{ref}^{{commit}}").strip()
        self.date = git(git_dir, "show", "-s", "--format=%cI", self.commit).strip()
        self.paths = frozenset(git(git_dir, "ls-tree", "-r", "--name-only", self.commit).splitlines())
        self._text: dict[str, str] = {}

    def read(self, path: str) -> str:
        if path not in self._text:
            self._text[path] = git(self.git_dir, "show", f"{self.commit}:{path}")
        return self._text[path]

    def files(self, pattern: str) -> list[str]:
        compiled = re.compile(pattern)
        return sorted(path for path in self.paths if compiled.fullmatch(path))


@dataclass
class Module:
    """One parsed Python module of a tree."""

    name: str
    path: str
    source: str
    tree: ast.Module
    is_package: bool

    def bindings(self, name: str) -> list[ast.stmt]:
        """The top-level statements (also inside top-level try/if blocks) that bind `name`, in order."""
        found: list[ast.stmt] = []
        for stmt in _top_level(self.tree.body):
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                binds = stmt.name == name
            elif isinstance(stmt, ast.Assign):
                binds = any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
            elif isinstance(stmt, ast.AnnAssign):
                binds = (
                    isinstance(stmt.target, ast.Name) and stmt.value is not None and stmt.target.id == name
                )
            elif isinstance(stmt, ast.ImportFrom):
                binds = any((a.asname or a.name) == name for a in stmt.names)
            else:
                binds = False
            if binds:
                found.append(stmt)
        return found


def _top_level(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    for stmt in body:
        if isinstance(stmt, ast.Try):
            yield from _top_level(stmt.body)
        elif isinstance(stmt, ast.If):
            yield from _top_level(stmt.body)
            yield from _top_level(stmt.orelse)
        else:
            yield stmt


@dataclass(frozen=True)
class Definition:
    """What a name is bound to: a function, a class, or a value expression, in its module."""

    kind: str  # "function" | "class" | "value"
    module: Module
    node: ast.AST
    name: str

    @property
    def line(self) -> int:
        return int(getattr(self.node, "lineno", 0))

    @property
    def where(self) -> str:
        return f"{self.module.path}:{self.line}"


class Modules:
    """Module loading and name lookup over one tree."""

    def __init__(self, tree: GitTree) -> None:
        self.tree = tree
        self._cache: dict[str, Module | None] = {}

    def load(self, name: str) -> Module | None:
        if name not in self._cache:
            base = name.replace(".", "/")
            module: Module | None = None
            for path, package in ((f"{base}.py", False), (f"{base}/__init__.py", True)):
                if path in self.tree.paths:
                    source = self.tree.read(path)
                    module = Module(name, path, source, ast.parse(source, filename=path), package)
                    break
            self._cache[name] = module
        return self._cache[name]

    def load_path(self, path: str) -> Module:
        name = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        module = self.load(name)
        if module is None:
            raise FileNotFoundError(path)
        return module

    @staticmethod
    def import_base(module: Module, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        package = module.name if module.is_package else module.name.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        return f"{package}.{node.module}" if node.module else package

    def lookup(self, module: Module, name: str, depth: int = 0) -> Definition | None:
        """What `name` is bound to at the top level of `module`, following imports."""
        if depth > MAX_DEPTH:
            return None
        bindings = module.bindings(name)
        if not bindings:
            return None
        stmt = bindings[-1]
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            return Definition("function", module, stmt, name)
        if isinstance(stmt, ast.ClassDef):
            return Definition("class", module, stmt, name)
        if isinstance(stmt, ast.Assign | ast.AnnAssign):
            assert stmt.value is not None
            node: ast.AST = stmt.value
            ast.copy_location(node, stmt)
            return Definition("value", module, node, name)
        assert isinstance(stmt, ast.ImportFrom)
        alias = next(a for a in stmt.names if (a.asname or a.name) == name)
        base = self.import_base(module, stmt)
        target = self.load(base)
        if target is not None:
            return self.lookup(target, alias.name, depth + 1)
        return None


# --- Static evaluation --------------------------------------------------------------------------------------


class Unresolved(Exception):
    """A value the static reading cannot give; the message says why."""


@dataclass(frozen=True)
class Opaque:
    """A bound name whose value could not be read, kept so that a later use reports why."""

    reason: str


BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}  # fmt: skip
COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_, ast.IsNot: operator.is_not,
}  # fmt: skip
BUILTINS: dict[str, Callable[..., Any]] = {
    "int": int, "float": float, "bool": bool, "min": min, "max": max, "abs": abs, "round": round,
    "len": len, "tuple": tuple, "list": list,
}  # fmt: skip


class Evaluator:
    """Evaluates plain expressions (literals, arithmetic, conditionals, calls of simple helpers and
    dataclass constructors) in a module; anything else raises Unresolved."""

    def __init__(self, modules: Modules) -> None:
        self.modules = modules
        self.helpers: dict[str, str] = {}  # helper name -> where, for the functions interpreted

    def value(self, expr: ast.expr, env: Mapping[str, Any], module: Module, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise Unresolved("too deep")
        here = f"{module.path}:{getattr(expr, 'lineno', '?')}"
        if isinstance(expr, ast.Constant):
            return expr.value
        if isinstance(expr, ast.Name):
            return self.name(expr.id, env, module, depth)
        if isinstance(expr, ast.Tuple | ast.List):
            if any(isinstance(e, ast.Starred) for e in expr.elts):
                raise Unresolved(f"starred item at {here}")
            items = [self.value(e, env, module, depth + 1) for e in expr.elts]
            return tuple(items) if isinstance(expr, ast.Tuple) else items
        if isinstance(expr, ast.Dict):
            if any(k is None for k in expr.keys):
                raise Unresolved(f"`**` in a dict at {here}")
            return {
                self.value(k, env, module, depth + 1): self.value(v, env, module, depth + 1)
                for k, v in zip(expr.keys, expr.values, strict=True)
                if k is not None
            }
        if isinstance(expr, ast.UnaryOp):
            operand = self.value(expr.operand, env, module, depth + 1)
            if isinstance(expr.op, ast.USub):
                return -operand
            if isinstance(expr.op, ast.UAdd):
                return +operand
            if isinstance(expr.op, ast.Not):
                return not operand
            raise Unresolved(f"operator at {here}")
        if isinstance(expr, ast.BinOp):
            op = BINARY.get(type(expr.op))
            if op is None:
                raise Unresolved(f"operator at {here}")
            return op(
                self.value(expr.left, env, module, depth + 1), self.value(expr.right, env, module, depth + 1)
            )
        if isinstance(expr, ast.BoolOp):
            result: Any = None
            for item in expr.values:
                result = self.value(item, env, module, depth + 1)
                if isinstance(expr.op, ast.And) and not result:
                    return result
                if isinstance(expr.op, ast.Or) and result:
                    return result
            return result
        if isinstance(expr, ast.IfExp):
            test = self.value(expr.test, env, module, depth + 1)
            return self.value(expr.body if test else expr.orelse, env, module, depth + 1)
        if isinstance(expr, ast.Compare):
            left = self.value(expr.left, env, module, depth + 1)
            for cmp, right_expr in zip(expr.ops, expr.comparators, strict=True):
                compare = COMPARE.get(type(cmp))
                if compare is None:
                    raise Unresolved(f"comparison at {here}")
                right = self.value(right_expr, env, module, depth + 1)
                if not compare(left, right):
                    return False
                left = right
            return True
        if isinstance(expr, ast.Attribute):
            base = self.value(expr.value, env, module, depth + 1)
            if isinstance(base, dict) and expr.attr in base:
                return base[expr.attr]
            raise Unresolved(f"`{ast.unparse(expr)}` at {here}")
        if isinstance(expr, ast.Subscript):
            base = self.value(expr.value, env, module, depth + 1)
            index = self.value(expr.slice, env, module, depth + 1)
            try:
                return base[index]
            except (KeyError, IndexError, TypeError) as error:
                raise Unresolved(f"`{ast.unparse(expr)}` at {here}") from error
        if isinstance(expr, ast.Call):
            return self.call(expr, env, module, depth)
        raise Unresolved(f"`{ast.unparse(expr)[:60]}` at {here}")

    def name(self, name: str, env: Mapping[str, Any], module: Module, depth: int) -> Any:
        if name in env:
            found = env[name]
            if isinstance(found, Opaque):
                raise Unresolved(found.reason)
            return found
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        definition = self.modules.lookup(module, name)
        if definition is None:
            if name in BUILTINS:
                return BUILTINS[name]
            raise Unresolved(f"`{name}` is not bound in {module.path}")
        if definition.kind == "value":
            assert isinstance(definition.node, ast.expr)
            return self.value(definition.node, {}, definition.module, depth + 1)
        return definition

    def call(self, expr: ast.Call, env: Mapping[str, Any], module: Module, depth: int) -> Any:
        here = f"{module.path}:{expr.lineno}"
        if any(isinstance(a, ast.Starred) for a in expr.args) or any(k.arg is None for k in expr.keywords):
            raise Unresolved(f"`*`/`**` arguments at {here}")
        target = self.value(expr.func, env, module, depth + 1)
        args = [self.value(a, env, module, depth + 1) for a in expr.args]
        kwargs = {str(k.arg): self.value(k.value, env, module, depth + 1) for k in expr.keywords}
        if isinstance(target, Definition):
            if target.kind == "function":
                return self.run(target, args, kwargs, depth + 1)
            if target.kind == "class":
                return self.instantiate(target, args, kwargs, depth + 1)
        if callable(target) and target in BUILTINS.values():
            return target(*args, **kwargs)
        raise Unresolved(f"call of `{ast.unparse(expr.func)}` at {here}")

    def bind(
        self, definition: Definition, args: Sequence[Any], kwargs: Mapping[str, Any], depth: int
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """A function's parameters bound to the given arguments and, for the rest, its defaults; with
        where each value came from ("call", or the default's location)."""
        node = definition.node
        assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        spec = node.args
        positional = [*spec.posonlyargs, *spec.args]
        if len(args) > len(positional) and spec.vararg is None:
            raise Unresolved(f"too many positional arguments for {definition.name} ({definition.where})")
        env: dict[str, Any] = {}
        origin: dict[str, str] = {}
        for param, arg in zip(positional, args, strict=False):
            env[param.arg] = arg
            origin[param.arg] = "call"
        names = {p.arg for p in [*positional, *spec.kwonlyargs]}
        for key, value in kwargs.items():
            if key not in names and spec.kwarg is None:
                raise Unresolved(f"{definition.name} ({definition.where}) takes no argument `{key}`")
            env[key] = value
            origin[key] = "call"
        first_default = len(positional) - len(spec.defaults)
        pairs = [
            (p, spec.defaults[i - first_default] if i >= first_default else None)
            for i, p in enumerate(positional)
        ]
        pairs += list(zip(spec.kwonlyargs, spec.kw_defaults, strict=True))
        for param, default in pairs:
            if param.arg in env:
                continue
            where = f"{definition.module.path}:{param.lineno}"
            if default is None:
                env[param.arg] = Opaque(f"{param.arg}: required argument not given ({where})")
            else:
                try:
                    env[param.arg] = self.value(default, {}, definition.module, depth + 1)
                except Unresolved as error:
                    env[param.arg] = Opaque(f"{param.arg}: default not read ({error})")
            origin[param.arg] = f"default ({where})"
        return env, origin

    def run(self, definition: Definition, args: Sequence[Any], kwargs: Mapping[str, Any], depth: int) -> Any:
        """Interpret a helper function made of assignments, conditionals and a return."""
        if depth > MAX_DEPTH:
            raise Unresolved("too deep")
        env, _ = self.bind(definition, args, kwargs, depth)
        node = definition.node
        assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        self.helpers[definition.name] = definition.where
        done, result = self._block(node.body, env, definition.module, depth)
        if not done:
            return None
        return result

    def _block(
        self, body: Sequence[ast.stmt], env: dict[str, Any], module: Module, depth: int
    ) -> tuple[bool, Any]:
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                env[stmt.targets[0].id] = self.value(stmt.value, env, module, depth + 1)
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value:
                env[stmt.target.id] = self.value(stmt.value, env, module, depth + 1)
            elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
                op = BINARY.get(type(stmt.op))
                if op is None:
                    raise Unresolved(f"operator at {module.path}:{stmt.lineno}")
                current = self.name(stmt.target.id, env, module, depth)
                env[stmt.target.id] = op(current, self.value(stmt.value, env, module, depth + 1))
            elif isinstance(stmt, ast.If):
                branch = stmt.body if self.value(stmt.test, env, module, depth + 1) else stmt.orelse
                done, result = self._block(branch, env, module, depth)
                if done:
                    return True, result
            elif isinstance(stmt, ast.Return):
                return True, None if stmt.value is None else self.value(stmt.value, env, module, depth + 1)
            else:
                raise Unresolved(f"statement not read at {module.path}:{stmt.lineno}")
        return False, None

    def instantiate(
        self, definition: Definition, args: Sequence[Any], kwargs: Mapping[str, Any], depth: int
    ) -> Data:
        """A dataclass built with these arguments: its fields (bases first) with their defaults."""
        fields = self.class_fields(definition, depth)
        names = list(fields)
        built: Data = {}
        for name, (default, _) in fields.items():
            built[name] = default
        for name, arg in zip(names, args, strict=False):
            built[name] = arg
        built.update(kwargs)
        built["__class__"] = definition.name
        built["__where__"] = definition.where
        built["__given__"] = [*names[: len(args)], *kwargs]
        return built

    def class_fields(self, definition: Definition, depth: int) -> dict[str, tuple[Any, int]]:
        """A dataclass's fields -> (default or Opaque, line)."""
        node = definition.node
        assert isinstance(node, ast.ClassDef)
        found: dict[str, tuple[Any, int]] = {}
        for base in node.bases:
            if isinstance(base, ast.Name):
                parent = self.modules.lookup(definition.module, base.id)
                if parent is not None and parent.kind == "class" and depth < MAX_DEPTH:
                    found.update(self.class_fields(parent, depth + 1))
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            name = stmt.target.id
            if stmt.value is None:
                found[name] = (Opaque(f"{name}: required field ({definition.where})"), stmt.lineno)
                continue
            try:
                found[name] = (self.field_default(stmt.value, definition.module, depth), stmt.lineno)
            except Unresolved as error:
                found[name] = (Opaque(f"{name}: default not read ({error})"), stmt.lineno)
        return found

    def field_default(self, value: ast.expr, module: Module, depth: int) -> Any:
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "field":
            for keyword in value.keywords:
                if keyword.arg == "default":
                    return self.value(keyword.value, {}, module, depth + 1)
                if keyword.arg == "default_factory":
                    factory = ast.Call(func=keyword.value, args=[], keywords=[])
                    ast.copy_location(factory, value)
                    return self.value(factory, {}, module, depth + 1)
            raise Unresolved(f"field() without a default at {module.path}:{value.lineno}")
        return self.value(value, {}, module, depth + 1)


def value_or_opaque(evaluator: Evaluator, expr: ast.expr, env: Mapping[str, Any], module: Module) -> Any:
    try:
        return evaluator.value(expr, env, module)
    except Unresolved as error:
        return Opaque(str(error))


def last_return(node: ast.FunctionDef | ast.AsyncFunctionDef) -> ast.Return | None:
    returns = [stmt for stmt in node.body if isinstance(stmt, ast.Return)]
    return returns[-1] if returns else None


def body_statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """A function body's statements, nested blocks included (not nested functions or classes)."""
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        yield stmt
        for name in ("body", "orelse", "finalbody"):
            inner = getattr(stmt, name, None)
            if isinstance(inner, list):
                yield from body_statements(inner)
        for handler in getattr(stmt, "handlers", []) or []:
            yield from body_statements(handler.body)


# --- torchtune ----------------------------------------------------------------------------------------------


@dataclass
class TuneReading:
    """What one torchtune builder builds."""

    source: str
    component: str | None = None
    returns: str | None = None
    env: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, str] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failure: str | None = None
    same_as: str | None = None
    wraps: str | None = None
    fusion: str | None = None


class TorchtuneReader:
    def __init__(self, tree: GitTree) -> None:
        self.tree = tree
        self.modules = Modules(tree)
        self.evaluator = Evaluator(self.modules)

    def builder_files(self) -> list[str]:
        return self.tree.files(r"torchtune/models/[^/]+/_model_builders\.py")

    def builders(self, path: str) -> list[tuple[str, ast.stmt]]:
        """The model builders a _model_builders.py defines: functions, partials and aliases."""
        module = self.modules.load_path(path)
        found: list[tuple[str, ast.stmt]] = []
        for stmt in module.tree.body:
            if isinstance(stmt, ast.FunctionDef):
                returns = ast.unparse(stmt.returns) if stmt.returns else ""
                if stmt.name.startswith("_") or re.search(r"tokenizer|transform", stmt.name, re.I):
                    continue
                if re.search(r"(Tokenizer|Transform)$", returns):
                    continue
                found.append((stmt.name, stmt))
            elif (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and (isinstance(stmt.value, ast.Name) or _is_partial(stmt.value))
            ):
                found.append((stmt.targets[0].id, stmt))
        return found

    def read(self, path: str, name: str, stmt: ast.stmt) -> TuneReading:
        module = self.modules.load_path(path)
        reading = TuneReading(source=f"{path}:{stmt.lineno}")
        if isinstance(stmt, ast.FunctionDef):
            self._model_builder(Definition("function", module, stmt, name), {}, reading)
            return reading
        assert isinstance(stmt, ast.Assign)
        value = stmt.value
        if isinstance(value, ast.Name):
            target = self.modules.lookup(module, value.id)
            reading.same_as = value.id
            if target is None:
                reading.failure = f"`{value.id}` not found"
            else:
                self._definition(target, {}, reading)
            return reading
        assert isinstance(value, ast.Call)
        reading.wraps = ast.unparse(value)
        wrapped = value.args[0] if value.args else None
        target = self.modules.lookup(module, wrapped.id) if isinstance(wrapped, ast.Name) else None
        if target is None:
            reading.failure = f"partial target of `{ast.unparse(value)}` not found"
            return reading
        extra = {str(k.arg): value_or_opaque(self.evaluator, k.value, {}, module) for k in value.keywords}
        self._definition(target, extra, reading)
        return reading

    def _definition(self, definition: Definition, extra: Mapping[str, Any], reading: TuneReading) -> None:
        if definition.kind == "function":
            self._model_builder(definition, extra, reading)
        elif (
            definition.kind == "value"
            and isinstance(definition.node, ast.Call)
            and _is_partial(definition.node)
        ):
            node = definition.node
            inner = node.args[0] if node.args else None
            target = self.modules.lookup(definition.module, inner.id) if isinstance(inner, ast.Name) else None
            if target is None:
                reading.failure = f"partial target at {definition.where} not found"
                return
            more = {
                str(k.arg): value_or_opaque(self.evaluator, k.value, {}, definition.module)
                for k in node.keywords
            }
            self._definition(target, {**more, **extra}, reading)
        elif definition.kind == "value" and isinstance(definition.node, ast.Name):
            target = self.modules.lookup(definition.module, definition.node.id)
            if target is None:
                reading.failure = f"`{definition.node.id}` at {definition.where} not found"
                return
            self._definition(target, extra, reading)
        else:
            reading.failure = f"{definition.name} at {definition.where} is not a builder function"

    def _model_builder(self, definition: Definition, extra: Mapping[str, Any], reading: TuneReading) -> None:
        node = definition.node
        assert isinstance(node, ast.FunctionDef)
        try:
            env, _ = self.evaluator.bind(definition, [], extra, 0)
        except Unresolved as error:
            reading.failure = str(error)
            return
        local_calls: dict[str, ast.Call] = {}
        for stmt in node.body:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                target = stmt.targets[0].id
                try:
                    env[target] = self.evaluator.value(stmt.value, env, definition.module)
                except Unresolved as error:
                    env[target] = Opaque(str(error))
                    if isinstance(stmt.value, ast.Call):
                        local_calls[target] = stmt.value
        returned = last_return(node)
        reading.chain.append(definition.where)
        if returned is None or not isinstance(returned.value, ast.Call):
            reading.failure = f"{definition.name} does not return a builder call ({definition.where})"
            return
        self._follow(returned.value, env, {}, definition.module, local_calls, reading, 0)

    def _follow(
        self,
        call: ast.Call,
        env: Mapping[str, Any],
        origin: Mapping[str, str],
        module: Module,
        local_calls: Mapping[str, ast.Call],
        reading: TuneReading,
        depth: int,
    ) -> None:
        if depth > MAX_DEPTH:
            reading.failure = "builder chain too deep"
            return
        callee = self.modules.lookup(module, call.func.id) if isinstance(call.func, ast.Name) else None
        if callee is None or callee.kind != "function":
            decoder = _argument(call, "decoder", 0)
            shown = ast.unparse(call.func)
            inner = local_calls.get(decoder.id) if isinstance(decoder, ast.Name) else None
            target = (
                self.modules.lookup(module, inner.func.id)
                if inner and isinstance(inner.func, ast.Name)
                else None
            )
            if (
                isinstance(decoder, ast.Name)
                and inner is not None
                and target is not None
                and target.kind == "function"
            ):
                reading.fusion = shown
                reading.notes.append(
                    f"returns {shown}(...): the shapes are its decoder's (encoders and fusion layers are not "
                    "compared; a model with a vision encoder matches no text-only record)"
                )
                self._follow(inner, env, {}, module, {}, reading, depth + 1)
                return
            if inner is not None:
                shown = f"{shown}(...) whose decoder is {ast.unparse(inner.func)}"
            reading.returns = shown
            reading.failure = f"returns {shown} at {module.path}:{call.lineno}, not a component builder"
            return
        args = [value_or_opaque(self.evaluator, a, env, module) for a in call.args]
        kwargs: dict[str, Any] = {}
        for keyword in call.keywords:
            if keyword.arg is None:
                reading.notes.append(
                    f"`**{ast.unparse(keyword.value)}` at {module.path}:{call.lineno} not read"
                )
                continue
            kwargs[keyword.arg] = value_or_opaque(self.evaluator, keyword.value, env, module)
        try:
            new_env, new_origin = self.evaluator.bind(callee, args, kwargs, depth)
        except Unresolved as error:
            reading.failure = str(error)
            return
        # carry a value's origin through a builder that passes its own argument on (smollm2 -> llama3_2)
        passed = {k.arg: k.value for k in call.keywords if k.arg}
        for key, expr in passed.items():
            if isinstance(expr, ast.Name) and expr.id in origin and origin[expr.id] != "call":
                new_origin[key] = origin[expr.id]
        node = callee.node
        assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        reading.chain.append(callee.where)
        returned = last_return(node)
        if (
            returned is not None
            and isinstance(returned.value, ast.Call)
            and isinstance(returned.value.func, ast.Name)
        ):
            then = self.modules.lookup(callee.module, returned.value.func.id)
            if then is not None and then.kind == "function":
                self._follow(returned.value, new_env, new_origin, callee.module, {}, reading, depth + 1)
                return
        self._terminal(callee, new_env, new_origin, reading)

    def _terminal(
        self, callee: Definition, env: dict[str, Any], origin: dict[str, str], reading: TuneReading
    ) -> None:
        node = callee.node
        assert isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        reading.component = callee.where
        reading.env = env
        reading.origin = origin
        reading.returns = ast.unparse(node.returns) if node.returns else None
        params = {a.arg for a in [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]}
        statements = sorted(body_statements(node.body), key=lambda s: s.lineno)
        for stmt in statements:
            if not (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
            ):
                continue
            target = stmt.targets[0].id
            if target not in TUNE_DERIVED:
                continue
            where = f"{callee.module.path}:{stmt.lineno}"
            self.evaluator.helpers.clear()
            try:
                value = self.evaluator.value(stmt.value, env, callee.module)
            except Unresolved as error:
                env[target] = Opaque(f"{where}: {error}")
                continue
            if target in params and env.get(target) == value:
                continue  # `num_kv_heads = num_kv_heads if num_kv_heads else num_heads` with the value given
            names = {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
            same = [n for n in sorted(names & params) if origin.get(n) == "call" and env.get(n) == value]
            if (
                same
            ):  # `hidden_dim = intermediate_dim if intermediate_dim else ...` with intermediate_dim given
                env[target] = value
                origin[target] = f"={same[0]}"
                continue
            text = f"{where}: {ast.unparse(stmt)}"
            helpers = ", ".join(f"{n} at {w}" for n, w in self.evaluator.helpers.items())
            env[target] = value
            origin[target] = f"{text} ({helpers})" if helpers else text
        if "tie_word_embeddings" not in env:
            tied = [
                n
                for n in ast.walk(node)
                if isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1] == "TiedLinear"
            ]
            env["tie_word_embeddings"] = bool(tied)
            origin["tie_word_embeddings"] = (
                f"{callee.module.path}:{tied[0].lineno}: output is a TiedLinear of the token embeddings"
                if tied
                else f"no tie_word_embeddings argument and no TiedLinear in {callee.where}"
            )
        if "num_kv_heads" not in env and "num_heads" in env:
            env["num_kv_heads"] = env["num_heads"]
            origin["num_kv_heads"] = f"no num_kv_heads argument in {callee.where}: multi-head (num_heads)"
        env.setdefault("__params__", sorted(params))


def _is_partial(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and ast.unparse(node.func) in ("partial", "functools.partial")


def _argument(call: ast.Call, name: str, position: int) -> ast.expr | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return call.args[position] if len(call.args) > position else None


def tune_shapes(reading: TuneReading) -> tuple[Data, Data, Data]:
    """(shapes in torchtune's names, where derived values came from, unresolved arguments)."""
    shapes: Data = {}
    derived: Data = {}
    unresolved: Data = {}
    for name in TUNE_SHAPE_ARGS:
        if name not in reading.env:
            continue
        value = reading.env[name]
        if isinstance(value, Opaque):
            shapes[name] = None
            unresolved[name] = value.reason
        else:
            shapes[name] = plain(value)
        how = reading.origin.get(name, "call")
        if how.startswith("="):
            del shapes[name]  # the same value as an argument the call gives
        elif how != "call":
            derived[name] = how
    return shapes, derived, unresolved


def tune_compared(reading: TuneReading) -> Data:
    """A builder's shapes in the catalog's (Hugging Face config) terms."""
    env = reading.env

    def get(name: str) -> Any:
        value = env.get(name)
        return None if isinstance(value, Opaque) else value

    params = set(env.get("__params__", []))
    moe = get("num_experts") is not None and "num_experts" in params
    if (
        "hidden_dim" in reading.origin
        and reading.origin["hidden_dim"] != "call"
        and "hidden_dim" not in params
    ):
        intermediate = get("hidden_dim")  # derived in the body from intermediate_dim
    elif "intermediate_dim" in params:
        intermediate = get("intermediate_dim")
    elif "mlp_dim" in params:
        intermediate = get("mlp_dim")
    elif moe:  # Llama 4: experts of hidden_dim, dense layers (if any) of mlp_hidden_dim
        intermediate = get("mlp_hidden_dim") if get("mlp_hidden_dim") is not None else get("hidden_dim")
    else:
        intermediate = get("hidden_dim")
    embed, heads = get("embed_dim"), get("num_heads")
    head_dim = get("head_dim")
    if head_dim is None and not isinstance(env.get("head_dim"), Opaque) and isinstance(embed, int) and heads:
        head_dim = embed // heads  # torchtune's attention builders: `head_dim or embed_dim // num_heads`
    compared: Data = {
        "hidden_size": embed,
        "num_hidden_layers": get("num_layers"),
        "num_attention_heads": heads,
        "num_key_value_heads": get("num_kv_heads"),
        "intermediate_size": intermediate,
        "vocab_size": get("vocab_size"),
        "head_dim": head_dim,
        "tie_word_embeddings": get("tie_word_embeddings"),
        "num_experts": get("num_experts") if moe else None,
        "kv_lora_rank": None,
        "vision_encoder": reading.fusion is not None,
    }
    if "num_classes" in params:  # a classifier head (reward models) instead of the LM head
        compared["output_features"] = get("num_classes")
    if moe:
        compared["num_experts_per_tok"] = get("experts_per_token")
        compared["moe_intermediate_size"] = get("hidden_dim")
        if "use_shared_expert" in params:
            compared["n_shared_experts"] = 1 if get("use_shared_expert") else 0
    return compared


# --- torchtitan ---------------------------------------------------------------------------------------------

FFN_LINES = (
    "hidden_dim = int(2 * hidden_dim / 3)",
    "hidden_dim = int(ffn_dim_multiplier * hidden_dim)",
    "hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)",
    "hidden_dim=4 * model_args.dim",
)
MOE_FFN_LINES = (
    "hidden_dim = 4 * model_args.dim",
    "hidden_dim_denom = moe_args.top_k + moe_args.num_shared_experts",
    "hidden_dim = int(hidden_dim / hidden_dim_denom)",
    "hidden_dim += -hidden_dim % model_args.multiple_of",
)


def ffn_hidden(dim: int, multiple_of: int, ffn_dim_multiplier: float | None) -> int:
    """torchtitan's dense FFN width (FeedForward.__init__, called with hidden_dim=4 * dim): two thirds of
    4 * dim, times ffn_dim_multiplier when set, rounded up to a multiple of multiple_of."""
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def moe_ffn_hidden(
    dim: int, multiple_of: int, ffn_dim_multiplier: float | None, denominator: int | None
) -> int:
    """torchtitan Llama 4's expert width (TransformerBlock.__init__): the dense rule's two thirds of 4 * dim
    and multiplier, divided by top_k + num_shared_experts when auto_scale_hidden_dim, then rounded up."""
    hidden = int(2 * (4 * dim) / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    if denominator:
        hidden = int(hidden / denominator)
    return hidden + (-hidden % multiple_of)


def find_lines(source: str, texts: Sequence[str]) -> list[int] | None:
    """The line of each text in the source (its first occurrence), or None if one is missing."""
    lines = source.splitlines()
    found: list[int] = []
    for text in texts:
        number = next((i + 1 for i, line in enumerate(lines) if text in line), None)
        if number is None:
            return None
        found.append(number)
    return found


@dataclass
class TitanSpec:
    """One registered train spec: its flavors dict, or the spec whose flavors it reuses."""

    name: str
    path: str
    flavors: dict[str, tuple[Any, int]] = field(default_factory=dict)
    same_as: str | None = None
    failure: str | None = None
    model_source: str | None = None
    model_path: str | None = None
    dict_where: str | None = None


class TorchtitanReader:
    def __init__(self, tree: GitTree) -> None:
        self.tree = tree
        self.modules = Modules(tree)
        self.evaluator = Evaluator(self.modules)

    def spec_names(self) -> list[tuple[str, str]]:
        """(train-spec name, package) for every registered model and experiment."""
        found: list[tuple[str, str]] = []
        for package, variable in (
            ("torchtitan.models", "_supported_models"),
            ("torchtitan.experiments", "_supported_experiments"),
        ):
            module = self.modules.load(package)
            if module is None:
                continue
            definition = self.modules.lookup(module, variable)
            if definition is None or not isinstance(definition.node, ast.Call) or not definition.node.args:
                continue
            names = self.evaluator.value(definition.node.args[0], {}, module)
            found.extend((str(name), f"{package}.{name}") for name in sorted(names))
        return found

    def spec(self, name: str, package: str) -> TitanSpec:
        module = self.modules.load(package)
        if module is None:
            return TitanSpec(name, package, failure=f"{package} not found")
        spec = TitanSpec(name, module.path)
        getter = self.modules.lookup(module, "get_train_spec")
        if getter is None or getter.kind != "function":
            spec.failure = f"no get_train_spec in {module.path}"
            return spec
        calls = [
            n
            for n in ast.walk(getter.node)
            if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("TrainSpec")
        ]
        if not calls:
            spec.failure = f"no TrainSpec(...) in {getter.where}"
            return spec
        args = _argument(calls[0], "model_args", 99)
        model_cls = _argument(calls[0], "model_cls", 99)
        if isinstance(model_cls, ast.Name):
            model_def = self.modules.lookup(module, model_cls.id)
            if model_def is not None:
                spec.model_source = model_def.module.source
                spec.model_path = model_def.module.path
        if not isinstance(args, ast.Name):
            spec.failure = f"model_args is `{ast.unparse(args) if args else None}` ({getter.where})"
            return spec
        local = [
            s
            for s in body_statements(getattr(getter.node, "body", []))
            if isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == args.id for t in s.targets)
        ]
        if local:
            spec.failure = (
                f"model_args is computed in get_train_spec ({module.path}:{local[0].lineno}: "
                f"{ast.unparse(local[0])[:100]})"
            )
            return spec
        definition = self.modules.lookup(module, args.id)
        if definition is None or definition.kind != "value" or not isinstance(definition.node, ast.Dict):
            spec.failure = f"model_args `{args.id}` is not a dict literal"
            return spec
        if definition.module.path != module.path:
            spec.same_as = definition.module.path
            return spec
        spec.dict_where = definition.where
        for key, value in zip(definition.node.keys, definition.node.values, strict=True):
            if not isinstance(key, ast.Constant):
                continue
            try:
                flavor: Any = self.evaluator.value(value, {}, module)
            except Unresolved as error:
                flavor = Opaque(str(error))
            spec.flavors[str(key.value)] = (flavor, value.lineno)
        return spec


def titan_shapes(spec: TitanSpec, args: Data) -> tuple[Data, Data, Data, Data]:
    """(shapes in torchtitan's names, where derived values came from, unresolved fields, shapes in the
    catalog's terms) of one flavor."""
    given = set(args.get("__given__", []))
    shapes: Data = {}
    derived: Data = {}
    unresolved: Data = {}
    moe_args = args.get("moe_args")
    moe_on = isinstance(moe_args, dict) and bool(args.get("moe_enabled", True))
    for name in TITAN_SHAPE_FIELDS:
        if name.startswith("moe_inter") and not moe_on:
            continue
        if name in args:
            value = args[name]
            shapes[name] = None if isinstance(value, Opaque) else plain(value)
            if isinstance(value, Opaque):
                unresolved[name] = value.reason
    if moe_on and isinstance(moe_args, dict):
        for name in TITAN_MOE_FIELDS:
            shapes[f"moe_args.{name}"] = plain(moe_args.get(name))
    defaults = sorted(
        n for n in shapes if n.split(".")[0] not in given and n not in ("max_seq_len", "norm_eps")
    )
    if defaults:
        derived["defaults"] = f"{', '.join(defaults)} from {args.get('__class__')} ({args.get('__where__')})"

    def get(name: str) -> Any:
        value = args.get(name)
        return None if isinstance(value, Opaque) else value

    model_source = spec.model_source or ""
    model_path = spec.model_path or "?"
    if "depth_single_blocks" in args:  # FLUX
        guidance = bool(re.search(r"guidance_in|guidance_embed", model_source))
        if not guidance:
            derived["guidance_embeds"] = f"False: {model_path} builds no guidance embedder"
        hidden, heads = get("hidden_size"), get("num_heads")
        axes = get("axes_dim")
        compared: Data = {
            "num_attention_heads": heads,
            "attention_head_dim": hidden // heads if isinstance(hidden, int) and heads else None,
            "num_layers": get("depth"),
            "num_single_layers": get("depth_single_blocks"),
            "joint_attention_dim": get("context_in_dim"),
            "pooled_projection_dim": get("vec_in_dim"),
            "in_channels": get("in_channels"),
            "guidance_embeds": None if guidance else False,
            "axes_dims_rope": list(axes) if isinstance(axes, tuple | list) else None,
        }
        if guidance:
            unresolved["guidance_embeds"] = f"{model_path} mentions guidance; not read"
        return shapes, derived, unresolved, compared

    dim, heads = get("dim"), get("n_heads")
    intermediate: Any = None
    if "hidden_dim" in args:
        intermediate = get("hidden_dim")
    elif "inter_dim" in args:
        intermediate = get("inter_dim")
    elif "multiple_of" in args:
        lines = find_lines(model_source, FFN_LINES)
        if lines is None or not isinstance(dim, int):
            unresolved["ffn_hidden_dim"] = f"the FFN rule's code was not found in {model_path}"
        else:
            intermediate = ffn_hidden(dim, int(get("multiple_of")), get("ffn_dim_multiplier"))
            shapes["ffn_hidden_dim"] = intermediate
            derived["ffn_hidden_dim"] = (
                f"int(2 * 4 * dim / 3), times ffn_dim_multiplier, rounded up to multiple_of "
                f"({model_path}:{lines[0]}-{lines[2]}, hidden_dim=4 * dim at :{lines[3]})"
            )
    elif moe_on and "moe_inter_dim" in args:
        intermediate = get("moe_inter_dim")  # every layer is MoE (gpt-oss): the expert width
    else:
        unresolved["intermediate_size"] = "no FFN width field"
    moe_intermediate: Any = get("moe_inter_dim")
    if moe_on and moe_intermediate is None and "multiple_of" in args and isinstance(dim, int):
        lines = find_lines(model_source, MOE_FFN_LINES)
        assert isinstance(moe_args, dict)
        if lines is None:
            unresolved["moe_hidden_dim"] = f"the MoE FFN rule's code was not found in {model_path}"
        else:
            denominator = (
                int(moe_args.get("top_k", 1)) + int(moe_args.get("num_shared_experts", 0))
                if get("auto_scale_hidden_dim")
                else None
            )
            moe_intermediate = moe_ffn_hidden(
                dim, int(get("multiple_of")), get("ffn_dim_multiplier"), denominator
            )
            shapes["moe_hidden_dim"] = moe_intermediate
            derived["moe_hidden_dim"] = (
                "int(2 * 4 * dim / 3), times ffn_dim_multiplier, divided by top_k + num_shared_experts when "
                f"auto_scale_hidden_dim, rounded up to multiple_of ({model_path}:{lines[0]}-{lines[3]})"
            )
    if "enable_weight_tying" in args:
        tied: Any = get("enable_weight_tying")
    elif "tok_embeddings.weight" in model_source and re.search(
        r"output\.weight\s*=\s*self\.tok_embeddings", model_source
    ):
        tied = None
        unresolved["tie_word_embeddings"] = (
            f"{model_path} ties the output to the embeddings under a condition"
        )
    else:
        tied = False
        derived["tie_word_embeddings"] = (
            f"False: no weight-tying field; {model_path} builds a separate output"
        )
    mla = get("kv_lora_rank") is not None and "qk_rope_head_dim" in args
    kv_heads = get("n_kv_heads")
    if (kv_heads is None and "n_kv_heads" not in args) or mla:
        kv_heads = heads  # MLA, or a model without GQA: every head has its keys and values
    elif kv_heads is None:
        kv_heads = heads
        derived["n_kv_heads"] = "None: the attention uses n_heads"
    head_dim = get("head_dim")
    if head_dim is None and not mla and isinstance(dim, int) and isinstance(heads, int) and heads:
        head_dim = dim // heads
    compared = {
        "hidden_size": dim,
        "num_hidden_layers": get("n_layers"),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "intermediate_size": intermediate,
        "vocab_size": get("vocab_size"),
        "tie_word_embeddings": tied,
        "num_experts": moe_args.get("num_experts") if moe_on and isinstance(moe_args, dict) else None,
        "kv_lora_rank": get("kv_lora_rank") if mla else None,
        "vision_encoder": False,
    }
    if not mla:
        compared["head_dim"] = head_dim
    if moe_on and isinstance(moe_args, dict):
        compared["num_experts_per_tok"] = moe_args.get("top_k")
        compared["moe_intermediate_size"] = moe_intermediate
        compared["n_shared_experts"] = moe_args.get("num_shared_experts")
        if "n_dense_layers" in args:
            compared["first_k_dense_replace"] = get("n_dense_layers")
    if mla:
        q_rank = get("q_lora_rank")
        compared["q_lora_rank"] = q_rank or None
        for name in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            compared[name] = get(name)
    return shapes, derived, unresolved, compared


# --- The catalog --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CatalogModel:
    record: ModelRecord
    shapes: Data
    norm_eps: Any
    max_positions: Any

    @property
    def kind(self) -> str:
        """ "flux", "text" (a model with a decoder's keys) or "other"."""
        if "num_single_layers" in self.shapes:
            return "flux"
        return "text" if self.shapes.get("hidden_size") and self.shapes.get("num_hidden_layers") else "other"


def catalog_models() -> list[CatalogModel]:
    models: list[CatalogModel] = []
    for record in model_records():
        cfg = record.config
        if cfg.get("_class_name") == "FluxTransformer2DModel":
            shapes = {
                key: (list(cfg[key]) if isinstance(cfg.get(key), list | tuple) else cfg.get(key))
                for key in (
                    "num_attention_heads", "attention_head_dim", "num_layers", "num_single_layers",
                    "joint_attention_dim", "pooled_projection_dim", "in_channels", "guidance_embeds",
                    "axes_dims_rope",
                )
            }  # fmt: skip
            models.append(CatalogModel(record, shapes, None, None))
            continue
        text = language_config(cfg)
        family: ArchitectureFamily = find_architecture_family(str(text.get("model_type", ""))) or GENERIC

        def first(name: str, text: Mapping[str, Any] = text, family: ArchitectureFamily = family) -> Any:
            return next((text[k] for k in family.key(name) if text.get(k) is not None), None)

        hidden, heads = first("hidden_size"), first("num_heads")
        head_dim = text.get("head_dim")
        if head_dim is None and isinstance(hidden, int) and isinstance(heads, int) and heads:
            head_dim = hidden // heads
        experts = next(
            (text[k] for k in ("num_local_experts", "num_experts", "n_routed_experts") if text.get(k)), None
        )
        vocab = first("vocab_size")
        shapes = {
            "hidden_size": hidden,
            "num_hidden_layers": first("num_layers"),
            "num_attention_heads": heads,
            "num_key_value_heads": first("num_kv_heads") or heads,
            "intermediate_size": first("intermediate_size"),
            "vocab_size": vocab,
            "head_dim": head_dim,
            "tie_word_embeddings": flag(family, "tied", text, bool(text.get("tie_word_embeddings", False))),
            "output_features": vocab,
            "num_experts": experts,
            "num_experts_per_tok": text.get("num_experts_per_tok") if experts else None,
            "moe_intermediate_size": text.get("moe_intermediate_size") if experts else None,
            "n_shared_experts": text.get("n_shared_experts") if experts else None,
            "first_k_dense_replace": text.get("first_k_dense_replace") if experts else None,
            "kv_lora_rank": text.get("kv_lora_rank"),
            "q_lora_rank": text.get("q_lora_rank"),
            "qk_nope_head_dim": text.get("qk_nope_head_dim"),
            "qk_rope_head_dim": text.get("qk_rope_head_dim"),
            "v_head_dim": text.get("v_head_dim"),
            "vision_encoder": bool(cfg.get("vision_config")),
        }
        norm_eps = next(
            (text[k] for k in ("rms_norm_eps", "layer_norm_eps", "layer_norm_epsilon") if k in text), None
        )
        models.append(CatalogModel(record, shapes, norm_eps, text.get("max_position_embeddings")))
    return models


def mismatches(
    framework: Mapping[str, Any], catalog: Mapping[str, Any], role: str
) -> list[tuple[str, Any, Any]]:
    """(field, framework value, catalog value) for every compared field that differs."""
    found: list[tuple[str, Any, Any]] = []
    for key, mine in framework.items():
        theirs = catalog.get(key)
        if key in WHERE_GIVEN and (theirs is None or mine is None) and key != "head_dim":
            continue
        if key == "head_dim" and theirs is None:
            continue
        if key not in STRICT and key not in WHERE_GIVEN:
            continue
        if mine is None and key in STRICT and key not in ("num_experts", "kv_lora_rank", "guidance_embeds"):
            found.append((key, "unresolved", theirs))
        elif mine != theirs:
            found.append((key, mine, theirs))
    del role
    return found


def _distance(differences: Sequence[tuple[str, Any, Any]]) -> float:
    total = 0.0
    for _, mine, theirs in differences:
        if isinstance(mine, int | float) and isinstance(theirs, int | float) and not isinstance(mine, bool):
            total += abs(mine - theirs) / max(abs(mine), abs(theirs), 1)
        else:
            total += 1.0
    return total


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def family_hint(family: str, model: CatalogModel) -> bool:
    """Whether a framework's model family (torchtune's model folder, torchtitan's spec name) names this
    catalog record: the record's name starts with it, or its model_type is it."""
    hint = _norm(family)
    model_type = _norm(str(model.record.config.get("model_type", "")))
    return bool(hint) and (_norm(model.record.name).startswith(hint) or model_type == hint)


def show(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def match(compared: Data, family: str, catalog: Sequence[CatalogModel], role: str) -> Data:
    """The catalog record these shapes are exactly, else the closest one and what differs."""
    kind = "flux" if "num_single_layers" in compared else "text"
    candidates = [model for model in catalog if model.kind == kind] or list(catalog)
    scored = []
    for index, model in enumerate(candidates):
        differences = mismatches(compared, model.shapes, role)
        hint = 0 if family_hint(family, model) else 1
        scored.append((len(differences), hint, _distance(differences), index, model, differences))
    scored.sort(key=lambda item: item[:4])
    best = scored[0]
    result: Data = {}
    if best[0] == 0:
        result["catalog"] = best[4].record.name
        others = [item[4].record.name for item in scored[1:] if item[0] == 0]
        if others:
            result["also_matches"] = others
    else:
        result["catalog"] = None
        text = "; ".join(
            f"{key}: {role} {show(mine)} vs catalog {show(theirs)}" for key, mine, theirs in best[5]
        )
        result["differs"] = f"{text} (closest {best[4].record.name})"
        result["closest"] = best[4].record.name
    result["_model"] = best[4]
    return result


# --- Output -------------------------------------------------------------------------------------------------


class Flow(dict[str, Any]):
    """A mapping written on one line."""


class Dumper(yaml.SafeDumper):
    pass


def _flow(dumper: yaml.SafeDumper, data: Flow) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=True)


Dumper.add_representer(Flow, _flow)


def plain(value: Any) -> Any:
    """A value as YAML can hold it: tuples as lists, dataclass readings without their bookkeeping keys."""
    if isinstance(value, tuple | list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items() if not str(k).startswith("__")}
    if isinstance(value, Opaque):
        return None
    if isinstance(value, Definition):
        return f"<{value.name}>"
    return value


HEADER = """\
# Which catalog model (data/models.yaml) each training framework's model names build, read from the
# frameworks' source at the pinned commits below by parsing it with Python's ast (nothing is imported).
#
# torchtune.builders: one entry per model builder of torchtune/models/*/_model_builders.py, keyed by its
# name without the `lora_`/`qlora_` prefix (`model._component_: torchtune.models.llama3_1.lora_llama3_1_8b`
# is builders.llama3_1_8b); `variants` lists the LoRA/QLoRA builders, which wrap the same component builder
# with the same shape arguments. torchtitan.flavors: one entry per `[model] name` / `flavor` of a train
# spec's model_args dict, keyed "name/flavor"; `train_specs` names the specs that reuse another's dict.
#
# catalog     the catalog record whose shapes are exactly these (hidden size, layers, heads, key/value heads,
#             intermediate size, vocabulary, head dim, tied embeddings, LM head width, MoE and MLA counts),
#             or null; `also_matches` lists other records with the same shapes.
# differs     (catalog null) the fields that differ from the closest record, `closest`.
# source      where the builder or flavor is defined; `component` the component builder that builds it.
# shapes      the values it is built with, in the framework's own argument names; `derived` says where a
#             value not given literally came from (a component builder's default, a value it computes, the
#             args dataclass default, torchtitan's FFN rule); `unresolved` the arguments not read, and why.
# other_differences  (matched entries) settings that are not shapes but differ from the catalog config.
#
# Regenerate (needs the git mirrors, OWNER+NAME/repo, under --mirrors):
#   .venv/bin/python scripts/framework_models.py --mirrors DIR
"""


def torchtune_section(tree: GitTree, catalog: Sequence[CatalogModel]) -> Data:
    reader = TorchtuneReader(tree)
    readings: dict[str, tuple[str, TuneReading]] = {}
    for path in reader.builder_files():
        for name, stmt in reader.builders(path):
            readings[name] = (path.split("/")[2], reader.read(path, name, stmt))
    entries: dict[str, Data] = {}
    variants: dict[str, Data] = {}
    for name, (family, reading) in readings.items():
        prefix = next((p for p in VARIANT_PREFIXES if name.startswith(p)), "")
        base = name.removeprefix(prefix)
        if prefix and base in readings:
            variants.setdefault(base, {})[prefix.rstrip("_")] = _variant(name, reading, readings[base][1])
            continue
        entries[base] = _tune_entry(name, family, reading, catalog)
    for base, found in variants.items():
        entries[base]["variants"] = found
    return {
        "repo": TORCHTUNE_REPO,
        "commit": tree.commit,
        "commit_date": tree.date,
        "files": "torchtune/models/*/_model_builders.py",
        "prefixes": {
            "lora_": "LoRA builder: the same component builder's LoRA form, with the same shape arguments",
            "qlora_": "partial(lora_..., quantize_base=True): LoRA on NF4-quantised base weights",
        },
        "builders": entries,
    }


def _tune_entry(name: str, family: str, reading: TuneReading, catalog: Sequence[CatalogModel]) -> Data:
    entry: Data = {}
    if reading.failure and not reading.component:
        entry["catalog"] = None
        entry["source"] = reading.source
        entry["unresolved"] = {"builder": reading.failure}
        if reading.notes:
            entry["notes"] = reading.notes
        return entry
    compared = tune_compared(reading)
    found = match(compared, family, catalog, "builder")
    model: CatalogModel = found.pop("_model")
    entry["catalog"] = found["catalog"]
    entry["source"] = reading.source
    if reading.same_as:
        entry["same_as"] = reading.same_as
    if reading.wraps:
        entry["wraps"] = reading.wraps
    entry["component"] = reading.component
    if reading.returns and reading.returns != "TransformerDecoder":
        entry["returns"] = reading.returns
    shapes, derived, unresolved = tune_shapes(reading)
    if compared["intermediate_size"] is None and "intermediate_dim" not in unresolved:
        unresolved["intermediate_size"] = (
            f"no intermediate_dim, hidden_dim or mlp_dim argument in {reading.component}"
        )
    entry["shapes"] = Flow(shapes)
    if derived:
        entry["derived"] = derived
    if unresolved or reading.failure:
        entry["unresolved"] = {**unresolved, **({"builder": reading.failure} if reading.failure else {})}
    for key in ("also_matches", "differs", "closest"):
        if key in found:
            entry[key] = found[key]
    if found["catalog"]:
        other = []
        eps = shapes.get("norm_eps")
        if eps is not None and model.norm_eps is not None and float(eps) != float(model.norm_eps):
            other.append(f"norm_eps: builder {eps} vs catalog {model.norm_eps}")
        seq = shapes.get("max_seq_len")
        if seq is not None and model.max_positions is not None and seq != model.max_positions:
            other.append(
                f"max_seq_len: builder {seq} vs catalog max_position_embeddings {model.max_positions}"
            )
        if other:
            entry["other_differences"] = other
    if reading.notes:
        entry["notes"] = reading.notes
    del name
    return entry


def _variant(name: str, reading: TuneReading, base: TuneReading) -> Data:
    variant: Data = {"builder": name, "source": reading.source}
    if reading.wraps:
        variant["wraps"] = reading.wraps
    if reading.same_as:
        variant["same_as"] = reading.same_as
    if reading.failure and not reading.component:
        variant["unresolved"] = reading.failure
        return variant
    mine, theirs = tune_compared(reading), tune_compared(base)
    for shapes in (mine, theirs):
        shapes.setdefault("output_features", shapes.get("vocab_size"))  # the LM head, unless a classifier
    keys = [*mine, *(k for k in theirs if k not in mine)]
    differing = [
        f"{k}: {show(mine.get(k))} vs base {show(theirs.get(k))}"
        for k in keys
        if mine.get(k) != theirs.get(k)
    ]
    variant["component"] = reading.component
    variant["same_shapes"] = not differing
    if differing:
        variant["differs"] = "; ".join(differing)
    return variant


def torchtitan_section(tree: GitTree, catalog: Sequence[CatalogModel], head: GitTree | None) -> Data:
    reader = TorchtitanReader(tree)
    flavors: dict[str, Data] = {}
    reused: dict[str, str] = {}
    failed: dict[str, str] = {}
    owners: dict[str, str] = {}
    specs = [(name, reader.spec(name, package)) for name, package in reader.spec_names()]
    for name, spec in specs:
        if spec.dict_where:
            owners[spec.path] = name
    rule: str | None = None
    for name, spec in specs:
        if spec.same_as:
            reused[name] = owners.get(spec.same_as, spec.same_as)
            continue
        if spec.failure:
            failed[name] = spec.failure
            continue
        for flavor, (args, line) in spec.flavors.items():
            key = f"{name}/{flavor}"
            source = f"{spec.path}:{line}"
            if isinstance(args, Opaque) or not isinstance(args, dict):
                reason = args.reason if isinstance(args, Opaque) else "not a dataclass"
                flavors[key] = {"catalog": None, "source": source, "unresolved": {"flavor": reason}}
                continue
            if not any(n in args for n in ("dim", "hidden_size")):
                reason = (
                    f"{args.get('__class__')} ({args.get('__where__')}) has no shape fields: the model is "
                    "built from a config read at run time"
                )
                flavors[key] = {"catalog": None, "source": source, "unresolved": {"flavor": reason}}
                continue
            shapes, derived, unresolved, compared = titan_shapes(spec, args)
            if "ffn_hidden_dim" in derived and rule is None and name == "llama3":
                rule = derived["ffn_hidden_dim"]
            found = match(compared, name, catalog, "flavor")
            found.pop("_model")
            entry: Data = {"catalog": found["catalog"], "source": source, "args": args.get("__class__")}
            entry["shapes"] = Flow(shapes)
            if derived:
                entry["derived"] = derived
            if unresolved:
                entry["unresolved"] = unresolved
            for extra in ("also_matches", "differs", "closest"):
                if extra in found:
                    entry[extra] = found[extra]
            if compared.get("guidance_embeds") is False:
                entry["notes"] = [
                    "FluxModel builds no guidance embedder (guidance_embeds false) whatever the flavor's name"
                ]
            flavors[key] = entry
    section: Data = {
        "repo": TORCHTITAN_REPO,
        "commit": tree.commit,
        "commit_date": tree.date,
        "files": "torchtitan/models/*/__init__.py and model/args.py (train specs of torchtitan/models and "
        "torchtitan/experiments)",
        "ffn_rule": rule,
        "train_specs": reused,
        "unresolved_specs": failed,
        "flavors": flavors,
    }
    if head is not None:
        section["head"] = {
            "commit": head.commit,
            "commit_date": head.date,
            "note": "later torchtitan defines its flavors as Python config builders (config_registry.py, "
            "model_registry) and has no TOML train configs; they are not read here",
        }
    return section


def build(mirrors: Path, tune_ref: str, titan_ref: str) -> Data:
    catalog = catalog_models()
    tune = GitTree(mirrors / "pytorch+torchtune" / "repo", tune_ref)
    titan_dir = mirrors / "pytorch+torchtitan" / "repo"
    titan = GitTree(titan_dir, titan_ref)
    head = GitTree(titan_dir, "HEAD")
    return {
        "torchtune": torchtune_section(tune, catalog),
        "torchtitan": torchtitan_section(titan, catalog, None if head.commit == titan.commit else head),
    }


def to_yaml(data: Data) -> str:
    body = yaml.dump(
        data, Dumper=Dumper, sort_keys=False, allow_unicode=True, width=110, default_flow_style=False
    )
    return HEADER + body


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--mirrors", type=Path, default=MIRRORS, help="folder of OWNER+NAME/repo git mirrors")
    parser.add_argument("--torchtune-ref", default=TORCHTUNE_REF)
    parser.add_argument("--torchtitan-ref", default=TORCHTITAN_REF)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    data = build(args.mirrors, args.torchtune_ref, args.torchtitan_ref)
    args.out.write_text(to_yaml(data), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
