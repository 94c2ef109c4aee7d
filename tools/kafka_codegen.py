#!/usr/bin/env python3
"""Generates Silt's Kafka wire-protocol C++ from Apache Kafka's message specs.

Input: a directory of Kafka message specs (JSON with // comments), as found in Apache Kafka's
clients/src/main/resources/common/message/ or under common/message/ inside a kafka-clients jar,
and the protocol's error-code table (CSV: code,name).

Output (see docs/protocol.md):
  <out>/<message>.h, <out>/<message>.cc   one per request, response, header and data type
  <out>/api_table.h, <out>/api_table.cc   the API table and request dispatch helpers
  <out>/error_code.h, <out>/error_code.cc the error-code enum
  <out>/messages.h                        includes every generated header
  <test-out>/random_messages.cc           per-message random filling for round-trip tests

Only the Python standard library is used. The spec's `about` texts are not copied.
"""

import argparse
import csv
import json
import os
import re
import sys

GENERATOR = "tools/kafka_codegen.py"

PRIMITIVES = {
    "int8": "int8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "int64": "int64_t",
    "uint16": "uint16_t",
    "uint32": "uint32_t",
    "float64": "double",
    "bool": "bool",
    "uuid": "uuid",
    "string": "std::string",
    "bytes": "std::vector<uint8_t>",
    "records": "records_view",
}
FIXED_SIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4,
              "float64": 8, "bool": 1, "uuid": 16}
LOCAL_NAMES = {"version", "w", "r", "flexible", "n", "field", "tag", "count", "e", "v", "i",
               "next_unknown", "field_size", "x", "rnd"}
CPP_KEYWORDS = {"default", "operator", "class", "struct", "new", "delete", "this", "template",
                "namespace", "private", "public", "protected", "union", "register", "auto"}


class SpecError(Exception):
    pass


# ----------------------------------------------------------------------------------------------
# Spec parsing


def strip_comments(text):
    """Removes // comments that are outside JSON strings."""
    out = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif c == "/" and i + 1 < n and text[i + 1] == "/":
            while i < n and text[i] != "\n":
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


class Versions:
    """An inclusive version range; hi is None for open ranges; empty when lo is None."""

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    @staticmethod
    def parse(text):
        text = str(text).strip()
        if text == "none":
            return Versions(None, None)
        if text.endswith("+"):
            return Versions(int(text[:-1]), None)
        if "-" in text:
            a, b = text.split("-", 1)
            return Versions(int(a), int(b))
        return Versions(int(text), int(text))

    def empty(self):
        return self.lo is None

    def intersect(self, other):
        if self.empty() or other.empty():
            return Versions(None, None)
        lo = max(self.lo, other.lo)
        his = [h for h in (self.hi, other.hi) if h is not None]
        hi = min(his) if his else None
        if hi is not None and lo > hi:
            return Versions(None, None)
        return Versions(lo, hi)

    def contains_range(self, lo, hi):
        """True when every version in [lo, hi] is in this range."""
        if self.empty():
            return False
        return self.lo <= lo and (self.hi is None or hi <= self.hi)

    def cond(self, var, valid):
        """A C++ condition for `var in self`, simplified against the message's valid range."""
        if self.empty():
            return "false"
        parts = []
        if self.lo > valid.lo:
            parts.append(f"{var} >= {self.lo}")
        if self.hi is not None and self.hi < valid.hi:
            parts.append(f"{var} <= {self.hi}")
        return " && ".join(parts) if parts else "true"


def snake(name):
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = s.lower()
    return s + "_" if s in CPP_KEYWORDS else s


class Field:
    def __init__(self, spec, msg):
        self.name = spec["name"]
        self.cname = snake(self.name)
        # How generated member functions refer to the field: names that generated locals and
        # parameters use are qualified with this->.
        self.ref = f"this->{self.cname}" if self.cname in LOCAL_NAMES else self.cname
        self.type = spec["type"]
        self.versions = Versions.parse(spec.get("versions", "0+")).intersect(msg.valid)
        self.nullable = Versions.parse(spec.get("nullableVersions", "none"))
        self.tag = spec.get("tag")
        self.tagged = Versions.parse(spec.get("taggedVersions", "none"))
        if self.tag is not None:
            self.versions = self.versions.intersect(self.tagged)
        self.flexible_override = spec.get("flexibleVersions")
        self.default = spec.get("default")
        self.is_array = self.type.startswith("[]")
        self.elem = self.type[2:] if self.is_array else self.type
        self.struct = None  # Struct, when the (element) type is a struct
        if "fields" in spec:
            self.struct = msg.add_struct(self.elem, spec["fields"], self.versions)
        elif self.elem not in PRIMITIVES:
            self.struct = msg.struct_ref(self.elem)
        if self.elem == "records" and self.is_array:
            raise SpecError(f"{msg.name}.{self.name}: arrays of records are not supported")

    @property
    def may_be_null(self):
        return not self.nullable.empty()

    def elem_cpp(self):
        return f"{self.struct.owner}_types::{self.struct.name}" if self.struct else PRIMITIVES[self.elem]

    def value_cpp(self):
        t = self.elem_cpp()
        return f"std::vector<{t}>" if self.is_array else t

    def cpp_type(self):
        t = self.value_cpp()
        return f"std::optional<{t}>" if self.may_be_null else t

    def default_is_null(self):
        if self.elem == "records" and not self.is_array:
            return self.may_be_null
        return self.default == "null"

    def default_expr(self):
        """The C++ expression of the default value, or None for a value-initialised default."""
        if self.default_is_null():
            if not self.may_be_null:
                raise SpecError(f"field {self.name} defaults to null but is never nullable")
            return "std::nullopt"
        t = self.elem
        if self.is_array or self.struct or t in ("bytes", "records", "uuid"):
            return None
        d = self.default
        if t == "string":
            return None if not d else json.dumps(d)
        if t == "bool":
            if d is None:
                return "false"
            return "true" if str(d).lower() == "true" else "false"
        if d is None or d == "":
            return "0.0" if t == "float64" else "0"
        if t == "float64":
            return repr(float(d))
        value = int(str(d), 0)
        if t == "int64" and value == -(1 << 63):
            return "INT64_MIN"
        if t == "int32" and value == -(1 << 31):
            return "INT32_MIN"
        return str(value)

    def member_initializer(self):
        d = self.default_expr()
        if self.may_be_null:
            if d is None or d == "std::nullopt":
                if self.default_is_null():
                    return ""
                return f"{{std::in_place}}"
            return f"{{{d}}}"
        return "" if d is None else f" = {d}"


