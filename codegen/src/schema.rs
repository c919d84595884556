//! The schema model: version ranges, field types, fields and structs, read from Kafka's JSON
//! message schemas (with their `//` comments stripped).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;

/// An inclusive version range; empty when `lo > hi`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Versions {
    pub(crate) lo: i16,
    pub(crate) hi: i16,
}

impl Versions {
    pub(crate) const NONE: Versions = Versions { lo: 1, hi: 0 };

    pub(crate) fn parse(s: &str) -> Result<Versions> {
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
    pub(crate) fn is_empty(&self) -> bool {
        self.lo > self.hi
    }
    pub(crate) fn intersect(&self, o: &Versions) -> Versions {
        Versions {
            lo: self.lo.max(o.lo),
            hi: self.hi.min(o.hi),
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Ty {
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
    pub(crate) fn parse(s: &str) -> Result<Ty> {
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
    pub(crate) fn rust(&self) -> String {
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
    pub(crate) fn fixed_size(&self) -> Option<usize> {
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
pub(crate) struct Field {
    pub(crate) json_name: String,
    pub(crate) name: String,
    pub(crate) ty: Ty,
    pub(crate) versions: Versions,
    pub(crate) nullable: Versions,
    pub(crate) tagged: Versions,
    pub(crate) tag: Option<u32>,
    pub(crate) ignorable: bool,
    pub(crate) default: Option<Value>,
    /// Field-level "flexibleVersions" override (RequestHeader.ClientId: "none").
    pub(crate) flexible: Option<Versions>,
    pub(crate) about: String,
}

impl Field {
    /// Rust type of the field (Option when nullable in any version; records always).
    pub(crate) fn rust_type(&self) -> String {
        if self.is_option() {
            format!("Option<{}>", self.ty.rust())
        } else {
            self.ty.rust()
        }
    }
    pub(crate) fn is_option(&self) -> bool {
        matches!(self.ty, Ty::Records) || !self.nullable.is_empty()
    }
}

pub(crate) struct StructDef {
    pub(crate) name: String,
    pub(crate) fields: Vec<Field>,
    pub(crate) about: String,
}

pub(crate) struct Schema {
    pub(crate) file_stem: String,
    pub(crate) name: String,
    pub(crate) kind: String,
    pub(crate) api_key: Option<i16>,
    pub(crate) valid: Versions,
    pub(crate) flexible: Versions,
    /// Top struct first, then nested structs in schema order, then commonStructs.
    pub(crate) structs: Vec<StructDef>,
}

pub(crate) fn strip_comments(text: &str) -> String {
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

pub(crate) fn snake(name: &str) -> String {
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

pub(crate) fn str_of(v: &Value, key: &str) -> Option<String> {
    v.get(key).map(|x| match x {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

pub(crate) fn parse_fields(
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

pub(crate) fn load(path: &Path) -> Result<Schema> {
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
        let cname = str_of(c, "name").expect("a common struct has a name");
        structs.push(StructDef {
            name: cname,
            fields: vec![],
            about: String::new(),
        });
        structs[pos].fields = parse_fields(&c["fields"], &mut structs, &common)?;
    }
    Ok(Schema {
        file_stem: path
            .file_stem()
            .expect("a schema file has a name")
            .to_string_lossy()
            .into_owned(),
        kind: str_of(&json, "type").unwrap_or_default(),
        api_key: json.get("apiKey").and_then(Value::as_i64).map(|k| k as i16),
        valid: Versions::parse(&str_of(&json, "validVersions").unwrap_or_default())?,
        flexible: Versions::parse(&str_of(&json, "flexibleVersions").unwrap_or("none".into()))?,
        name,
        structs,
    })
}

/// The schemas of a directory's `.json` files, in file-name order, those `keep` accepts.
pub(crate) fn load_dir(dir: &Path, keep: impl Fn(&Schema) -> bool) -> Result<Vec<Schema>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    paths.retain(|p| p.extension().is_some_and(|e| e == "json"));
    paths.sort();
    let mut schemas = vec![];
    for p in &paths {
        let s = load(p).with_context(|| format!("loading {}", p.display()))?;
        if keep(&s) {
            schemas.push(s);
        }
    }
    Ok(schemas)
}
