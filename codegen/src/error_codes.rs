//! The `ErrorCodes` impl of response structs: which fields are error codes the metrics count,
//! nested structs included.

use std::fmt::Write as _;

use anyhow::Result;

use crate::schema::{Field, Schema, StructDef, Ty};

/// Whether a field is an error code the metrics count (Kafka's `errorCounts` looks at the
/// `ErrorCode` fields of a response, nested ones included).
pub(crate) fn is_error_code(f: &Field) -> bool {
    f.json_name == "ErrorCode" && matches!(f.ty, Ty::I16) && !f.is_option()
}

/// The struct a field holds (directly, in an array, or optionally), if any.
pub(crate) fn struct_of(ty: &Ty) -> Option<&str> {
    match ty {
        Ty::Struct(name) => Some(name),
        Ty::Array(elem) => struct_of(elem),
        _ => None,
    }
}

/// Whether `name` (a struct of `s`) holds an error code at any depth. Kafka's schemas do
/// not nest a struct in itself; `depth` stops a schema that did.
pub(crate) fn holds_error_code(s: &Schema, name: &str, depth: usize) -> bool {
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
pub(crate) fn error_codes_impl(o: &mut String, s: &Schema, st: &StructDef) -> Result<()> {
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