class Struct:
    def __init__(self, name, owner, versions):
        self.name = name
        self.owner = owner  # the C++ name of the message type that declares it
        self.versions = versions
        self.fields = []
        self.deps = []  # structs that must be declared before this one


class Message:
    def __init__(self, spec, source):
        self.spec = spec
        self.source = source
        self.name = spec["name"]
        self.cname = snake(self.name)
        self.kind = spec["type"]
        self.api_key = spec.get("apiKey")
        self.valid = Versions.parse(spec["validVersions"])
        if self.valid.hi is None:
            raise SpecError(f"{self.name}: validVersions must be bounded")
        flex = Versions.parse(spec.get("flexibleVersions", "none"))
        self.first_flexible = flex.lo
        self.listeners = spec.get("listeners", [])
        self.latest_unstable = bool(spec.get("latestVersionUnstable", False))
        self.structs = {}
        self.order = []
        self.common = {cs["name"]: cs for cs in spec.get("commonStructs", [])}
        self._building = set()
        self.root = Struct(self.cname, None, self.valid)
        self.root.fields = [Field(f, self) for f in spec["fields"]]
        self.root.deps = [f.struct for f in self.root.fields if f.struct]
        for name in self.common:
            self.struct_ref(name)

    def add_struct(self, name, field_specs, versions):
        if name in self.structs:
            s = self.structs[name]
            if name not in self.common:
                raise SpecError(f"{self.name}: struct {name} is defined twice")
            return s
        s = Struct(name, self.cname, versions)
        self.structs[name] = s
        s.fields = [Field(f, self) for f in field_specs]
        s.deps = [f.struct for f in s.fields if f.struct]
        self.order.append(s)
        return s

    def struct_ref(self, name):
        if name in self.structs:
            return self.structs[name]
        if name not in self.common:
            raise SpecError(f"{self.name}: unknown type {name}")
        if name in self._building:
            raise SpecError(f"{self.name}: recursive common struct {name}")
        self._building.add(name)
        s = self.add_struct(name, self.common[name]["fields"], self.valid)
        self._building.discard(name)
        return s

    def declaration_order(self):
        """Nested structs, each after the structs it holds by value."""
        done, out = set(), []

        def visit(s):
            if s.name in done:
                return
            done.add(s.name)
            for d in s.deps:
                visit(d)
            out.append(s)

        for s in self.order:
            visit(s)
        return out

    def flexible_expr(self, var="version"):
        if self.first_flexible is None:
            return "false"
        if self.first_flexible <= self.valid.lo:
            return "true"
        return f"{var} >= {self.first_flexible}"


def load_specs(spec_dir):
    messages = []
    for fname in sorted(os.listdir(spec_dir)):
        if not fname.endswith(".json"):
            continue
        path = os.path.join(spec_dir, fname)
        with open(path, encoding="utf-8") as fh:
            try:
                spec = json.loads(strip_comments(fh.read()))
            except json.JSONDecodeError as e:
                raise SpecError(f"{path}: {e}") from e
        messages.append((fname, spec))
    return messages


def select(specs):
    """Requests served by brokers, their responses, headers and data types."""
    requests = {}
    for fname, spec in specs:
        if spec.get("type") == "request" and "broker" in spec.get("listeners", []):
            requests[spec["apiKey"]] = spec["name"]
    chosen = []
    for fname, spec in specs:
        t = spec.get("type")
        if t == "request" and spec["apiKey"] in requests:
            chosen.append((fname, spec))
        elif t == "response" and spec.get("apiKey") in requests:
            chosen.append((fname, spec))
        elif t in ("header", "data"):
            chosen.append((fname, spec))
    return chosen


# ----------------------------------------------------------------------------------------------
# C++ emission


class Out:
    def __init__(self):
        self.lines = []
        self.depth = 0

    def __call__(self, line=""):
        self.lines.append(("  " * self.depth + line) if line else "")

    def indent(self):
        self.depth += 1

    def dedent(self):
        self.depth -= 1

    def text(self):
        return "\n".join(self.lines) + "\n"


def header_comment(version):
    return (f"// Generated by {GENERATOR} from Apache Kafka's message specs ({version}).\n"
            "// Do not edit: change the generator and run `make generate` (see docs/protocol.md).\n")


