"""Structured output: the project's grammar engine (client/constrain, on
xgrammar's C++ core) from Python, through its C interface
(client/constrain/c_api.h) in the shared library libllm_constrain.so, loaded
with ctypes. The C++ client (`llm generate --json-schema`) and this package
compile and match constraints with the same code, so both send the same masks
and, greedy, generate the same tokens.

    from llm_client.constrain import Compiler, ConstraintSpec
    compiler = Compiler(token_bytes, end_ids=[eos], special_ids=[...], vocab_size=n)
    constraint = compiler.compile(ConstraintSpec("json_schema", text=schema))
    m = constraint.matcher()
    encoding, data = m.wire_mask()     # before each step: the allowed tokens
    m.accept(token)                    # after each draw

The library is found (load_library): at the path given, else at
$LLM_CONSTRAIN_LIBRARY, else beside this package (the CMake build copies
build/bin/libllm_constrain.so into build/python/llm_client/), else on the
dynamic loader's path. A package installed with pip has no library: anything
but structured output works without it, and structured output raises
Unsupported saying where to get it.

Threads: a Compiler and a Constraint may be shared by threads (each compile
releases the GIL while it runs); a Matcher belongs to one generation.
Cost: a compile takes milliseconds to seconds the first time, microseconds
from the compiler's cache; a mask microseconds (wire_mask also picks the
encoding, in C++); accept and forced_tokens about a microsecond plus ctypes'
call (~1 us).
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import weakref
from dataclasses import dataclass
from typing import Sequence

from .errors import InvalidArgument, Unsupported, error_of_code

ABI_VERSION = 1  # LLM_CONSTRAIN_ABI_VERSION of c_api.h
LIBRARY_NAME = "libllm_constrain.so"
LIBRARY_ENV = "LLM_CONSTRAIN_LIBRARY"

# Constraint kinds, named as the generate parameters are (c_api.h's values).
KINDS = {"json_schema": 0, "json_object": 1, "regex": 2, "grammar": 3, "choice": 4}
_STRICT, _COMPACT_JSON, _ANY_ORDER, _LENIENT = 1, 2, 4, 8
# Wire encodings of a mask (llm.v1.TokenMask's oneof).
MASK_ENCODINGS = ("bitset", "allowed", "disallowed")

# absl::StatusCode (= gRPC's) of c_api.h's errors.
_CODE_NAMES = {3: "INVALID_ARGUMENT", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION",
               13: "INTERNAL"}

_p = ctypes.c_void_p
_err = ctypes.POINTER(ctypes.c_void_p)
_i32, _i64, _u32 = ctypes.c_int32, ctypes.c_int64, ctypes.c_uint32
_I32P, _I64P = ctypes.POINTER(_i32), ctypes.POINTER(_i64)
_PROTOTYPES = {
    "llm_constrain_abi_version": (_i32, []),
    "llm_constrain_free_error": (None, [_p]),
    "llm_constrain_compiler_create": (ctypes.c_int, [
        ctypes.c_char_p, _I64P, _i32, _I32P, _i32, _I32P, _i32, _i32, ctypes.POINTER(_p), _err]),
    "llm_constrain_compiler_free": (None, [_p]),
    "llm_constrain_compile": (ctypes.c_int, [
        _p, _i32, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, _I64P, _i32, _u32, _i32,
        ctypes.POINTER(_p), _err]),
    "llm_constrain_constraint_free": (None, [_p]),
    "llm_constrain_constraint_vocab_size": (_i32, [_p]),
    "llm_constrain_constraint_compile_ms": (ctypes.c_double, [_p]),
    "llm_constrain_matcher_create": (ctypes.c_int, [_p, ctypes.POINTER(_p), _err]),
    "llm_constrain_matcher_free": (None, [_p]),
    "llm_constrain_matcher_fill_mask": (ctypes.c_int, [_p, ctypes.POINTER(_u32), _i32, _err]),
    "llm_constrain_matcher_wire_mask": (ctypes.c_int, [
        _p, _I32P, ctypes.POINTER(_p), _I64P, _err]),
    "llm_constrain_matcher_accept": (ctypes.c_int, [_p, _i32]),
    "llm_constrain_matcher_rollback": (ctypes.c_int, [_p, _i32, _err]),
    "llm_constrain_matcher_forced_tokens": (_i32, [_p, _I32P, _i32]),
    "llm_constrain_matcher_can_end": (ctypes.c_int, [_p]),
    "llm_constrain_matcher_is_terminated": (ctypes.c_int, [_p]),
    "llm_constrain_matcher_accepted": (_i32, [_p]),
    "llm_constrain_matcher_reset": (None, [_p]),
}

_libraries: dict[str, ctypes.CDLL] = {}
_libraries_lock = threading.Lock()


def _unavailable(why: str) -> Unsupported:
    return Unsupported(
        f"structured output (json_schema=, json_object=, regex=, grammar=, choice=) needs the "
        f"grammar engine's library {LIBRARY_NAME}, which the project's CMake build makes "
        f"(build/bin/{LIBRARY_NAME}, copied beside the package into build/python/llm_client/); "
        f"a pip-installed package has none: set {LIBRARY_ENV}=/path/to/{LIBRARY_NAME} or pass "
        f"Client(constrain_library=...). {why}")


def load_library(path: str | os.PathLike | None = None) -> ctypes.CDLL:
    """The engine's library, loaded once per path: `path`, else
    $LLM_CONSTRAIN_LIBRARY, else beside this package, else the dynamic
    loader's search. Raises Unsupported (naming where it looked) when none
    loads or its ABI version is not ABI_VERSION."""
    if path is None:
        path = os.environ.get(LIBRARY_ENV) or None
    if path is not None:
        candidates = [os.fspath(path)]
    else:
        candidates = [os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME),
                      LIBRARY_NAME]
    with _libraries_lock:
        for c in candidates:
            if c in _libraries:
                return _libraries[c]
        errors = []
        for c in candidates:
            if os.sep in c and not os.path.exists(c):
                errors.append(f"{c}: no such file")
                continue
            try:
                lib = ctypes.CDLL(c)
            except OSError as e:
                errors.append(str(e))
                continue
            try:
                version_of = lib.llm_constrain_abi_version
            except AttributeError:
                errors.append(f"{c}: not the grammar engine's library "
                              "(no llm_constrain_abi_version)")
                continue
            version_of.restype, version_of.argtypes = _i32, []
            version = version_of()
            if version != ABI_VERSION:
                errors.append(f"{c}: C interface version {version}, this package needs "
                              f"{ABI_VERSION} (rebuild the library or reinstall the package)")
                continue
            for name, (restype, argtypes) in _PROTOTYPES.items():
                f = getattr(lib, name)
                f.restype, f.argtypes = restype, argtypes
            _libraries[c] = lib
            return lib
        raise _unavailable("Tried: " + "; ".join(errors) + ".")


def _raise_for(lib: ctypes.CDLL, code: int, error: ctypes.c_void_p, param: str | None = None,
               prefix: str = ""):
    """Raises the LlmError of a failed call (code != 0), freeing its message."""
    message = ctypes.string_at(error.value).decode("utf-8", "replace") if error.value else ""
    lib.llm_constrain_free_error(error)
    raise error_of_code(_CODE_NAMES.get(code, f"status {code}"), prefix + message, param=param)


def _offsets(parts: Sequence[bytes]) -> tuple[bytes, ctypes.Array]:
    """The parts concatenated, and their n + 1 offsets."""
    offsets = (_i64 * (len(parts) + 1))()
    at = 0
    for i, p in enumerate(parts):
        at += len(p)
        offsets[i + 1] = at
    return b"".join(parts), offsets


@dataclass(frozen=True)
class ConstraintSpec:
    """What a generation must output (constrain::Spec).

    kind: "json_schema" (text: a JSON Schema), "json_object" (any JSON
    object), "regex" (text: a regular expression the whole output matches),
    "grammar" (text: a GBNF grammar with a rule `root`) or "choice"
    (choices: the output is exactly one of them). JSON only: strict (refuse
    properties and items the schema does not name), compact_json (exactly
    json.dumps's ", " and ": ", no other whitespace: more tokens forced),
    any_order (properties in any order), lenient (ignore the schema keywords
    the engine does not enforce instead of refusing the schema),
    max_whitespace (whitespace characters per gap, 20 to 1024).
    """

    kind: str
    text: str = ""
    choices: tuple[str, ...] = ()
    strict: bool = False
    compact_json: bool = False
    any_order: bool = False
    lenient: bool = False
    max_whitespace: int = 20

    @property
    def flags(self) -> int:
        return ((_STRICT if self.strict else 0) | (_COMPACT_JSON if self.compact_json else 0)
                | (_ANY_ORDER if self.any_order else 0) | (_LENIENT if self.lenient else 0))


def spec_from_params(*, json_schema=None, json_object: bool = False, regex: str | None = None,
                     grammar: str | None = None, choice: Sequence[str] | None = None,
                     strict: bool = False, compact_json: bool = False, any_order: bool = False,
                     lenient: bool = False, max_whitespace: int = 20) -> ConstraintSpec | None:
    """The ConstraintSpec of generate()'s structured-output parameters, None
    without one. json_schema: a dict (or bool) serialized with json.dumps,
    or the schema's JSON text. Raises InvalidArgument naming the parameter
    for a bad value or for two constraints at once."""
    given = [name for name, v in (("json_schema", json_schema), ("regex", regex),
                                  ("grammar", grammar), ("choice", choice))
             if v is not None] + (["json_object"] if json_object else [])
    for name, v in (("json_object", json_object), ("strict", strict),
                    ("compact_json", compact_json), ("any_order", any_order),
                    ("lenient", lenient)):
        if not isinstance(v, bool):
            raise InvalidArgument(f"{name} must be True or False, got {v!r}", param=name)
    if not isinstance(max_whitespace, int) or isinstance(max_whitespace, bool):
        raise InvalidArgument(f"max_whitespace must be an integer, got {max_whitespace!r}",
                              param="max_whitespace")
    if len(given) > 1:
        raise InvalidArgument(f"give one constraint, not {' and '.join(given)}", param=given[1])
    if not given:
        return None
    kind = given[0]
    options = dict(strict=strict, compact_json=compact_json, any_order=any_order,
                   lenient=lenient, max_whitespace=max_whitespace)
    if kind == "json_object":
        return ConstraintSpec(kind, **options)
    if kind == "json_schema":
        if isinstance(json_schema, (dict, bool)):
            try:
                text = json.dumps(json_schema)
            except (TypeError, ValueError) as e:
                raise InvalidArgument(f"json_schema is not JSON: {e}",
                                      param="json_schema") from None
        elif isinstance(json_schema, (str, bytes)):
            text = json_schema.decode() if isinstance(json_schema, bytes) else json_schema
        else:
            raise InvalidArgument("json_schema must be a dict or the schema's JSON text, got "
                                  f"{type(json_schema).__name__}", param="json_schema")
        return ConstraintSpec(kind, text=text, **options)
    if kind == "choice":
        if isinstance(choice, (str, bytes)) or not all(
                isinstance(c, str) and c for c in choice):
            raise InvalidArgument(f"choice must be a list of non-empty strings, got {choice!r}",
                                  param="choice")
        if not choice:
            raise InvalidArgument("choice is empty: give at least one string", param="choice")
        return ConstraintSpec(kind, choices=tuple(choice), **options)
    text = regex if kind == "regex" else grammar
    if not isinstance(text, str) or not text:
        raise InvalidArgument(f"{kind} must be a non-empty string, got {text!r}", param=kind)
    return ConstraintSpec(kind, text=text, **options)


class Compiler:
    """Compiles constraints for one vocabulary (constrain::Compiler), with a
    cache of the constraints it compiled (256 entries): a spec seen before
    compiles in microseconds.

    token_bytes: each token's exact bytes by id (the tokenizer's Decode
    pieces); end_ids: the tokens that end a generation (EOS, EOT: allowed
    where the output is complete, and only there); special_ids: tokens never
    allowed (control tokens); vocab_size: the model's number of logits
    (>= len(token_bytes); 0: len(token_bytes)); library: as load_library.
    Raises InvalidArgument for an empty vocabulary or an id out of range,
    Unsupported without the library.
    """

    def __init__(self, token_bytes: Sequence[bytes], *, end_ids: Sequence[int] = (),
                 special_ids: Sequence[int] = (), vocab_size: int = 0,
                 library: str | os.PathLike | None = None):
        self._lib = load_library(library)
        data, offsets = _offsets(token_bytes)
        ends = (_i32 * len(end_ids))(*end_ids)
        specials = (_i32 * len(special_ids))(*special_ids)
        handle, error = _p(), _p()
        code = self._lib.llm_constrain_compiler_create(
            data, offsets, len(token_bytes), ends, len(end_ids), specials, len(special_ids),
            vocab_size, ctypes.byref(handle), ctypes.byref(error))
        if code:
            _raise_for(self._lib, code, error)
        self._handle = handle
        self._finalizer = weakref.finalize(self, self._lib.llm_constrain_compiler_free, handle)

    def compile(self, spec: ConstraintSpec) -> "Constraint":
        """The compiled constraint of `spec`. InvalidArgument naming what is
        wrong or unsupported for a spec that does not compile ("the
        json_schema constraint: unsupported JSON Schema keyword 'not' at /",
        as `llm generate` says it; param: the spec's kind, as generate()
        names it); ResourceExhausted out of memory."""
        if spec.kind not in KINDS:
            raise InvalidArgument(f"unknown constraint kind {spec.kind!r} (one of "
                                  f"{', '.join(KINDS)})", param="kind")
        text = spec.text.encode("utf-8")
        choices, offsets = _offsets([c.encode("utf-8") for c in spec.choices])
        handle, error = _p(), _p()
        code = self._lib.llm_constrain_compile(
            self._handle, KINDS[spec.kind], text, len(text), choices, offsets,
            len(spec.choices), spec.flags, spec.max_whitespace, ctypes.byref(handle),
            ctypes.byref(error))
        if code:
            _raise_for(self._lib, code, error, param=spec.kind,
                       prefix=f"the {spec.kind} constraint: ")
        return Constraint(self._lib, handle, spec.kind)

    def close(self) -> None:
        """Frees the compiler (its constraints stay valid)."""
        self._finalizer()


class Constraint:
    """A compiled constraint (immutable, shared by any number of matchers)."""

    def __init__(self, lib: ctypes.CDLL, handle: ctypes.c_void_p, kind: str):
        self._lib, self._handle, self.kind = lib, handle, kind
        self._finalizer = weakref.finalize(self, lib.llm_constrain_constraint_free, handle)
        self.vocab_size: int = lib.llm_constrain_constraint_vocab_size(handle)
        self.compile_ms: float = lib.llm_constrain_constraint_compile_ms(handle)

    def matcher(self) -> "Matcher":
        """A new matcher at the start of the output."""
        return Matcher(self)


class Matcher:
    """The state of one generation under a constraint: which tokens may come
    next, the tokens accepted so far, and the tokens it forces."""

    def __init__(self, constraint: Constraint):
        lib = self._lib = constraint._lib
        handle, error = _p(), _p()
        code = lib.llm_constrain_matcher_create(constraint._handle, ctypes.byref(handle),
                                                ctypes.byref(error))
        if code:
            _raise_for(lib, code, error)
        self._handle = handle
        self._finalizer = weakref.finalize(self, lib.llm_constrain_matcher_free, handle)
        self.vocab_size = constraint.vocab_size
        self._words = (_u32 * ((self.vocab_size + 31) // 32))()
        self._forced = (_i32 * 64)()
        self._encoding, self._data, self._size = _i32(), _p(), _i64()

    def _check(self, code: int, error: ctypes.c_void_p) -> None:
        if code:
            _raise_for(self._lib, code, error)

    def fill_mask(self) -> bytes:
        """The tokens allowed next as a bitset: bit i % 8 of byte i // 8 is
        token i (the wire's `bitset`), ceil(vocab_size / 8) bytes."""
        error = _p()
        self._check(self._lib.llm_constrain_matcher_fill_mask(
            self._handle, self._words, len(self._words), ctypes.byref(error)), error)
        return bytes(self._words)[:(self.vocab_size + 7) // 8]

    def wire_mask(self) -> tuple[str, bytes | list[int]]:
        """The tokens allowed next in the cheapest of llm.v1.TokenMask's
        encodings, as the C++ client picks it: ("bitset", its bytes),
        ("allowed", ids) or ("disallowed", ids), ids increasing."""
        error = _p()
        self._check(self._lib.llm_constrain_matcher_wire_mask(
            self._handle, ctypes.byref(self._encoding), ctypes.byref(self._data),
            ctypes.byref(self._size), ctypes.byref(error)), error)
        encoding, n = MASK_ENCODINGS[self._encoding.value], self._size.value
        if encoding == "bitset":
            return encoding, ctypes.string_at(self._data.value, n)
        if n == 0:
            return encoding, []
        return encoding, list((_u32 * n).from_address(self._data.value))

    def accept(self, token: int) -> bool:
        """Accepts `token` if the constraint allows it next (True), else
        changes nothing (False). An end token ends the matcher."""
        return bool(self._lib.llm_constrain_matcher_accept(self._handle, token))

    def rollback(self, n: int) -> None:
        """Undoes the last n accepted tokens. InvalidArgument for more than
        were accepted."""
        error = _p()
        self._check(self._lib.llm_constrain_matcher_rollback(self._handle, n,
                                                             ctypes.byref(error)), error)

    def forced_tokens(self, limit: int | None = None) -> list[int]:
        """The tokens the constraint forces from here (the only continuation
        it allows, in the vocabulary's longest tokens), at most `limit`; the
        matcher does not change: accept() each to use them."""
        if limit is not None and limit <= 0:
            return []
        n = self._lib.llm_constrain_matcher_forced_tokens(self._handle, self._forced,
                                                          len(self._forced))
        if n > len(self._forced):
            self._forced = (_i32 * n)()
            n = self._lib.llm_constrain_matcher_forced_tokens(self._handle, self._forced, n)
        return list(self._forced[:n if limit is None else min(n, limit)])

    def can_end(self) -> bool:
        """The output is complete here: an end token is allowed next."""
        return bool(self._lib.llm_constrain_matcher_can_end(self._handle))

    def is_terminated(self) -> bool:
        """An end token was accepted."""
        return bool(self._lib.llm_constrain_matcher_is_terminated(self._handle))

    @property
    def accepted(self) -> int:
        """Tokens accepted (less those rolled back)."""
        return self._lib.llm_constrain_matcher_accepted(self._handle)

    def reset(self) -> None:
        """Back to the start."""
        self._lib.llm_constrain_matcher_reset(self._handle)


def is_allowed(bitset: bytes, token: int) -> bool:
    """Whether fill_mask()'s bitset allows `token`."""
    return 0 <= token < 8 * len(bitset) and bool((bitset[token >> 3] >> (token & 7)) & 1)


__all__ = ["ABI_VERSION", "Compiler", "Constraint", "ConstraintSpec", "KINDS", "LIBRARY_ENV",
           "LIBRARY_NAME", "Matcher", "is_allowed", "load_library", "spec_from_params"]
