//! Generates the Rust message codecs of `wire` from Apache Kafka's JSON message schemas.
//!
//! Usage: `cargo run -p codegen -- <schema dir> <out dir> [<random helper file>]`, e.g.
//! `cargo run -p codegen -- /work/shared/kafka-message-schemas/wire wire/src/generated`.
//! Internal records: `cargo run -p codegen -- --data <schema dir> <out dir>`, e.g.
//! `cargo run -p codegen -- --data /work/shared/kafka-message-schemas/group-coordinator wire/src/group_records`.
//! The output is committed, so building `wire` never needs the schemas. The random-message
//! helper used by wire's differential tests goes to `<out dir>/../../tests/random/mod.rs`
//! unless a third argument names another file.
//!
//! Why our own generator rather than the `kafka-protocol` crate's messages:
//! * decoding must be bounded by the input: every length and count is checked against the
//!   bytes left before anything is allocated (kafka-protocol 0.18 aborts the process on a
//!   4-byte MetadataRequest whose array count is 0x7fffff00);
//! * `bytes`/`records` fields must be zero-copy slices of the request buffer;
//! * we want to follow the exact schema revision the broker implements, plain `String`s
//!   and `Vec`s, and Kafka's own encode-time checks (non-default values in fields a version
//!   lacks, nulls where not nullable) as errors instead of silent loss;
//! * the generator is small enough to read in one sitting, and so is its output.
//!
//! The schemas are JSON with `//` line comments (see SCHEMA-FORMAT.md next to them).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// An inclusive version range; empty when `lo > hi`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Versions {
    lo: i16,
    hi: i16,
}

impl Versions {
    const NONE: Versions = Versions { lo: 1, hi: 0 };

    fn parse(s: &str) -> Result<Versions> {
        let s = s.trim();
        if s == "none" {
            return Ok(Versions::NONE);
        }
        if let Some(lo) = s.strip_suffix('+') {
            return Ok(Versions {
                lo: lo.parse()?,
                hi: i16::MAX,
            });
        }
        if let Some((lo, hi)) = s.split_once('-') {
            return Ok(Versions {
                lo: lo.parse()?,
                hi: hi.parse()?,
            });
        }
        let v = s.parse()?;
        Ok(Versions { lo: v, hi: v })
    }
    fn is_empty(&self) -> bool {
        self.lo > self.hi
    }
    fn intersect(&self, o: &Versions) -> Versions {
        Versions {
            lo: self.lo.max(o.lo),
            hi: self.hi.min(o.hi),
        }
    }
}

#[derive(Clone, Debug)]
enum Ty {
    Bool,
    I8,
    I16,
    U16,
    I32,
    U32,
    I64,
    F64,
    Str,
    Bytes,
    Records,
    Uuid,
    Struct(String),
    Array(Box<Ty>),
}