def uses_version(lines):
    """True when generated lines use the `version` parameter (not a field named version)."""
    return any(re.search(r"(?<![>\w])version\b", line) for line in lines)


def compact_expr(msg, field, flexible_var="flexible"):
    if msg.first_flexible is None:
        return "false"
    if field.flexible_override is not None:
        o = Versions.parse(field.flexible_override)
        if o.empty():
            return "false"
        return f"({flexible_var} && version >= {o.lo})"
    return flexible_var


def nullable_cond(msg, field):
    if field.nullable.empty():
        return "false"
    return field.nullable.cond("version", msg.valid)


class StructEmitter:
    """Emits encode, decode and encoded_size for one struct (or the message root)."""

    def __init__(self, msg, struct, qual):
        self.msg = msg
        self.s = struct
        self.qual = qual  # qualified C++ name

    # --- value helpers, shared by regular and tagged fields --------------------------------

    def enc_value(self, o, f, expr, compact):
        """Writes `expr` (the non-optional value of f) to writer w."""
        if f.is_array:
            o(f"w.array_length({expr}.size(), {compact});")
            o(f"for (const auto& e : {expr}) {{")
            o.indent()
            self.enc_elem(o, f, "e", compact)
            o.dedent()
            o("}")
        else:
            self.enc_elem(o, f, expr, compact)

    def enc_elem(self, o, f, expr, compact):
        t = f.elem
        if f.struct:
            o(f"{expr}.encode(w, version);")
        elif t in FIXED_SIZE:
            o(f"w.{'boolean' if t == 'bool' else t}({expr});")
        elif t == "string":
            o(f"w.string({expr}, {compact});")
        elif t == "bytes":
            o(f"w.bytes({expr}, {compact});")
        elif t == "records":
            o(f"w.records({expr}, {compact});")
        else:
            raise SpecError(f"cannot encode {t}")

    def size_value(self, o, f, expr, compact, acc):
        if f.is_array:
            o(f"{acc} += wire_size::array_length({expr}.size(), {compact});")
            if f.struct:
                o(f"for (const auto& e : {expr}) {acc} += e.encoded_size(version);")
            elif f.elem in FIXED_SIZE:
                o(f"{acc} += {expr}.size() * {FIXED_SIZE[f.elem]};")
            else:
                o(f"for (const auto& e : {expr}) {acc} += {self.size_elem(f, 'e', compact)};")
        else:
            o(f"{acc} += {self.size_elem(f, expr, compact)};")

    def size_elem(self, f, expr, compact):
        t = f.elem
        if f.struct:
            return f"{expr}.encoded_size(version)"
        if t in FIXED_SIZE:
            return str(FIXED_SIZE[t])
        if t == "string":
            return f"wire_size::string({expr}.size(), {compact})"
        if t == "bytes":
            return f"wire_size::bytes({expr}.size(), {compact})"
        if t == "records":
            return f"wire_size::bytes({expr}.size(), {compact})"
        raise SpecError(f"cannot size {t}")

    def dec_value(self, o, f, target, compact, nullable, r="r"):
        """Reads a value of f from reader `r` into `target` (an lvalue of f.cpp_type())."""
        if f.is_array:
            min_size = 1 if f.struct is None else 0
            if f.elem in FIXED_SIZE:
                min_size = FIXED_SIZE[f.elem]
            elif f.elem in ("string", "bytes"):
                min_size = 1
            o("{")
            o.indent()
            o(f"const int32_t n = {r}.array_length({compact}, {min_size});")
            o("if (n < 0) {")
            o.indent()
            if f.may_be_null:
                o(f"if ({nullable}) {target}.reset(); else {r}.fail(decode_error::null_in_non_nullable_field);")
            else:
                o(f"{r}.fail(decode_error::null_in_non_nullable_field);")
            o.dedent()
            o("} else {")
            o.indent()
            ref = f"{target}.emplace()" if f.may_be_null else target
            o(f"auto& v = {ref};")
            o("v.clear();")
            o(f"{r}.charge(static_cast<size_t>(n) * sizeof(v[0]));  // the loop stops if past the budget")
            o("v.reserve(std::min<size_t>(static_cast<size_t>(n), 1024));")
            o(f"for (int32_t i = 0; i < n && {r}.ok(); ++i) {{")
            o.indent()
            if f.struct:
                o(f"v.emplace_back().decode({r}, version);")
            else:
                o(f"v.push_back({self.dec_elem_expr(f, compact, r)});")
            o.dedent()
            o("}")
            o.dedent()
            o("}")
            o.dedent()
            o("}")
            return
        t = f.elem
        if f.struct:
            if f.may_be_null:
                o(f"if ({nullable}) {{")
                o.indent()
                o(f"if ({r}.int8() < 0) {target}.reset(); else {target}.emplace().decode({r}, version);")
                o.dedent()
                o("} else {")
                o.indent()
                o(f"{target}.emplace().decode({r}, version);")
                o.dedent()
                o("}")
            else:
                o(f"{target}.decode({r}, version);")
            return
        if f.may_be_null and t in ("string", "bytes", "records"):
            o(f"{target} = {r}.nullable_{t}({compact}, {nullable});")
        else:
            o(f"{target} = {self.dec_elem_expr(f, compact, r)};")

    def dec_elem_expr(self, f, compact, r):
        t = f.elem
        if t in FIXED_SIZE:
            return f"{r}.{'boolean' if t == 'bool' else t}()"
        if t in ("string", "bytes", "records"):
            return f"{r}.{t}({compact})"
        raise SpecError(f"cannot decode {t}")

    def enc_field(self, o, f, compact):
        """Encodes a regular (untagged) field, handling nullability."""
        nullable = nullable_cond(self.msg, f)
        if not f.may_be_null:
            self.enc_value(o, f, f.ref, compact)
            return
        o(f"if (!{f.ref}) {{")
        o.indent()
        if nullable == "true":
            o(self.null_write(f, compact))
        elif nullable == "false":
            o("w.fail(encode_error::null_in_non_nullable_field);")
        else:
            o(f"if ({nullable}) {self.null_write(f, compact)} "
              "else w.fail(encode_error::null_in_non_nullable_field);")
        o.dedent()
        o("} else {")
        o.indent()
        if f.struct and not f.is_array:
            o(f"if ({nullable}) w.int8(1);" if nullable != "true" else "w.int8(1);")
        self.enc_value(o, f, f"(*{f.ref})", compact)
        o.dedent()
        o("}")

    def null_write(self, f, compact):
        if f.is_array:
            return f"w.null_array({compact});"
        if f.struct:
            return "w.int8(-1);"
        return f"w.null_{'string' if f.elem == 'string' else 'bytes'}({compact});"

    def size_field(self, o, f, compact, acc):
        if not f.may_be_null:
            self.size_value(o, f, f.ref, compact, acc)
            return
        o(f"if (!{f.ref}) {{")
        o.indent()
        if f.struct and not f.is_array:
            o(f"{acc} += 1;")
        elif f.is_array:
            o(f"{acc} += wire_size::array_length(0, {compact});")  # -1 has the size of 0
        else:
            fn = "null" if f.elem == "string" else "null_bytes"
            o(f"{acc} += wire_size::{fn}({compact});")
        o.dedent()
        o("} else {")
        o.indent()
        if f.struct and not f.is_array:
            o(f"{acc} += 1;")
        self.size_value(o, f, f"(*{f.ref})", compact, acc)
        o.dedent()
        o("}")

    def non_default_cond(self, f):
        """The condition under which a tagged field is written (its value differs from default)."""
        d = f.default_expr()
        if f.may_be_null:
            if f.default_is_null():
                return f"{f.ref}.has_value()"
            if f.is_array or f.elem in ("string", "bytes"):
                return f"(!{f.ref} || !{f.ref}->empty())"
            return f"(!{f.ref} || *{f.ref} != {f.value_cpp()}{{}})"
        if f.is_array or f.elem in ("string", "bytes", "records"):
            if f.elem == "string" and d:
                return f"{f.ref} != {d}"
            return f"!{f.ref}.empty()"
        if f.struct:
            return f"!({f.ref} == {f.value_cpp()}{{}})"
        if f.elem == "uuid":
            return f"!{f.ref}.is_zero()"
        return f"{f.ref} != {d if d is not None else f.value_cpp() + '{}'}"

    # --- the three functions ------------------------------------------------------------------

    def regular(self):
        return [f for f in self.s.fields if f.tag is None]

    def tagged(self):
        return sorted([f for f in self.s.fields if f.tag is not None], key=lambda f: f.tag)

    def emit_encode(self, o):
        msg = self.msg
        o(f"void {self.qual}::encode(writer& w, int16_t version) const {{")
        o.indent()
        used_flex = False
        body = Out()
        body.depth = o.depth
        for f in self.regular():
            cond = f.versions.cond("version", msg.valid)
            if cond == "false":
                continue
            compact = compact_expr(msg, f)
            used_flex |= "flexible" in compact
            if cond != "true":
                body(f"if ({cond}) {{")
                body.indent()
            self.enc_field(body, f, compact)
            if cond != "true":
                body.dedent()
                body("}")
        tagged = self.tagged()
        if msg.first_flexible is not None:
            used_flex = True
            body("if (flexible) {")
            body.indent()
            if not tagged:
                body("write_tag_section(w, unknown_tagged_fields);")
            else:
                body("uint32_t count = static_cast<uint32_t>(unknown_tagged_fields.size());")
                for f in tagged:
                    cond = f.versions.cond("version", msg.valid)
                    body(f"const bool has_{f.cname} = ({cond}) && {self.non_default_cond(f)};")
                    body(f"count += has_{f.cname} ? 1 : 0;")
                body("w.uvarint(count);")
                body("size_t next_unknown = 0;")
                for f in tagged:
                    body(f"next_unknown = write_unknown_tags_below(w, unknown_tagged_fields, next_unknown, {f.tag});")
                    body(f"if (has_{f.cname}) {{")
                    body.indent()
                    body(f"w.uvarint({f.tag});")
                    body("size_t field_size = 0;")
                    self.size_tagged_value(body, f, "field_size")
                    body("w.uvarint(static_cast<uint32_t>(field_size));")
                    self.enc_tagged_value(body, f)
                    body.dedent()
                    body("}")
                body("write_unknown_tags_rest(w, unknown_tagged_fields, next_unknown);")
            body.dedent()
            body("}")
        if used_flex:
            o(f"const bool flexible = {msg.flexible_expr()};")
        if not body.lines:
            o("(void)w;")
        if not uses_version(body.lines) and not (used_flex and "version" in msg.flexible_expr()):
            o("(void)version;")
        o.lines.extend(body.lines)
        o.dedent()
        o("}")
        o()

    def enc_tagged_value(self, o, f):
        if f.may_be_null:
            o(f"if (!{f.ref}) {{")
            o.indent()
            o(self.null_write(f, "true"))
            o.dedent()
            o("} else {")
            o.indent()
            if f.struct and not f.is_array:
                o("w.int8(1);")
            self.enc_value(o, f, f"(*{f.ref})", "true")
            o.dedent()
            o("}")
        else:
            self.enc_value(o, f, f.ref, "true")

    def size_tagged_value(self, o, f, acc):
        if f.may_be_null:
            self.size_field(o, f, "true", acc)
        else:
            self.size_value(o, f, f.ref, "true", acc)

    def emit_size(self, o):
        msg = self.msg
        o(f"size_t {self.qual}::encoded_size(int16_t version) const {{")
        o.indent()
        body = Out()
        body.depth = o.depth
        body("size_t n = 0;")
        used_flex = False
        for f in self.regular():
            cond = f.versions.cond("version", msg.valid)
            if cond == "false":
                continue
            compact = compact_expr(msg, f)
            used_flex |= "flexible" in compact
            if cond != "true":
                body(f"if ({cond}) {{")
                body.indent()
            self.size_field(body, f, compact, "n")
            if cond != "true":
                body.dedent()
                body("}")
        if msg.first_flexible is not None:
            used_flex = True
            body("if (flexible) {")
            body.indent()
            body("size_t count = unknown_tagged_fields.size();")
            body("for (const auto& t : unknown_tagged_fields) {")
            body("  n += wire_size::uvarint(t.tag) + wire_size::uvarint(static_cast<uint32_t>(t.data.size())) + t.data.size();")
            body("}")
            for f in self.tagged():
                cond = f.versions.cond("version", msg.valid)
                body(f"if (({cond}) && {self.non_default_cond(f)}) {{")
                body.indent()
                body("size_t field_size = 0;")
                self.size_tagged_value(body, f, "field_size")
                body(f"n += wire_size::uvarint({f.tag}) + wire_size::uvarint(static_cast<uint32_t>(field_size)) + field_size;")
                body("++count;")
                body.dedent()
                body("}")
            body("n += wire_size::uvarint(static_cast<uint32_t>(count));")
            body.dedent()
            body("}")
        body("return n;")
        if used_flex:
            o(f"const bool flexible = {msg.flexible_expr()};")
        if not uses_version(body.lines) and not (used_flex and "version" in msg.flexible_expr()):
            o("(void)version;")
        o.lines.extend(body.lines)
        o.dedent()
        o("}")
        o()

    def emit_decode(self, o):
        msg = self.msg
        o(f"void {self.qual}::decode(reader& r, int16_t version) {{")
        o.indent()
        body = Out()
        body.depth = o.depth
        used_flex = False
        for f in self.regular():
            cond = f.versions.cond("version", msg.valid)
            if cond == "false":
                continue
            compact = compact_expr(msg, f)
            used_flex |= "flexible" in compact
            if cond != "true":
                body(f"if ({cond}) {{")
                body.indent()
            self.dec_value(body, f, f.ref, compact, nullable_cond(msg, f))
            if cond != "true":
                body.dedent()
                body("}")
        if msg.first_flexible is not None:
            used_flex = True
            body("if (flexible) {")
            body.indent()
            body("const uint32_t count = r.uvarint();")
            body("for (uint32_t i = 0; i < count && r.ok(); ++i) {")
            body.indent()
            body("const uint32_t tag = r.uvarint();")
            body("reader field = r.sub(r.uvarint());")
            body("if (!r.ok()) break;")
            tagged = self.tagged()
            if tagged:
                body("switch (tag) {")
                for f in tagged:
                    cond = f.versions.cond("version", msg.valid)
                    body(f"  case {f.tag}:")
                    body(f"    if ({cond}) {{")
                    sub = Out()
                    sub.depth = body.depth + 3
                    self.dec_value(sub, f, f.ref, "true", "true", r="field")
                    body.lines.extend(sub.lines)
                    body("      field.expect_end();")
                    body("      if (!field.ok()) r.fail(field.error());")
                    body("      continue;")
                    body("    }")
                    body("    break;")
                body("  default:")
                body("    break;")
                body("}")
            body("unknown_tagged_fields.push_back({tag, field.rest()});")
            body.dedent()
            body("}")
            body.dedent()
            body("}")
        if used_flex:
            o(f"const bool flexible = {msg.flexible_expr()};")
        if not body.lines:
            o("(void)r;")
        if not uses_version(body.lines) and not (used_flex and "version" in msg.flexible_expr()):
            o("(void)version;")
        o.lines.extend(body.lines)
        o.dedent()
        o("}")
        o()


