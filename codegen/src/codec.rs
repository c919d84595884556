//! Rust expressions that decode, encode and size one field of a message, under the version
//! conditions its schema gives it.

use anyhow::{bail, Result};
use serde_json::Value;

use crate::schema::{Field, Schema, Ty, Versions};

/// Where an encoder sends `records` fields: written in place, or handed to the
/// `RecordsWriter` of an `encode_with`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sink {
    Inline,
    Writer,
}

/// Generates one schema file; `valid` narrows version conditions.
pub(crate) struct Gen<'a> {
    pub(crate) schema: &'a Schema,
}

impl Gen<'_> {
    /// Rust boolean expression for `version` in `r` (within the message's valid versions).
    pub(crate) fn cond(&self, r: Versions) -> String {
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
    pub(crate) fn regular(&self, f: &Field) -> Versions {
        if f.tagged.is_empty() {
            f.versions
        } else {
            f.versions.intersect(&Versions {
                lo: i16::MIN,
                hi: f.tagged.lo - 1,
            })
        }
    }

    pub(crate) fn tagged(&self, f: &Field) -> Versions {
        f.versions.intersect(&f.tagged)
    }

    /// Expression for "compact encoding" of a field.
    pub(crate) fn flex(&self, f: &Field) -> String {
        match f.flexible {
            Some(v) => self.cond(v),
            None => "flexible".into(),
        }
    }

    pub(crate) fn default_expr(&self, f: &Field) -> Result<String> {
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
    pub(crate) fn decode_value(&self, ty: &Ty, flex: &str, what: &str) -> String {
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
    pub(crate) fn decode_nullable(&self, ty: &Ty, flex: &str) -> String {
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
    pub(crate) fn decode_field(&self, f: &Field, flex: &str) -> String {
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
    pub(crate) fn min_len_expr(&self, ty: &Ty, flex: &str) -> String {
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

    pub(crate) fn min_len_field(&self, f: &Field, flex: &str) -> String {
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

    /// Whether a value of `ty` holds a `records` field, at any depth: such structs encode
    /// through a `RecordsWriter` (`encode_with`), so a caller can lay records out itself.
    pub(crate) fn carries_records(&self, ty: &Ty) -> bool {
        match ty {
            Ty::Records => true,
            Ty::Array(e) => self.carries_records(e),
            Ty::Struct(name) => self
                .schema
                .structs
                .iter()
                .find(|st| &st.name == name)
                .is_some_and(|st| st.fields.iter().any(|f| self.carries_records(&f.ty))),
            _ => false,
        }
    }

    /// Statements encoding the non-null value `r` (a reference expression) of `ty`. With
    /// `Sink::Writer`, records go through the `records` writer in scope and structs that
    /// carry records through their `encode_with`.
    fn encode_value(&self, ty: &Ty, r: &str, flex: &str, sink: Sink) -> String {
        let writer = sink == Sink::Writer;
        match ty {
            Ty::Records if writer => format!("records.write(buf, Some({r}), {flex})?;"),
            Ty::Struct(_) if writer && self.carries_records(ty) => {
                format!("{r}.encode_with(buf, version, records)?;")
            }
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
                self.encode_value(e, "e", flex, sink)
            ),
        }
    }

    /// Expression: encoded size of the non-null value `r` of `ty`.
    pub(crate) fn len_value(&self, ty: &Ty, r: &str, flex: &str) -> String {
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
    pub(crate) fn encode_field(&self, f: &Field, flex: &str, sink: Sink) -> String {
        let r = format!("(&self.{})", f.name);
        if !f.is_option() {
            return self.encode_value(&f.ty, &r, flex, sink);
        }
        let nullable = self.cond(f.nullable);
        let null = match (&f.ty, nullable.as_str()) {
            (_, "false") => format!(
                "return Err(EncodeError::NullNotAllowed {{ field: {:?} }})",
                f.json_name
            ),
            (Ty::Str, _) => format!("write_nullable_string(buf, None, {flex})?"),
            (Ty::Records, _) if sink == Sink::Writer => {
                format!("records.write(buf, None, {flex})?")
            }
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
        let encode = if sink == Sink::Writer && self.carries_records(&f.ty) {
            "v.encode_with(buf, version, records)?;"
        } else {
            "v.encode(buf, version)?;"
        };
        let some = match (&f.ty, nullable.as_str()) {
            (Ty::Struct(_), "false") => encode.into(),
            (Ty::Struct(_), "true") => format!("write_i8(buf, 1); {encode}"),
            (Ty::Struct(_), c) => format!("if {c} {{ write_i8(buf, 1); }} {encode}"),
            _ => self.encode_value(&f.ty, "v", flex, sink),
        };
        format!("match {r} {{ None => {{ {null}; }} Some(v) => {{ {some} }} }}")
    }

    /// Expression: encoded size of field `f`.
    pub(crate) fn len_field(&self, f: &Field, flex: &str) -> String {
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
}