impl Ty {
    fn parse(s: &str) -> Result<Ty> {
        Ok(match s {
            "bool" => Ty::Bool,
            "int8" => Ty::I8,
            "int16" => Ty::I16,
            "uint16" => Ty::U16,
            "int32" => Ty::I32,
            "uint32" => Ty::U32,
            "int64" => Ty::I64,
            "float64" => Ty::F64,
            "string" => Ty::Str,
            "bytes" => Ty::Bytes,
            "records" => Ty::Records,
            "uuid" => Ty::Uuid,
            _ if s.starts_with("[]") => Ty::Array(Box::new(Ty::parse(&s[2..])?)),
            _ if s.starts_with(|c: char| c.is_ascii_uppercase()) => Ty::Struct(s.to_string()),
            _ => bail!("unknown type {s}"),
        })
    }
    /// Rust type of a non-null value.
    fn rust(&self) -> String {
        match self {
            Ty::Bool => "bool".into(),
            Ty::I8 => "i8".into(),
            Ty::I16 => "i16".into(),
            Ty::U16 => "u16".into(),
            Ty::I32 => "i32".into(),
            Ty::U32 => "u32".into(),
            Ty::I64 => "i64".into(),
            Ty::F64 => "f64".into(),
            Ty::Str => "String".into(),
            Ty::Bytes | Ty::Records => "Bytes".into(),
            Ty::Uuid => "Uuid".into(),
            Ty::Struct(n) => n.clone(),
            Ty::Array(e) => format!("Vec<{}>", e.rust()),
        }
    }
    /// Fixed encoded size of scalar types.
    fn fixed_size(&self) -> Option<usize> {
        Some(match self {
            Ty::Bool | Ty::I8 => 1,
            Ty::I16 | Ty::U16 => 2,
            Ty::I32 | Ty::U32 => 4,
            Ty::I64 | Ty::F64 => 8,
            Ty::Uuid => 16,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug)]
struct Field {
    json_name: String,
    name: String,
    ty: Ty,
    versions: Versions,
    nullable: Versions,
    tagged: Versions,
    tag: Option<u32>,
    ignorable: bool,
    default: Option<Value>,
    /// Field-level "flexibleVersions" override (RequestHeader.ClientId: "none").
    flexible: Option<Versions>,
    about: String,
}

impl Field {
    /// Rust type of the field (Option when nullable in any version; records always).
    fn rust_type(&self) -> String {
        if self.is_option() {
            format!("Option<{}>", self.ty.rust())
        } else {
            self.ty.rust()
        }
    }
    fn is_option(&self) -> bool {
        matches!(self.ty, Ty::Records) || !self.nullable.is_empty()
    }
}

struct StructDef {
    name: String,
    fields: Vec<Field>,
    about: String,
}

struct Schema {
    file_stem: String,
    name: String,
    kind: String,
    api_key: Option<i16>,
    valid: Versions,
    flexible: Versions,
    /// Top struct first, then nested structs in schema order, then commonStructs.
    structs: Vec<StructDef>,
}

fn strip_comments(text: &str) -> String {
    // Schemas only have whole-line comments and trailing comments outside strings; drop
    // everything from a `//` that is not inside a string literal.
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_str = false;
        let mut prev = '\0';
        let mut cut = line.len();
        for (i, c) in line.char_indices() {
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            }
            if !in_str && c == '/' && prev == '/' {
                cut = i - 1;
                break;
            }
            prev = c;
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out
}

fn snake(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_ascii_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            let prev_upper = i > 0 && chars[i - 1].is_ascii_uppercase();
            if i > 0 && (prev_lower || (prev_upper && next_lower)) {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    match out.as_str() {
        "type" | "match" | "ref" | "self" | "struct" | "move" => format!("r#{out}"),
        _ => out,
    }
}

fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).map(|x| match x {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

fn parse_fields(
    list: &Value,
    structs: &mut Vec<StructDef>,
    common: &BTreeMap<String, ()>,
) -> Result<Vec<Field>> {
    let mut fields = Vec::new();
    for f in list
        .as_array()
        .ok_or_else(|| anyhow!("fields is not an array"))?
    {
        let json_name = str_of(f, "name").ok_or_else(|| anyhow!("field without name"))?;
        let ty = Ty::parse(&str_of(f, "type").ok_or_else(|| anyhow!("field without type"))?)?;
        let vs = |k: &str| -> Result<Versions> {
            str_of(f, k).map_or(Ok(Versions::NONE), |s| Versions::parse(&s))
        };
        let tag = match str_of(f, "tag") {
            Some(t) => Some(
                t.parse::<u32>()
                    .with_context(|| format!("tag of {json_name}"))?,
            ),
            None => None,
        };
        let field = Field {
            name: snake(&json_name),
            json_name: json_name.clone(),
            versions: vs("versions")?,
            nullable: vs("nullableVersions")?,
            tagged: if tag.is_some() {
                vs("taggedVersions")?
            } else {
                Versions::NONE
            },
            tag,
            ignorable: f.get("ignorable").and_then(Value::as_bool).unwrap_or(false),
            default: f.get("default").cloned(),
            flexible: match str_of(f, "flexibleVersions") {
                Some(s) => Some(Versions::parse(&s)?),
                None => None,
            },
            about: str_of(f, "about").unwrap_or_default(),
            ty,
        };
        let mut elem = &field.ty;
        while let Ty::Array(e) = elem {
            elem = e;
        }
        if let Ty::Struct(name) = elem {
            if let Some(sub) = f.get("fields") {
                let pos = structs.len();
                structs.push(StructDef {
                    name: name.clone(),
                    fields: vec![],
                    about: field.about.clone(),
                });
                structs[pos].fields = parse_fields(sub, structs, common)?;
            } else if !common.contains_key(name) {
                bail!("struct {name} has no fields and is not a common struct");
            }
        }
        if matches!(
            field.ty,
            Ty::Uuid | Ty::Bool | Ty::I8 | Ty::I16 | Ty::I32 | Ty::I64 | Ty::F64
        ) && !field.nullable.is_empty()
        {
            bail!("nullable scalar field {json_name}");
        }
        fields.push(field);
    }
    Ok(fields)
}

fn load(path: &Path) -> Result<Schema> {
    let text = std::fs::read_to_string(path)?;
    let json: Value = serde_json::from_str(&strip_comments(&text))
        .with_context(|| format!("parsing {}", path.display()))?;
    let name = str_of(&json, "name").ok_or_else(|| anyhow!("no name"))?;
    let common_defs = json
        .get("commonStructs")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let common: BTreeMap<String, ()> = common_defs
        .iter()
        .filter_map(|c| str_of(c, "name"))
        .map(|n| (n, ()))
        .collect();
    let mut structs = vec![StructDef {
        name: name.clone(),
        fields: vec![],
        about: String::new(),
    }];
    structs[0].fields = parse_fields(&json["fields"], &mut structs, &common)?;
    for c in &common_defs {
        let pos = structs.len();
        let cname = str_of(c, "name").unwrap();
        structs.push(StructDef {
            name: cname,
            fields: vec![],
            about: String::new(),
        });
        structs[pos].fields = parse_fields(&c["fields"], &mut structs, &common)?;
    }
    Ok(Schema {
        file_stem: path.file_stem().unwrap().to_string_lossy().into_owned(),
        kind: str_of(&json, "type").unwrap_or_default(),
        api_key: json.get("apiKey").and_then(Value::as_i64).map(|k| k as i16),
        valid: Versions::parse(&str_of(&json, "validVersions").unwrap_or_default())?,
        flexible: Versions::parse(&str_of(&json, "flexibleVersions").unwrap_or("none".into()))?,
        name,
        structs,
    })
}

// ---------------------------------------------------------------------------------------
// Code generation

/// Generates one schema file; `valid` narrows version conditions.
struct Gen<'a> {
    schema: &'a Schema,
}

impl Gen<'_> {
    /// Rust boolean expression for `version` in `r` (within the message's valid versions).
    fn cond(&self, r: Versions) -> String {
        let valid = self.schema.valid;
        let r = r.intersect(&valid);
        if r.is_empty() {
            return "false".into();
        }
        let mut parts = vec![];
        if r.lo > valid.lo {
            parts.push(format!("version >= {}", r.lo));
        }
        if r.hi < valid.hi {
            parts.push(format!("version <= {}", r.hi));
        }
        if parts.is_empty() {
            "true".into()
        } else {
            parts.join(" && ")
        }
    }

    /// Versions where the field is a regular (not tagged) field.
    fn regular(&self, f: &Field) -> Versions {
        if f.tagged.is_empty() {
            f.versions
        } else {
            f.versions.intersect(&Versions {
                lo: i16::MIN,
                hi: f.tagged.lo - 1,
            })
        }
    }

    fn tagged(&self, f: &Field) -> Versions {
        f.versions.intersect(&f.tagged)
    }

    /// Expression for "compact encoding" of a field.
    fn flex(&self, f: &Field) -> String {
        match f.flexible {
            Some(v) => self.cond(v),
            None => "flexible".into(),
        }
    }

    fn default_expr(&self, f: &Field) -> Result<String> {
        let d = f.default.as_ref().map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        let wrap = |s: String| {
            if f.is_option() {
                format!("Some({s})")
            } else {
                s
            }
        };
        if d.as_deref() == Some("null") {
            if !f.is_option() {
                bail!("null default for non-nullable {}", f.json_name);
            }
            return Ok("None".into());
        }
        Ok(match &f.ty {
            Ty::Bool => match d.as_deref() {
                None | Some("false") => "false".into(),
                Some("true") => "true".into(),
                Some(o) => bail!("bad bool default {o}"),
            },
            Ty::I8 | Ty::I16 | Ty::U16 | Ty::I32 | Ty::U32 | Ty::I64 => {
                let s = d.unwrap_or_else(|| "0".into());
                let n: i128 = if let Some(h) = s.strip_prefix("0x") {
                    i128::from_str_radix(h, 16)?
                } else if let Some(h) = s.strip_prefix("-0x") {
                    -i128::from_str_radix(h, 16)?
                } else {
                    s.parse()?
                };
                format!("{n}{}", f.ty.rust())
            }
            Ty::F64 => {
                let n: f64 = d.unwrap_or_else(|| "0".into()).parse()?;
                format!("{n:?}f64")
            }
            Ty::Str => wrap(match d {
                None => "String::new()".into(),
                Some(s) => format!("String::from({s:?})"),
            }),
            Ty::Bytes => wrap("Bytes::new()".into()),
            Ty::Records => "None".into(),
            Ty::Uuid => "Uuid::ZERO".into(),
            Ty::Struct(n) => wrap(format!("{n}::default()")),
            // Annotated for scalar elements so `x != Vec::new()` infers (String: PartialEq<_>).
            Ty::Array(e) if !matches!(**e, Ty::Struct(_)) => {
                wrap(format!("Vec::<{}>::new()", e.rust()))
            }
            Ty::Array(_) => wrap("Vec::new()".into()),
        })
    }

    // --- decode -------------------------------------------------------------------------

    /// Expression decoding a non-null value of `ty` from `buf`.
    fn decode_value(&self, ty: &Ty, flex: &str, what: &str) -> String {
        match ty {
            Ty::Bool => "read_bool(buf)?".into(),
            Ty::I8 => "read_i8(buf)?".into(),
            Ty::I16 => "read_i16(buf)?".into(),
            Ty::U16 => "read_u16(buf)?".into(),
            Ty::I32 => "read_i32(buf)?".into(),
            Ty::U32 => "read_u32(buf)?".into(),
            Ty::I64 => "read_i64(buf)?".into(),
            Ty::F64 => "read_f64(buf)?".into(),
            Ty::Uuid => "read_uuid(buf)?".into(),
            Ty::Str => format!("read_string(buf, {flex}, {what:?})?"),
            Ty::Bytes | Ty::Records => format!("read_bytes(buf, {flex}, {what:?})?"),
            Ty::Struct(n) => format!("{n}::decode(buf, version)?"),
            Ty::Array(e) => format!(
                "{{ let n = read_array_len(buf, {flex}, {min})?.ok_or(DecodeError::NullNotAllowed {{ field: {what:?} }})?; \
                 let mut v = Vec::with_capacity(initial_capacity(n)); for _ in 0..n {{ v.push({elem}); }} v }}",
                min = self.min_len_expr(e, flex),
                elem = self.decode_value(e, flex, what)
            ),
        }
    }

    /// Expression decoding a possibly-null value (type Option<T>).
    fn decode_nullable(&self, ty: &Ty, flex: &str) -> String {
        match ty {
            Ty::Str => format!("read_nullable_string(buf, {flex})?"),
            Ty::Bytes | Ty::Records => format!("read_nullable_bytes(buf, {flex})?"),
            Ty::Struct(n) => format!("if read_i8(buf)? < 0 {{ None }} else {{ Some({n}::decode(buf, version)?) }}"),
            Ty::Array(e) => format!(
                "match read_array_len(buf, {flex}, {min})? {{ None => None, Some(n) => {{ \
                 let mut v = Vec::with_capacity(initial_capacity(n)); for _ in 0..n {{ v.push({elem}); }} Some(v) }} }}",
                min = self.min_len_expr(e, flex),
                elem = self.decode_value(e, flex, "element")
            ),
            _ => unreachable!(),
        }
    }

    /// Statement assigning field `f` decoded from `buf` (version known to have it).
    fn decode_field(&self, f: &Field, flex: &str) -> String {
        let name = &f.name;
        if !f.is_option() {
            return format!(
                "this.{name} = {};",
                self.decode_value(&f.ty, flex, &f.json_name)
            );
        }
        let nullable = self.cond(f.nullable);
        let value = self.decode_nullable(&f.ty, flex);
        match nullable.as_str() {
            "true" => format!("this.{name} = {value};"),
            "false" => format!(
                "this.{name} = Some({});",
                self.decode_value(&f.ty, flex, &f.json_name)
            ),
            c => format!(
                "this.{name} = if {c} {{ {value} }} else {{ Some({}) }};",
                self.decode_value(&f.ty, flex, &f.json_name)
            ),
        }
    }

    /// Minimum encoded size of a value of `ty` (non-null form not assumed).
    fn min_len_expr(&self, ty: &Ty, flex: &str) -> String {
        if let Some(n) = ty.fixed_size() {
            return n.to_string();
        }
        match ty {
            Ty::Str => format!("if {flex} {{ 1 }} else {{ 2 }}"),
            Ty::Bytes | Ty::Records | Ty::Array(_) => format!("if {flex} {{ 1 }} else {{ 4 }}"),
            Ty::Struct(n) => format!("{n}::min_encoded_len(version)"),
            _ => unreachable!(),
        }
    }

    fn min_len_field(&self, f: &Field, flex: &str) -> String {
        if let Ty::Struct(_) = f.ty {
            if f.is_option() {
                let nullable = self.cond(f.nullable);
                if nullable != "false" {
                    return format!(
                        "if {nullable} {{ 1 }} else {{ {} }}",
                        self.min_len_expr(&f.ty, flex)
                    );
                }
            }
        }
        self.min_len_expr(&f.ty, flex)
    }

    // --- encode -------------------------------------------------------------------------

    /// Statements encoding the non-null value `r` (a reference expression) of `ty`.
    fn encode_value(&self, ty: &Ty, r: &str, flex: &str) -> String {
        match ty {
            Ty::Bool => format!("write_bool(buf, *{r});"),
            Ty::I8 => format!("write_i8(buf, *{r});"),
            Ty::I16 => format!("write_i16(buf, *{r});"),
            Ty::U16 => format!("write_u16(buf, *{r});"),
            Ty::I32 => format!("write_i32(buf, *{r});"),
            Ty::U32 => format!("write_u32(buf, *{r});"),
            Ty::I64 => format!("write_i64(buf, *{r});"),
            Ty::F64 => format!("write_f64(buf, *{r});"),
            Ty::Uuid => format!("write_uuid(buf, {r});"),
            Ty::Str => format!("write_string(buf, {r}, {flex})?;"),
            Ty::Bytes | Ty::Records => format!("write_bytes(buf, {r}, {flex})?;"),
            Ty::Struct(_) => format!("{r}.encode(buf, version)?;"),
            Ty::Array(e) => format!(
                "write_array_len(buf, Some({r}.len()), {flex})?; for e in {r}.iter() {{ {} }}",
                self.encode_value(e, "e", flex)
            ),
        }
    }

    /// Expression: encoded size of the non-null value `r` of `ty`.
    fn len_value(&self, ty: &Ty, r: &str, flex: &str) -> String {
        if let Some(n) = ty.fixed_size() {
            return n.to_string();
        }
        match ty {
            Ty::Str => format!("string_len({r}, {flex})"),
            Ty::Bytes | Ty::Records => format!("bytes_len({r}, {flex})"),
            Ty::Struct(_) => format!("{r}.encoded_len(version)"),
            Ty::Array(e) => {
                let elem = match e.fixed_size() {
                    Some(n) => format!("{r}.len() * {n}"),
                    None => format!(
                        "{r}.iter().map(|e| {}).sum::<usize>()",
                        self.len_value(e, "e", flex)
                    ),
                };
                format!("array_len_len(Some({r}.len()), {flex}) + {elem}")
            }
            _ => unreachable!(),
        }
    }

    /// Statements encoding field `f` (version known to have it).
    fn encode_field(&self, f: &Field, flex: &str) -> String {
        let r = format!("(&self.{})", f.name);
        if !f.is_option() {
            return self.encode_value(&f.ty, &r, flex);
        }
        let nullable = self.cond(f.nullable);
        let null = match (&f.ty, nullable.as_str()) {
            (_, "false") => format!(
                "return Err(EncodeError::NullNotAllowed {{ field: {:?} }})",
                f.json_name
            ),
            (Ty::Str, _) => format!("write_nullable_string(buf, None, {flex})?"),
            (Ty::Bytes | Ty::Records, _) => format!("write_nullable_bytes(buf, None, {flex})?"),
            (Ty::Array(_), _) => format!("write_array_len(buf, None, {flex})?"),
            (Ty::Struct(_), _) => "write_i8(buf, -1)".into(),
            _ => unreachable!(),
        };
        let null = match nullable.as_str() {
            "true" | "false" => null,
            c => format!(
                "if {c} {{ {null} }} else {{ return Err(EncodeError::NullNotAllowed {{ field: {:?} }}) }}",
                f.json_name
            ),
        };
        let some = match (&f.ty, nullable.as_str()) {
            (Ty::Struct(_), "false") => "v.encode(buf, version)?;".into(),
            (Ty::Struct(_), "true") => "write_i8(buf, 1); v.encode(buf, version)?;".into(),
            (Ty::Struct(_), c) => {
                format!("if {c} {{ write_i8(buf, 1); }} v.encode(buf, version)?;")
            }
            _ => self.encode_value(&f.ty, "v", flex),
        };
        format!("match {r} {{ None => {{ {null}; }} Some(v) => {{ {some} }} }}")
    }

    /// Expression: encoded size of field `f`.
    fn len_field(&self, f: &Field, flex: &str) -> String {
        let r = format!("(&self.{})", f.name);
        if !f.is_option() {
            return self.len_value(&f.ty, &r, flex);
        }
        let nullable = self.cond(f.nullable);
        let null = match &f.ty {
            Ty::Str => format!("nullable_string_len(None, {flex})"),
            Ty::Bytes | Ty::Records => format!("nullable_bytes_len(None, {flex})"),
            Ty::Array(_) => format!("array_len_len(None, {flex})"),
            Ty::Struct(_) => "1".into(),
            _ => unreachable!(),
        };
        let some = match (&f.ty, nullable.as_str()) {
            (Ty::Struct(_), "false") => "v.encoded_len(version)".into(),
            (Ty::Struct(_), "true") => "1 + v.encoded_len(version)".into(),
            (Ty::Struct(_), c) => format!("usize::from({c}) + v.encoded_len(version)"),
            _ => self.len_value(&f.ty, "v", flex),
        };
        format!("match {r} {{ None => {null}, Some(v) => {some} }}")
    }

    // --- random (test helper) ------------------------------------------------------------

    fn random_value(&self, ty: &Ty, module: &str) -> String {
        match ty {
            Ty::Bool => "rng.gen()".into(),
            Ty::I8 | Ty::I16 | Ty::U16 | Ty::I32 | Ty::U32 | Ty::I64 => "rng.gen()".into(),
            Ty::F64 => "rng.gen_range(-1.0e9..1.0e9)".into(),
            Ty::Uuid => "Uuid(rng.gen())".into(),
            Ty::Str => "random_string(rng)".into(),
            Ty::Bytes | Ty::Records => "random_bytes(rng)".into(),
            Ty::Struct(n) => format!("{module}::{n}::random(rng, version)"),
            Ty::Array(e) => format!(
                "(0..rng.gen_range(0..4)).map(|_| {}).collect()",
                self.random_value(e, module)
            ),
        }
    }

    fn random_field(&self, f: &Field, module: &str) -> Result<String> {
        let present = self.cond(f.versions);
        let default = self.default_expr(f)?;
        let default = if let Ty::Struct(_) = &f.ty {
            default.replace(
                &format!("{}::default()", f.ty.rust()),
                &format!("{module}::{}::default()", f.ty.rust()),
            )
        } else {
            default
        };
        let value = self.random_value(&f.ty, module);
        let value = if !f.is_option() {
            value
        } else {
            match self.cond(f.nullable).as_str() {
                "false" => format!("Some({value})"),
                c => format!("if {c} && rng.gen_ratio(1, 4) {{ None }} else {{ Some({value}) }}"),
            }
        };
        // Tagged fields: also often leave the default so "absent" is covered.
        let value = if !self.tagged(f).is_empty() {
            format!("if rng.gen_ratio(1, 3) {{ {default} }} else {{ {value} }}")
        } else {
            value
        };
        Ok(match present.as_str() {
            "true" => value,
            "false" => default,
            c => format!("if {c} {{ {value} }} else {{ {default} }}"),
        })
    }
}

fn doc(out: &mut String, indent: &str, text: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "{indent}/// {}", line.trim());
    }
}