def emit_struct_decl(o, msg, s, is_root):
    name = s.name
    o(f"struct {name} {{")
    o.indent()
    if is_root:
        if msg.api_key is not None:
            o(f"static constexpr int16_t api_key = {msg.api_key};")
        o(f"static constexpr int16_t min_version = {msg.valid.lo};")
        o(f"static constexpr int16_t max_version = {msg.valid.hi};")
        ff = -1 if msg.first_flexible is None else msg.first_flexible
        o(f"static constexpr int16_t first_flexible_version = {ff};")
        o(f"static constexpr std::string_view spec_name = \"{msg.name}\";")
        o()
        for ns in msg.declaration_order():
            o(f"using {ns.name} = {msg.cname}_types::{ns.name};")
        if msg.order:
            o()
    for f in s.fields:
        o(f"{f.cpp_type()} {f.cname}{f.member_initializer()};")
    o("std::vector<tagged_field> unknown_tagged_fields;")
    o()
    if is_root:
        o("// Writes the fields of `version` to w; a null in a non-nullable version sets w's error.")
        o("void encode(writer& w, int16_t version) const;")
        o("// Reads the fields of `version` into a default-constructed object; errors stick to r.")
        o("void decode(reader& r, int16_t version);")
        o("// The exact number of bytes encode() writes at `version`.")
        o("[[nodiscard]] size_t encoded_size(int16_t version) const;")
    else:
        o("void encode(writer& w, int16_t version) const;")
        o("void decode(reader& r, int16_t version);")
        o("[[nodiscard]] size_t encoded_size(int16_t version) const;")
    o(f"bool operator==(const {name}&) const = default;")
    o.dedent()
    o("};")


def emit_message(msg, spec_version):
    h = Out()
    h(header_comment(spec_version).rstrip("\n"))
    h(f"// Source: {msg.source}")
    h("#pragma once")
    h()
    h("#include <cstdint>")
    h("#include <optional>")
    h("#include <string>")
    h("#include <string_view>")
    h("#include <vector>")
    h()
    h('#include "protocol/reader.h"')
    h('#include "protocol/writer.h"')
    h()
    h("namespace silt::protocol {")
    h()
    if msg.order:
        # Nested structs live in a namespace of their own and are named inside the message by
        # aliases: defined inside the message, a struct with default member initialisers is not
        # default-constructible (for std::optional) until the message is complete.
        h(f"// The nested structs of {msg.cname}; use them as {msg.cname}::<Name>.")
        h(f"namespace {msg.cname}_types {{")
        h()
        for ns in msg.declaration_order():
            emit_struct_decl(h, msg, ns, False)
            h()
        h(f"}}  // namespace {msg.cname}_types")
        h()
    h(f"// Kafka's {msg.name} (versions {msg.valid.lo}-{msg.valid.hi}). Nested structs keep the")
    h("// spec's type names and have the same encode, decode and encoded_size functions.")
    emit_struct_decl(h, msg, msg.root, True)
    h()
    h("}  // namespace silt::protocol")

    c = Out()
    c(header_comment(spec_version).rstrip("\n"))
    c(f'#include "protocol/generated/{msg.cname}.h"')
    c()
    c("#include <algorithm>")
    c("#include <climits>")
    c()
    c("namespace silt::protocol {")
    c()
    for s in msg.declaration_order():
        e = StructEmitter(msg, s, f"{msg.cname}_types::{s.name}")
        e.emit_encode(c)
        e.emit_decode(c)
        e.emit_size(c)
    e = StructEmitter(msg, msg.root, msg.cname)
    e.emit_encode(c)
    e.emit_decode(c)
    e.emit_size(c)
    c("}  // namespace silt::protocol")
    return h.text(), c.text()