fn generate_file(s: &Schema) -> Result<String> {
    let g = Gen { schema: s };
    let mut o = String::new();
    writeln!(
        o,
        "// Generated by codegen from Kafka's {}.json. Do not edit.",
        s.file_stem
    )?;
    writeln!(o)?;
    writeln!(o, "use bytes::{{Bytes, BytesMut}};")?;
    writeln!(o)?;
    writeln!(o, "use crate::primitives::*;")?;
    let flexible = g.cond(s.flexible);
    for (i, st) in s.structs.iter().enumerate() {
        writeln!(o)?;
        if i == 0 {
            writeln!(
                o,
                "/// {} (valid versions {}-{}{}).",
                s.name,
                s.valid.lo,
                s.valid.hi,
                if s.flexible.is_empty() {
                    String::new()
                } else {
                    format!(", flexible from {}", s.flexible.lo)
                }
            )?;
        } else if !st.about.is_empty() {
            doc(&mut o, "", &st.about);
        }
        writeln!(o, "#[derive(Debug, Clone, PartialEq)]")?;
        writeln!(o, "pub struct {} {{", st.name)?;
        for f in &st.fields {
            doc(&mut o, "    ", &f.about);
            let mut notes = format!("Versions {}", fmt_versions(f.versions));
            if !f.nullable.is_empty() {
                let _ = write!(notes, ", nullable {}", fmt_versions(f.nullable));
            }
            if let Some(tag) = f.tag {
                let _ = write!(notes, ", tag {tag} in {}", fmt_versions(f.tagged));
            }
            writeln!(o, "    ///\n    /// {notes}.")?;
            writeln!(o, "    pub {}: {},", f.name, f.rust_type())?;
        }
        writeln!(
            o,
            "    /// Tagged fields this version of the schema does not know, kept as read."
        )?;
        writeln!(o, "    pub unknown_tagged_fields: Vec<(u32, Bytes)>,")?;
        writeln!(o, "}}\n")?;

        // Default
        writeln!(
            o,
            "impl Default for {} {{\n    fn default() -> Self {{\n        Self {{",
            st.name
        )?;
        for f in &st.fields {
            writeln!(o, "            {}: {},", f.name, g.default_expr(f)?)?;
        }
        writeln!(
            o,
            "            unknown_tagged_fields: Vec::new(),\n        }}\n    }}\n}}\n"
        )?;

        // min_encoded_len
        writeln!(o, "impl {} {{", st.name)?;
        writeln!(
            o,
            "    /// The fewest bytes an encoding of this struct takes at `version`."
        )?;
        writeln!(o, "    pub fn min_encoded_len(version: i16) -> usize {{")?;
        writeln!(o, "        let flexible = {flexible};")?;
        writeln!(o, "        let mut n = 0usize;")?;
        for f in &st.fields {
            let c = g.cond(g.regular(f));
            let e = g.min_len_field(f, &g.flex(f));
            match c.as_str() {
                "false" => {}
                "true" => writeln!(o, "        n += {e};")?,
                c => writeln!(o, "        if {c} {{ n += {e}; }}")?,
            }
        }
        writeln!(
            o,
            "        if flexible {{ n += 1; }}\n        n\n    }}\n}}\n"
        )?;

        let version_check = |err: &str| {
            if i == 0 {
                format!(
                    "        if !({}..={}).contains(&version) {{ return Err({err}::UnsupportedVersion {{ api_key: {}, version }}); }}\n",
                    s.valid.lo,
                    s.valid.hi,
                    s.api_key.unwrap_or(-1)
                )
            } else {
                String::new()
            }
        };

        // Decodable
        let mut tagged: Vec<&Field> = st
            .fields
            .iter()
            .filter(|f| !g.tagged(f).is_empty())
            .collect();
        tagged.sort_by_key(|f| f.tag);
        writeln!(o, "impl Decodable for {} {{", st.name)?;
        writeln!(
            o,
            "    fn decode(buf: &mut Bytes, version: i16) -> Result<Self, DecodeError> {{"
        )?;
        o.push_str(&version_check("DecodeError"));
        writeln!(o, "        let flexible = {flexible};")?;
        writeln!(o, "        let mut this = Self::default();")?;
        for f in &st.fields {
            let c = g.cond(g.regular(f));
            let stmt = g.decode_field(f, &g.flex(f));
            match c.as_str() {
                "false" => {}
                "true" => writeln!(o, "        {stmt}")?,
                c => writeln!(o, "        if {c} {{ {stmt} }}")?,
            }
        }
        writeln!(o, "        if flexible {{")?;
        writeln!(o, "            for _ in 0..read_tag_count(buf)? {{")?;
        writeln!(
            o,
            "                let (tag, data) = read_tagged_field(buf)?;"
        )?;
        if tagged.is_empty() {
            writeln!(
                o,
                "                this.unknown_tagged_fields.push((tag, data));"
            )?;
        } else {
            writeln!(o, "                match tag {{")?;
            for f in &tagged {
                let c = g.cond(g.tagged(f));
                let guard = if c == "true" {
                    String::new()
                } else {
                    format!(" if {c}")
                };
                writeln!(
                    o,
                    "                    {}{guard} => {{ let buf = &mut data.clone(); {} }}",
                    f.tag.unwrap(),
                    g.decode_field(f, "true")
                )?;
            }
            writeln!(
                o,
                "                    _ => this.unknown_tagged_fields.push((tag, data)),"
            )?;
            writeln!(o, "                }}")?;
        }
        writeln!(
            o,
            "            }}\n        }}\n        Ok(this)\n    }}\n}}\n"
        )?;

        // Encodable
        writeln!(o, "impl Encodable for {} {{", st.name)?;
        writeln!(
            o,
            "    fn encode(&self, buf: &mut BytesMut, version: i16) -> Result<(), EncodeError> {{"
        )?;
        o.push_str(&version_check("EncodeError"));
        writeln!(o, "        let flexible = {flexible};")?;
        for f in &st.fields {
            let regular = g.cond(g.regular(f));
            if regular != "false" {
                let stmt = g.encode_field(f, &g.flex(f));
                if regular == "true" {
                    writeln!(o, "        {stmt}")?;
                } else {
                    writeln!(o, "        if {regular} {{ {stmt} }}")?;
                }
            }
            let present = g.cond(f.versions);
            if !f.ignorable && present != "true" {
                let absent = if present == "false" {
                    String::new()
                } else {
                    format!("!({present}) && ")
                };
                writeln!(
                    o,
                    "        if {absent}self.{} != {} {{ return Err(EncodeError::FieldNotInVersion {{ field: {:?}, version }}); }}",
                    f.name,
                    g.default_expr(f)?,
                    f.json_name
                )?;
            }
        }
        writeln!(o, "        if flexible {{")?;
        writeln!(
            o,
            "            let mut count = self.unknown_tagged_fields.len();"
        )?;
        for f in &tagged {
            writeln!(
                o,
                "            if {} && self.{} != {} {{ count += 1; }}",
                g.cond(g.tagged(f)),
                f.name,
                g.default_expr(f)?
            )?;
        }
        writeln!(o, "            write_uvarint(buf, count as u32);")?;
        writeln!(o, "            let mut next = 0;")?;
        for f in &tagged {
            let tag = f.tag.unwrap();
            writeln!(
                o,
                "            if {} && self.{} != {} {{",
                g.cond(g.tagged(f)),
                f.name,
                g.default_expr(f)?
            )?;
            writeln!(o, "                write_unknown_tagged_below(buf, &self.unknown_tagged_fields, &mut next, {tag});")?;
            writeln!(o, "                write_uvarint(buf, {tag});")?;
            writeln!(
                o,
                "                write_uvarint(buf, ({}) as u32);",
                g.len_field(f, "true")
            )?;
            writeln!(o, "                {}", g.encode_field(f, "true"))?;
            writeln!(o, "            }}")?;
        }
        writeln!(
            o,
            "            write_unknown_tagged_rest(buf, &self.unknown_tagged_fields, next);"
        )?;
        writeln!(o, "        }}\n        Ok(())\n    }}\n")?;

        // encoded_len
        writeln!(o, "    fn encoded_len(&self, version: i16) -> usize {{")?;
        writeln!(o, "        let flexible = {flexible};")?;
        writeln!(o, "        let mut n = 0usize;")?;
        for f in &st.fields {
            let c = g.cond(g.regular(f));
            let e = g.len_field(f, &g.flex(f));
            match c.as_str() {
                "false" => {}
                "true" => writeln!(o, "        n += {e};")?,
                c => writeln!(o, "        if {c} {{ n += {e}; }}")?,
            }
        }
        writeln!(o, "        if flexible {{")?;
        writeln!(
            o,
            "            let mut count = self.unknown_tagged_fields.len();"
        )?;
        writeln!(
            o,
            "            n += unknown_tagged_len(&self.unknown_tagged_fields);"
        )?;
        for f in &tagged {
            let tag = f.tag.unwrap();
            writeln!(
                o,
                "            if {} && self.{} != {} {{ count += 1; let len = {}; n += uvarint_len({tag}) + uvarint_len(len as u32) + len; }}",
                g.cond(g.tagged(f)),
                f.name,
                g.default_expr(f)?,
                g.len_field(f, "true")
            )?;
        }
        writeln!(o, "            n += uvarint_len(count as u32);")?;
        writeln!(o, "        }}\n        n\n    }}\n}}")?;

        if s.kind == "response" {
            writeln!(o)?;
            error_codes_impl(&mut o, s, st)?;
        }

        if i == 0 {
            writeln!(o)?;
            writeln!(o, "impl Message for {} {{", st.name)?;
            writeln!(o, "    const API_KEY: i16 = {};", s.api_key.unwrap_or(-1))?;
            writeln!(o, "    const MIN_VERSION: i16 = {};", s.valid.lo)?;
            writeln!(o, "    const MAX_VERSION: i16 = {};", s.valid.hi)?;
            let fm = if s.flexible.is_empty() {
                "i16::MAX".to_string()
            } else {
                s.flexible.lo.to_string()
            };
            writeln!(o, "    const FLEXIBLE_MIN: i16 = {fm};")?;
            writeln!(o, "}}")?;
        }
    }
    Ok(o)
}