def emit_error_codes(rows, spec_version):
    h = Out()
    h(header_comment(spec_version).rstrip("\n"))
    h("#pragma once")
    h()
    h("#include <cstdint>")
    h("#include <string_view>")
    h()
    h("namespace silt::protocol {")
    h()
    h("// Kafka's error codes: the values that go into responses.")
    h("enum class error_code : int16_t {")
    for code, name in rows:
        h(f"  {name.lower()} = {code},")
    h("};")
    h()
    h("// The Kafka name of `code` (e.g. \"UNKNOWN_TOPIC_OR_PARTITION\"), or \"\" when unknown.")
    h("[[nodiscard]] std::string_view error_code_name(error_code code);")
    h()
    h("}  // namespace silt::protocol")
    c = Out()
    c(header_comment(spec_version).rstrip("\n"))
    c('#include "protocol/generated/error_code.h"')
    c()
    c("namespace silt::protocol {")
    c()
    c("std::string_view error_code_name(error_code code) {")
    c("  switch (code) {")
    for code, name in rows:
        c(f"    case error_code::{name.lower()}:")
        c(f"      return \"{name}\";")
    c("  }")
    c("  return \"\";")
    c("}")
    c()
    c("}  // namespace silt::protocol")
    return h.text(), c.text()


def emit_api_table(apis, spec_version):
    """apis: list of (request Message, response Message) sorted by key."""
    h = Out()
    h(header_comment(spec_version).rstrip("\n"))
    h("#pragma once")
    h()
    h("#include <cstdint>")
    h("#include <optional>")
    h("#include <span>")
    h("#include <string_view>")
    h("#include <type_traits>")
    h()
    for req, resp in apis:
        h(f'#include "protocol/generated/{req.cname}.h"')
        h(f'#include "protocol/generated/{resp.cname}.h"')
    h()
    h("namespace silt::protocol {")
    h()
    h("// One row per Kafka API served by brokers; the source of ApiVersions and of dispatch.")
    h("struct api_info {")
    h("  int16_t key;")
    h("  std::string_view name;")
    h("  int16_t min_version;")
    h("  int16_t max_version;")
    h("  int16_t first_flexible_version;  // -1: never flexible")
    h("  bool latest_version_unstable;")
    h("};")
    h()
    h("enum class api_key : int16_t {")
    for req, _ in apis:
        h(f"  {snake(req.name[:-len('Request')])} = {req.api_key},")
    h("};")
    h()
    h(f"inline constexpr std::array<api_info, {len(apis)}> api_table = {{{{")
    for req, _ in apis:
        ff = -1 if req.first_flexible is None else req.first_flexible
        unstable = "true" if req.latest_unstable else "false"
        h(f'    {{{req.api_key}, "{req.name[:-len("Request")]}", {req.valid.lo}, {req.valid.hi}, {ff}, {unstable}}},')
    h("}};")
    h()
    h("// The row of `key`, or nullptr when brokers do not serve that API.")
    h("[[nodiscard]] const api_info* find_api(int16_t key);")
    h()
    h("// Calls f(std::type_identity<Request>{}, std::type_identity<Response>{}) for the API")
    h("// `key` and returns true, or returns false when `key` is not in the table.")
    h("template <typename F>")
    h("bool visit_api(int16_t key, F&& f) {")
    h("  switch (key) {")
    for req, resp in apis:
        h(f"    case {req.api_key}:")
        h(f"      f(std::type_identity<{req.cname}>{{}}, std::type_identity<{resp.cname}>{{}});")
        h("      return true;")
    h("    default:")
    h("      return false;")
    h("  }")
    h("}")
    h()
    h("}  // namespace silt::protocol")
    c = Out()
    c(header_comment(spec_version).rstrip("\n"))
    c('#include "protocol/generated/api_table.h"')
    c()
    c("namespace silt::protocol {")
    c()
    c("const api_info* find_api(int16_t key) {")
    c("  static const auto index = [] {")
    c("    std::array<int16_t, 1024> idx{};")
    c("    idx.fill(-1);")
    c("    for (size_t i = 0; i < api_table.size(); ++i) {")
    c("      idx[static_cast<size_t>(api_table[i].key)] = static_cast<int16_t>(i);")
    c("    }")
    c("    return idx;")
    c("  }();")
    c("  if (key < 0 || static_cast<size_t>(key) >= index.size() || index[static_cast<size_t>(key)] < 0) {")
    c("    return nullptr;")
    c("  }")
    c("  return &api_table[static_cast<size_t>(index[static_cast<size_t>(key)])];")
    c("}")
    c()
    c("}  // namespace silt::protocol")
    return h.text(), c.text()