/// Whether a field is an error code the metrics count (Kafka's `errorCounts` looks at the
/// `ErrorCode` fields of a response, nested ones included).
fn is_error_code(f: &Field) -> bool {
    f.json_name == "ErrorCode" && matches!(f.ty, Ty::I16) && !f.is_option()
}

/// The struct a field holds (directly, in an array, or optionally), if any.
fn struct_of(ty: &Ty) -> Option<&str> {
    match ty {
        Ty::Struct(name) => Some(name),
        Ty::Array(elem) => struct_of(elem),
        _ => None,
    }
}

/// Whether `name` (a struct of `s`) holds an error code at any depth. Kafka's schemas do
/// not nest a struct in itself; `depth` stops a schema that did.
fn holds_error_code(s: &Schema, name: &str, depth: usize) -> bool {
    if depth > 16 {
        return false;
    }
    s.structs
        .iter()
        .find(|st| st.name == name)
        .is_some_and(|st| {
            st.fields.iter().any(|f| {
                is_error_code(f)
                    || struct_of(&f.ty).is_some_and(|inner| holds_error_code(s, inner, depth + 1))
            })
        })
}

/// `impl ErrorCodes`: calls `f` with every `ErrorCode` of the struct and of the structs it
/// holds, walking only fields that can lead to one.
fn error_codes_impl(o: &mut String, s: &Schema, st: &StructDef) -> Result<()> {
    writeln!(o, "impl ErrorCodes for {} {{", st.name)?;
    let mut body = String::new();
    for f in &st.fields {
        if is_error_code(f) {
            writeln!(body, "        f(self.{});", f.name)?;
            continue;
        }
        let Some(inner) = struct_of(&f.ty) else {
            continue;
        };
        if !holds_error_code(s, inner, 0) {
            continue;
        }
        let walk = match (&f.ty, f.is_option()) {
            (Ty::Array(_), false) => format!(
                "for item in &self.{} {{ item.for_each_error_code(f); }}",
                f.name
            ),
            (Ty::Array(_), true) => format!(
                "for item in self.{}.iter().flatten() {{ item.for_each_error_code(f); }}",
                f.name
            ),
            (_, false) => format!("self.{}.for_each_error_code(f);", f.name),
            (_, true) => format!(
                "if let Some(inner) = &self.{} {{ inner.for_each_error_code(f); }}",
                f.name
            ),
        };
        writeln!(body, "        {walk}")?;
    }
    let param = if body.is_empty() { "_f" } else { "f" };
    writeln!(
        o,
        "    fn for_each_error_code<F: FnMut(i16)>(&self, {param}: &mut F) {{"
    )?;
    o.push_str(&body);
    writeln!(o, "    }}\n}}")?;
    Ok(())
}

fn fmt_versions(v: Versions) -> String {
    if v.is_empty() {
        "none".into()
    } else if v.hi == i16::MAX {
        format!("{}+", v.lo)
    } else if v.lo == v.hi {
        v.lo.to_string()
    } else {
        format!("{}-{}", v.lo, v.hi)
    }
}

fn generate_random(schemas: &[Schema]) -> Result<String> {
    let mut o = String::new();
    writeln!(
        o,
        "// Generated by codegen from Kafka's message schemas. Do not edit."
    )?;
    writeln!(
        o,
        "//! Random valid messages for the differential tests: `random(rng, version)` fills"
    )?;
    writeln!(
        o,
        "//! only the fields present in `version`, strings short, arrays 0-3 long."
    )?;
    writeln!(o, "#![allow(dead_code, unused_variables, clippy::all)]\n")?;
    writeln!(o, "use rand::Rng;")?;
    writeln!(o, "use wire::generated::*;")?;
    writeln!(o, "use wire::primitives::Uuid;\n")?;
    writeln!(o, "pub trait Random: Sized {{ fn random<R: Rng + ?Sized>(rng: &mut R, version: i16) -> Self; }}\n")?;
    writeln!(
        o,
        "fn random_string<R: Rng + ?Sized>(rng: &mut R) -> String {{"
    )?;
    writeln!(o, "    let n = rng.gen_range(0..6);")?;
    writeln!(o, "    (0..n).map(|_| *b\"abcdefghijklmnopqrstuvwxyz-_.0123456789\".get(rng.gen_range(0..39)).unwrap() as char).collect()")?;
    writeln!(o, "}}\n")?;
    writeln!(
        o,
        "fn random_bytes<R: Rng + ?Sized>(rng: &mut R) -> bytes::Bytes {{"
    )?;
    writeln!(o, "    let n = rng.gen_range(0..8);")?;
    writeln!(
        o,
        "    (0..n).map(|_| rng.gen::<u8>()).collect::<Vec<u8>>().into()"
    )?;
    writeln!(o, "}}\n")?;
    writeln!(
        o,
        "/// Usually none; else 1-2 tags above any tag the schemas use, sorted."
    )?;
    writeln!(
        o,
        "fn random_unknown_tags<R: Rng + ?Sized>(rng: &mut R) -> Vec<(u32, bytes::Bytes)> {{"
    )?;
    writeln!(o, "    if rng.gen_ratio(3, 4) {{ return Vec::new(); }}")?;
    writeln!(o, "    let first = rng.gen_range(100..200);")?;
    writeln!(o, "    let mut tags = vec![(first, random_bytes(rng))];")?;
    writeln!(
        o,
        "    if rng.gen() {{ tags.push((first + rng.gen_range(1..5000), random_bytes(rng))); }}"
    )?;
    writeln!(o, "    tags")?;
    writeln!(o, "}}\n")?;
    for s in schemas {
        let g = Gen { schema: s };
        let module = snake(&s.name);
        for st in &s.structs {
            writeln!(o, "impl Random for {module}::{} {{", st.name)?;
            writeln!(
                o,
                "    fn random<R: Rng + ?Sized>(rng: &mut R, version: i16) -> Self {{"
            )?;
            writeln!(o, "        Self {{")?;
            for f in &st.fields {
                writeln!(
                    o,
                    "            {}: {},",
                    f.name,
                    g.random_field(f, &module)?
                )?;
            }
            let flexible = g.cond(s.flexible);
            let unknown = match flexible.as_str() {
                "false" => "Vec::new()".to_string(),
                "true" => "random_unknown_tags(rng)".to_string(),
                c => format!("if {c} {{ random_unknown_tags(rng) }} else {{ Vec::new() }}"),
            };
            writeln!(
                o,
                "            unknown_tagged_fields: {unknown},\n        }}\n    }}\n}}\n"
            )?;
        }
    }
    writeln!(
        o,
        "/// Calls `$m!(module::Type)` for every top-level message type."
    )?;
    writeln!(
        o,
        "#[macro_export]\nmacro_rules! for_each_message {{\n    ($m:ident) => {{"
    )?;
    for s in schemas {
        writeln!(o, "        $m!({}::{});", snake(&s.name), s.name)?;
    }
    writeln!(o, "    }};\n}}")?;
    Ok(o)
}