def emit_messages_header(msgs, spec_version):
    h = Out()
    h(header_comment(spec_version).rstrip("\n"))
    h("#pragma once")
    h()
    h('#include "protocol/generated/api_table.h"')
    h('#include "protocol/generated/error_code.h"')
    for m in msgs:
        h(f'#include "protocol/generated/{m.cname}.h"')
    return h.text()


# ----------------------------------------------------------------------------------------------
# Test support: random values per field type, version-aware


def emit_random(msgs, apis, spec_version):
    o = Out()
    o(header_comment(spec_version).rstrip("\n"))
    o("// Random values for every generated message, used by the round-trip tests.")
    o('#include "protocol/tests/random_messages.h"')
    o()
    o('#include "protocol/generated/messages.h"')
    o()
    o("namespace silt::protocol::testing {")
    o("namespace {")
    o()
    # Forward declarations.
    for m in msgs:
        for s in m.declaration_order():
            o(f"void fill(random_source& rnd, {m.cname}::{s.name}& x, int16_t version);")
        o(f"void fill(random_source& rnd, {m.cname}& x, int16_t version);")
    o()
    for m in msgs:
        for s in m.declaration_order() + [m.root]:
            qual = m.cname if s is m.root else f"{m.cname}::{s.name}"
            o(f"void fill(random_source& rnd, {qual}& x, int16_t version) {{")
            o.indent()
            used = False
            for f in s.fields:
                cond = f.versions.cond("version", m.valid)
                if cond == "false":
                    continue
                used = True
                o(f"if ({cond}) {{")
                o.indent()
                nullable = nullable_cond(m, f)
                if f.may_be_null:
                    o(f"if (({nullable}) && rnd.chance(4)) {{")
                    o(f"  x.{f.cname}.reset();")
                    o("} else {")
                    o.indent()
                    o(f"auto& v = x.{f.cname}.emplace();")
                    fill_value(o, f, "v")
                    o.dedent()
                    o("}")
                else:
                    fill_value(o, f, f"x.{f.cname}")
                o.dedent()
                o("}")
            if m.first_flexible is not None:
                used = True
                o(f"if ({m.flexible_expr()}) rnd.unknown_tags(x.unknown_tagged_fields);")
            if not used:
                o("(void)rnd;")
                o("(void)x;")
            o("(void)version;")
            o.dedent()
            o("}")
            o()
    o("template <typename Msg>")
    o("void round_trip_case(std::vector<message_case>& out, bool is_request) {")
    o("  for (int16_t v = Msg::min_version; v <= Msg::max_version; ++v) {")
    o("    out.push_back({std::string(Msg::spec_name), is_request, v,")
    o("                   [](random_source& rnd, int16_t version) -> round_trip_result {")
    o("                     Msg m;")
    o("                     fill(rnd, m, version);")
    o("                     return check_round_trip(m, version);")
    o("                   }});")
    o("  }")
    o("}")
    o()
    o("}  // namespace")
    o()
    o("std::vector<message_case> all_message_cases() {")
    o("  std::vector<message_case> out;")
    for m in msgs:
        o(f"  round_trip_case<{m.cname}>(out, {'true' if m.kind == 'request' else 'false'});")
    o("  return out;")
    o("}")
    o()
    o("}  // namespace silt::protocol::testing")
    return o.text()