fn generate_mod(schemas: &[Schema]) -> Result<String> {
    let mut o = String::new();
    writeln!(
        o,
        "// Generated by codegen from Kafka's message schemas. Do not edit."
    )?;
    writeln!(
        o,
        "//! Message codecs generated from Kafka's JSON schemas by the `codegen` crate."
    )?;
    writeln!(o, "//!")?;
    writeln!(
        o,
        "//! One module per schema; each top-level message type is re-exported here, nested"
    )?;
    writeln!(
        o,
        "//! structs stay in their module (their names collide across APIs)."
    )?;
    writeln!(
        o,
        "#![allow(unused_variables, unused_mut, unused_imports, unused_parens, clippy::all)]"
    )?;
    writeln!(o, "#![allow(clippy::pedantic, clippy::nursery)]\n")?;
    writeln!(o, "pub mod api;")?;
    for s in schemas {
        writeln!(o, "pub mod {};", snake(&s.name))?;
    }
    writeln!(o)?;
    writeln!(o, "pub use api::ApiKey;")?;
    for s in schemas {
        writeln!(o, "pub use {}::{};", snake(&s.name), s.name)?;
    }
    writeln!(o)?;
    writeln!(
        o,
        "/// Decodes `input` as every message type at every version; when a decode succeeds,"
    )?;
    writeln!(
        o,
        "/// checks that encoding is consistent (length, and encode-decode-encode is stable)."
    )?;
    writeln!(o, "#[cfg(test)]")?;
    writeln!(o, "pub(crate) fn fuzz_decode_all(input: &[u8]) {{")?;
    for s in schemas {
        writeln!(o, "    fuzz_one::<{}>(input);", s.name)?;
    }
    writeln!(o, "}}\n")?;
    writeln!(o, "#[cfg(test)]")?;
    writeln!(o, "fn fuzz_one<T: crate::primitives::Decodable + crate::primitives::Encodable + crate::primitives::Message>(input: &[u8]) {{")?;
    writeln!(o, "    for v in T::MIN_VERSION..=T::MAX_VERSION {{")?;
    writeln!(o, "        let Ok(msg) = T::decode(&mut bytes::Bytes::copy_from_slice(input), v) else {{ continue }};")?;
    writeln!(o, "        let mut out = bytes::BytesMut::new();")?;
    writeln!(
        o,
        "        msg.encode(&mut out, v).expect(\"a decoded message encodes\");"
    )?;
    writeln!(o, "        assert_eq!(out.len(), msg.encoded_len(v));")?;
    writeln!(o, "        let again = T::decode(&mut out.clone().freeze(), v).expect(\"an encoded message decodes\");")?;
    writeln!(o, "        let mut out2 = bytes::BytesMut::new();")?;
    writeln!(o, "        again.encode(&mut out2, v).unwrap();")?;
    writeln!(o, "        assert_eq!(out, out2);")?;
    writeln!(o, "    }}")?;
    writeln!(o, "}}")?;
    Ok(o)
}