def fill_value(o, f, target):
    if f.is_array:
        o(f"{target}.resize(rnd.count());")
        o(f"for (auto& e : {target}) {{")
        o.indent()
        fill_elem(o, f, "e")
        o.dedent()
        o("}")
    else:
        fill_elem(o, f, target)


def fill_elem(o, f, target):
    t = f.elem
    if f.struct:
        o(f"fill(rnd, {target}, version);")
    elif t == "bool":
        o(f"{target} = rnd.chance(2);")
    elif t == "float64":
        o(f"{target} = rnd.real();")
    elif t == "uuid":
        o(f"{target} = rnd.any_uuid();")
    elif t in FIXED_SIZE:
        o(f"{target} = rnd.integer<{PRIMITIVES[t]}>();")
    elif t == "string":
        o(f"{target} = rnd.text();")
    elif t == "bytes":
        o(f"{target} = rnd.blob();")
    elif t == "records":
        o(f"{target} = rnd.records();")


# ----------------------------------------------------------------------------------------------


def write_if_changed(path, text, written):
    written.add(os.path.abspath(path))
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    default_specs = os.path.normpath(os.path.join(root, "..", "shared", "kafka-protocol"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--specs", default=os.path.join(default_specs, "message"),
                    help="directory of Kafka message spec JSON files")
    ap.add_argument("--errors", default=None,
                    help="error-code CSV (code,name); default: ../error-codes.csv beside --specs")
    ap.add_argument("--spec-version", default=None,
                    help="the Kafka version the specs come from, named in the file headers; "
                         "default: read from README.md beside --specs")
    ap.add_argument("--out", default=os.path.join(root, "src", "protocol", "generated"))
    ap.add_argument("--test-out", default=os.path.join(root, "src", "protocol", "tests"))
    args = ap.parse_args(argv)

    errors = args.errors or os.path.join(os.path.dirname(os.path.normpath(args.specs)),
                                         "error-codes.csv")
    spec_version = args.spec_version
    if spec_version is None:
        readme = os.path.join(os.path.dirname(os.path.normpath(args.specs)), "README.md")
        spec_version = "Apache Kafka, version unknown"
        if os.path.exists(readme):
            with open(readme, encoding="utf-8") as fh:
                text = fh.read()
            m = re.search(r"version ([0-9][0-9A-Za-z.\-]*)", text)
            c = re.search(r"commit ([0-9a-f]{40})", text)
            if m:
                spec_version = f"Apache Kafka {m.group(1)}"
                if c:
                    spec_version += f" at commit {c.group(1)[:12]}"
    try:
        specs = select(load_specs(args.specs))
        msgs = [Message(spec, fname) for fname, spec in specs]
    except SpecError as e:
        print(f"kafka_codegen: {e}", file=sys.stderr)
        return 1
    msgs.sort(key=lambda m: m.cname)
    by_key = {}
    for m in msgs:
        if m.kind in ("request", "response"):
            by_key.setdefault(m.api_key, {})[m.kind] = m
    apis = []
    for key in sorted(by_key):
        pair = by_key[key]
        if "request" not in pair or "response" not in pair:
            print(f"kafka_codegen: api key {key} lacks a request or a response", file=sys.stderr)
            return 1
        apis.append((pair["request"], pair["response"]))

    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.test_out, exist_ok=True)
    written = set()
    for m in msgs:
        h, c = emit_message(m, spec_version)
        write_if_changed(os.path.join(args.out, m.cname + ".h"), h, written)
        write_if_changed(os.path.join(args.out, m.cname + ".cc"), c, written)
    with open(errors, encoding="utf-8") as fh:
        rows = [(int(r["code"]), r["name"]) for r in csv.DictReader(fh)]
    h, c = emit_error_codes(rows, spec_version)
    write_if_changed(os.path.join(args.out, "error_code.h"), h, written)
    write_if_changed(os.path.join(args.out, "error_code.cc"), c, written)
    h, c = emit_api_table(apis, spec_version)
    write_if_changed(os.path.join(args.out, "api_table.h"), h, written)
    write_if_changed(os.path.join(args.out, "api_table.cc"), c, written)
    write_if_changed(os.path.join(args.out, "messages.h"), emit_messages_header(msgs, spec_version),
                     written)
    srcs = Out()
    srcs("# Generated by " + GENERATOR + ": the generated sources, for CMake.")
    srcs("set(SILT_PROTOCOL_GENERATED_SOURCES")
    for m in msgs:
        srcs(f"  generated/{m.cname}.cc")
    srcs("  generated/error_code.cc")
    srcs("  generated/api_table.cc")
    srcs(")")
    write_if_changed(os.path.join(args.out, "sources.cmake"), srcs.text(), written)
    write_if_changed(os.path.join(args.test_out, "random_messages.cc"),
                     emit_random(msgs, apis, spec_version), written)
    # Remove generated files of messages that no longer exist.
    for fname in os.listdir(args.out):
        path = os.path.abspath(os.path.join(args.out, fname))
        if path not in written and (fname.endswith(".h") or fname.endswith(".cc")):
            os.remove(path)
    print(f"kafka_codegen: {len(msgs)} messages, {len(apis)} APIs, {len(rows)} error codes "
          f"from {args.specs}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