fn generate_api(schemas: &[Schema]) -> Result<String> {
    let mut reqs: BTreeMap<i16, &Schema> = BTreeMap::new();
    let mut resps: BTreeMap<i16, &Schema> = BTreeMap::new();
    for s in schemas {
        match (s.kind.as_str(), s.api_key) {
            ("request", Some(k)) => {
                reqs.insert(k, s);
            }
            ("response", Some(k)) => {
                resps.insert(k, s);
            }
            _ => {}
        }
    }
    let mut o = String::new();
    writeln!(
        o,
        "// Generated by codegen from Kafka's message schemas. Do not edit."
    )?;
    writeln!(
        o,
        "//! API keys, supported version ranges and header versions.\n"
    )?;
    writeln!(o, "/// Every API of the schemas.")?;
    writeln!(
        o,
        "#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]"
    )?;
    writeln!(o, "#[repr(i16)]")?;
    writeln!(o, "pub enum ApiKey {{")?;
    let names: BTreeMap<i16, String> = reqs
        .iter()
        .map(|(k, s)| (*k, s.name.trim_end_matches("Request").to_string()))
        .collect();
    for (k, n) in &names {
        writeln!(o, "    {n} = {k},")?;
    }
    writeln!(o, "}}\n")?;
    writeln!(o, "impl ApiKey {{")?;
    writeln!(o, "    /// Every API key, in key order.")?;
    writeln!(
        o,
        "    pub const ALL: &'static [ApiKey] = &[{}];",
        names
            .values()
            .map(|n| format!("ApiKey::{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    )?;
    writeln!(
        o,
        "\n    pub fn from_i16(key: i16) -> Option<ApiKey> {{\n        Some(match key {{"
    )?;
    for (k, n) in &names {
        writeln!(o, "            {k} => ApiKey::{n},")?;
    }
    writeln!(o, "            _ => return None,\n        }})\n    }}\n")?;
    writeln!(
        o,
        "    /// The API's name as in the schemas (`Produce`, `Fetch`, ...)."
    )?;
    writeln!(
        o,
        "    pub fn name(self) -> &'static str {{\n        match self {{"
    )?;
    for n in names.values() {
        writeln!(o, "            ApiKey::{n} => {n:?},")?;
    }
    writeln!(o, "        }}\n    }}\n")?;
    writeln!(
        o,
        "    /// Supported (validVersions) range of the request schema."
    )?;
    writeln!(
        o,
        "    pub fn supported_range(self) -> (i16, i16) {{\n        match self {{"
    )?;
    for (k, n) in &names {
        let s = reqs[k];
        writeln!(
            o,
            "            ApiKey::{n} => ({}, {}),",
            s.valid.lo, s.valid.hi
        )?;
    }
    writeln!(o, "        }}\n    }}\n")?;
    writeln!(
        o,
        "    /// First flexible request version (`i16::MAX` if never flexible)."
    )?;
    writeln!(
        o,
        "    pub fn flexible_min(self) -> i16 {{\n        match self {{"
    )?;
    for (k, n) in &names {
        let s = reqs[k];
        let fm = if s.flexible.is_empty() {
            "i16::MAX".to_string()
        } else {
            s.flexible.lo.to_string()
        };
        writeln!(o, "            ApiKey::{n} => {fm},")?;
    }
    writeln!(o, "        }}\n    }}\n}}\n")?;
    for (k, s) in &reqs {
        let r = resps
            .get(k)
            .ok_or_else(|| anyhow!("no response for api {k}"))?;
        if r.flexible.lo != s.flexible.lo || r.valid != s.valid {
            eprintln!("note: api {k} request/response version ranges differ");
        }
    }
    writeln!(
        o,
        "/// Supported (validVersions) range of an API key, `None` if unknown."
    )?;
    writeln!(
        o,
        "pub fn supported_range(api_key: i16) -> Option<(i16, i16)> {{"
    )?;
    writeln!(
        o,
        "    ApiKey::from_i16(api_key).map(ApiKey::supported_range)\n}}\n"
    )?;
    writeln!(o, "/// Request header version of a request: 2 if flexible, else 1 (0 for ControlledShutdown v0).")?;
    writeln!(
        o,
        "pub fn request_header_version(api_key: i16, api_version: i16) -> i16 {{"
    )?;
    writeln!(
        o,
        "    if api_key == ApiKey::ControlledShutdown as i16 && api_version == 0 {{ return 0; }}"
    )?;
    writeln!(o, "    match ApiKey::from_i16(api_key) {{")?;
    writeln!(
        o,
        "        Some(k) if api_version >= k.flexible_min() => 2,\n        _ => 1,\n    }}\n}}\n"
    )?;
    writeln!(
        o,
        "/// Response header version: 1 if flexible, else 0 (ApiVersions always 0)."
    )?;
    writeln!(
        o,
        "pub fn response_header_version(api_key: i16, api_version: i16) -> i16 {{"
    )?;
    writeln!(
        o,
        "    if api_key == ApiKey::ApiVersions as i16 {{ return 0; }}"
    )?;
    writeln!(o, "    match ApiKey::from_i16(api_key) {{")?;
    writeln!(
        o,
        "        Some(k) if api_version >= k.flexible_min() => 1,\n        _ => 0,\n    }}\n}}\n"
    )?;
    writeln!(o, "#[cfg(test)]\nmod tests {{\n    use super::*;\n")?;
    writeln!(o, "    #[test]\n    fn header_versions() {{")?;
    writeln!(o, "        for key in ApiKey::ALL {{ assert_eq!(ApiKey::from_i16(*key as i16), Some(*key)); }}")?;
    writeln!(
        o,
        "        assert_eq!(request_header_version(ApiKey::ControlledShutdown as i16, 0), 0);"
    )?;
    writeln!(
        o,
        "        assert_eq!(response_header_version(ApiKey::ApiVersions as i16, 3), 0);"
    )?;
    writeln!(
        o,
        "        assert_eq!(request_header_version(ApiKey::ApiVersions as i16, 3), 2);"
    )?;
    writeln!(
        o,
        "        assert_eq!(request_header_version(ApiKey::Metadata as i16, 8), 1);"
    )?;
    writeln!(
        o,
        "        assert_eq!(response_header_version(ApiKey::Metadata as i16, 9), 1);"
    )?;
    writeln!(o, "        assert_eq!(supported_range(-5), None);")?;
    writeln!(o, "    }}\n}}")?;
    Ok(o)
}

/// `codegen --data <schema dir> <out dir>`: the "data" schemas of a directory (internal records
/// such as the group coordinator's `__consumer_offsets` keys and values), one module each plus
/// a `mod.rs`; no API table and no random-message helper.
fn generate_data(schema_dir: &Path, out_dir: &Path) -> Result<()> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(schema_dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    paths.retain(|p| p.extension().is_some_and(|e| e == "json"));
    paths.sort();
    let mut schemas = vec![];
    for p in &paths {
        let s = load(p).with_context(|| format!("loading {}", p.display()))?;
        // Share groups (KIP-932) are not implemented: their records are not generated.
        if s.kind == "data" && !s.name.starts_with("ShareGroup") {
            schemas.push(s);
        }
    }
    std::fs::create_dir_all(out_dir)?;
    let mut files = vec![];
    for s in &schemas {
        let code = generate_file(s).with_context(|| format!("generating {}", s.name))?;
        let file = out_dir.join(format!("{}.rs", snake(&s.name)));
        std::fs::write(&file, code)?;
        files.push(file);
    }
    let mut m = String::new();
    writeln!(
        m,
        "// Generated by codegen from Kafka's message schemas. Do not edit."
    )?;
    writeln!(
        m,
        "//! Internal record codecs generated from Kafka's \"data\" schemas."
    )?;
    writeln!(
        m,
        "#![allow(unused_variables, unused_mut, unused_imports, unused_parens, clippy::all)]"
    )?;
    writeln!(m, "#![allow(clippy::pedantic, clippy::nursery)]\n")?;
    for s in &schemas {
        writeln!(m, "pub mod {};", snake(&s.name))?;
    }
    writeln!(m)?;
    for s in &schemas {
        writeln!(m, "pub use {}::{};", snake(&s.name), s.name)?;
    }
    let mod_file = out_dir.join("mod.rs");
    std::fs::write(&mod_file, m)?;
    files.push(mod_file);
    let status = std::process::Command::new("rustfmt")
        .arg("--edition=2021")
        .args(&files)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        eprintln!("note: rustfmt did not run on the generated files");
    }
    eprintln!(
        "generated {} data schemas into {}",
        schemas.len(),
        out_dir.display()
    );
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() == 4 && args[1] == "--data" {
        return generate_data(Path::new(&args[2]), Path::new(&args[3]));
    }
    if args.len() < 3 {
        bail!("usage: codegen <schema dir> <out dir> [<random helper file>]");
    }
    let (schema_dir, out_dir) = (PathBuf::from(&args[1]), PathBuf::from(&args[2]));
    let random_path = args
        .get(3)
        .map(PathBuf::from)
        .unwrap_or_else(|| out_dir.join("../../tests/random/mod.rs"));
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&schema_dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    paths.retain(|p| p.extension().is_some_and(|e| e == "json"));
    paths.sort();
    let mut schemas = vec![];
    for p in &paths {
        let s = load(p).with_context(|| format!("loading {}", p.display()))?;
        if matches!(s.kind.as_str(), "request" | "response" | "header") {
            schemas.push(s);
        }
    }
    std::fs::create_dir_all(&out_dir)?;
    for s in &schemas {
        let code = generate_file(s).with_context(|| format!("generating {}", s.name))?;
        std::fs::write(out_dir.join(format!("{}.rs", snake(&s.name))), code)?;
    }
    std::fs::write(out_dir.join("mod.rs"), generate_mod(&schemas)?)?;
    std::fs::write(out_dir.join("api.rs"), generate_api(&schemas)?)?;
    if let Some(dir) = random_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&random_path, generate_random(&schemas)?)?;
    let mut files: Vec<PathBuf> = schemas
        .iter()
        .map(|s| out_dir.join(format!("{}.rs", snake(&s.name))))
        .collect();
    files.push(out_dir.join("mod.rs"));
    files.push(out_dir.join("api.rs"));
    files.push(random_path.clone());
    // Format the output if rustfmt is around (only our own files).
    let status = std::process::Command::new("rustfmt")
        .arg("--edition=2021")
        .args(&files)
        .status();
    if !matches!(status, Ok(s) if s.success()) {
        eprintln!("note: rustfmt did not run on the generated files");
    }
    eprintln!(
        "generated {} schemas into {}",
        schemas.len(),
        out_dir.display()
    );
    Ok(())
}
