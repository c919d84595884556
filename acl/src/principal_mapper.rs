//! `ssl.principal.mapping.rules`: Kafka's `SslPrincipalMapper`, which turns a client
//! certificate's distinguished name into the name of its `User:` principal. Parsed once at
//! start-up; `map` runs once per TLS handshake.
//!
//! Rules are separated by commas: `DEFAULT` (the name unchanged) or
//! `RULE:pattern/replacement/` with an optional `L` or `U` to lower- or upper-case the result.
//! The first rule whose pattern matches the whole name wins; no match is an error, which
//! fails the handshake.
//!
//! The rule syntax is Kafka's own regular expressions, run here by the `regex` crate, whose
//! leftmost-first matching reports the same matches and groups as Java's backtracking. The
//! replacement is expanded as Java's `Matcher.appendReplacement` does, after Kafka's
//! escaping of back-references past the last group. Not matched: user patterns are read in
//! the `regex` crate's dialect, so Java-only constructs (look-around, back-references,
//! possessive quantifiers) are refused at parse, `\w`, `\d`, `\s` and `\b` are Unicode-aware
//! where Java's are ASCII, `.` excludes only `\n` and `$` matches only at the very end.

use std::fmt;

use regex::{Captures, Regex};

use crate::error::AclError;
use crate::validate::java_trim;

/// Kafka's `RULE_PATTERN`: `DEFAULT`, a `RULE:`, or (so that bad text is reported, not
/// skipped) anything. Java's `.` excludes line terminators, spelled out here.
const RULE_PATTERN: &str = concat!(
    r"(DEFAULT)",
    r"|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?)[^\n\r\x{85}\x{2028}\x{2029}]*?",
    r"|([^\n\r\x{85}\x{2028}\x{2029}]*?)",
);
/// Java's `\s`.
const SPACE: &str = r"[ \t\n\x0B\f\r]";

/// The parsed `ssl.principal.mapping.rules`.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Pattern {
        /// The pattern as written (Java's `Pattern.pattern()`), for `Display`.
        source: String,
        /// The pattern anchored at both ends: Java's `Matcher.matches`.
        whole: Regex,
        /// The pattern unanchored: Java's `String.replaceAll`.
        find: Regex,
        replacement: String,
        case: Case,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Keep,
    Lower,
    Upper,
}

impl PrincipalMapper {
    /// Parses the rules as Kafka's `SslPrincipalMapper.fromRules` does. An empty value holds
    /// no rules (every name then fails to map); Kafka's default value is `DEFAULT`.
    pub fn parse(rules: &str) -> Result<Self, AclError> {
        let splitter = internal_regex(&format!(r"{SPACE}*({RULE_PATTERN}){SPACE}*(,{SPACE}*|$)"));
        let parser = internal_regex(&format!(r"\A(?:{RULE_PATTERN})"));
        let mut parsed = Vec::new();
        let text = java_trim(rules);
        for caps in java_find_iter(&splitter, text) {
            let rule = caps.get(1).map_or("", |m| m.as_str());
            parsed.extend(parse_rule(&parser, rule)?);
        }
        Ok(PrincipalMapper { rules: parsed })
    }

    /// The principal name for a distinguished name (`CN=Duke,OU=ServiceUsers,O=Org,C=US`, as
    /// Java's `X500Principal.getName()` prints it).
    pub fn map(&self, distinguished_name: &str) -> Result<String, AclError> {
        for rule in &self.rules {
            if let Some(name) = rule.apply(distinguished_name)? {
                return Ok(name);
            }
        }
        Err(AclError::NoMatchingRule {
            distinguished_name: distinguished_name.to_owned(),
            rules: self.rules_string(),
        })
    }

    fn rules_string(&self) -> String {
        let rules: Vec<String> = self.rules.iter().map(Rule::to_string).collect();
        format!("[{}]", rules.join(", "))
    }
}

impl Default for PrincipalMapper {
    /// Kafka's default rules, `DEFAULT`.
    fn default() -> Self {
        PrincipalMapper {
            rules: vec![Rule::Default],
        }
    }
}

/// Kafka's `toString`: `SslPrincipalMapper(rules = [RULE:.../L, DEFAULT])`.
impl fmt::Display for PrincipalMapper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SslPrincipalMapper(rules = {})", self.rules_string())
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::Default => f.write_str("DEFAULT"),
            Rule::Pattern {
                source,
                replacement,
                case,
                ..
            } => {
                write!(f, "RULE:{source}/{replacement}")?;
                match case {
                    Case::Keep => Ok(()),
                    Case::Lower => f.write_str("/L"),
                    Case::Upper => f.write_str("/U"),
                }
            }
        }
    }
}

/// One rule's text; `None` for an empty one, which Kafka skips.
fn parse_rule(parser: &Regex, rule: &str) -> Result<Option<Rule>, AclError> {
    let Some(caps) = parser.captures(rule) else {
        return Err(AclError::InvalidRule(rule.to_owned()));
    };
    let end = caps.get(0).map_or(0, |m| m.end());
    if end != rule.len() {
        return Err(AclError::UnmatchedRuleText {
            rule: rule.to_owned(),
            unmatched: rule[end..].to_owned(),
        });
    }
    if caps.get(1).is_some() {
        return Ok(Some(Rule::Default));
    }
    let Some(source) = caps.get(2) else {
        return Ok(None);
    };
    let source = source.as_str().to_owned();
    let replacement = caps.get(4).map_or("", |m| m.as_str()).to_owned();
    let case = match caps.get(6).map(|m| m.as_str()) {
        Some("L") => Case::Lower,
        Some("U") => Case::Upper,
        _ => Case::Keep,
    };
    let compile = |text: &str| {
        Regex::new(text).map_err(|e| AclError::InvalidRulePattern {
            pattern: source.clone(),
            reason: e.to_string(),
        })
    };
    let whole = compile(&format!(r"\A(?:{source})\z"))?;
    let find = compile(&source)?;
    Ok(Some(Rule::Pattern {
        source,
        whole,
        find,
        replacement,
        case,
    }))
}

impl Rule {
    /// Kafka's `Rule.apply`: `None` when the rule does not match the whole name.
    fn apply(&self, name: &str) -> Result<Option<String>, AclError> {
        let Rule::Pattern {
            whole,
            find,
            replacement,
            case,
            ..
        } = self
        else {
            return Ok(Some(name.to_owned()));
        };
        if !whole.is_match(name) {
            return Ok(None);
        }
        let groups = find.captures_len() - 1;
        let replacement = escape_literal_back_references(replacement, groups)?;
        let mut result = String::with_capacity(name.len());
        let mut copied = 0;
        for caps in java_find_iter(find, name) {
            let (start, end) = caps.get(0).map_or((0, 0), |m| (m.start(), m.end()));
            result.push_str(&name[copied..start]);
            append_replacement(&mut result, &replacement, &caps, find)?;
            copied = end;
        }
        result.push_str(&name[copied..]);
        Ok(Some(match case {
            Case::Keep => result,
            Case::Lower => result.to_lowercase(),
            Case::Upper => result.to_uppercase(),
        }))
    }
}

/// Kafka's `escapeLiteralBackReferences` (from Apache NiFi): a `$n` naming a group past the
/// last is first shortened digit by digit (`$12` with 3 groups is `$1` then `2`), and if still
/// past the last it becomes a literal `\$n`. Kept exactly, including its quirk: the positions
/// come from the original text while the escapes are inserted into the changing copy, so a
/// second escape lands one char early per escape before it.
fn escape_literal_back_references(unescaped: &str, groups: usize) -> Result<String, AclError> {
    if groups == 0 {
        return Ok(unescaped.to_owned());
    }
    let back_reference = internal_regex(r"\$([0-9]+)");
    let mut value = unescaped.to_owned();
    for caps in back_reference.captures_iter(unescaped) {
        let Some(digits) = caps.get(1) else { continue };
        if digits.as_str().starts_with('0') {
            continue;
        }
        // Java's Integer.parseInt: more than an int holds is a NumberFormatException.
        let mut index: u64 = match digits.as_str().parse::<i32>() {
            Ok(n) => n.unsigned_abs().into(),
            Err(_) => {
                return Err(AclError::InvalidReplacement(format!(
                    "For input string: \"{}\"",
                    digits.as_str()
                )))
            }
        };
        let groups = groups as u64;
        while index > groups && index >= 10 {
            index /= 10;
        }
        if index > groups {
            // Insert a backslash before the `$`, at the original text's offset, into the
            // current copy (char offsets, as Java's String indexes).
            let at = unescaped[..digits.start()].chars().count() - 1;
            let at = value.char_indices().nth(at).map_or(value.len(), |(i, _)| i);
            value.insert(at, '\\');
        }
    }
    Ok(value)
}

/// Java's `Matcher.appendReplacement` expansion: `\x` is `x`, `$n` the longest group number
/// that exists (at least one digit), `${name}` a named group; a group that did not take part
/// adds nothing.
fn append_replacement(
    out: &mut String,
    replacement: &str,
    caps: &Captures<'_>,
    pattern: &Regex,
) -> Result<(), AclError> {
    let invalid = |why: String| Err(AclError::InvalidReplacement(why));
    let groups = pattern.captures_len() - 1;
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped) => out.push(escaped),
                None => return invalid("character to be escaped is missing".into()),
            },
            '$' => {
                let group = match chars.next() {
                    None => {
                        return invalid("Illegal group reference: group index is missing".into())
                    }
                    Some('{') => {
                        let mut name = String::new();
                        while let Some(c) = chars.next_if(char::is_ascii_alphanumeric) {
                            name.push(c);
                        }
                        if name.is_empty() {
                            return invalid("named capturing group has 0 length name".into());
                        }
                        if chars.next() != Some('}') {
                            return invalid("named capturing group is missing trailing '}'".into());
                        }
                        if name.starts_with(|c: char| c.is_ascii_digit()) {
                            return invalid(format!(
                                "capturing group name {{{name}}} starts with digit character"
                            ));
                        }
                        match pattern
                            .capture_names()
                            .position(|n| n == Some(name.as_str()))
                        {
                            Some(index) => index,
                            None => return invalid(format!("No group with name {{{name}}}")),
                        }
                    }
                    Some(first) => {
                        let Some(mut number) = first.to_digit(10).map(|d| d as usize) else {
                            return invalid("Illegal group reference".into());
                        };
                        while let Some(digit) = chars.peek().and_then(|c| c.to_digit(10)) {
                            let longer = number * 10 + digit as usize;
                            if longer > groups {
                                break;
                            }
                            number = longer;
                            chars.next();
                        }
                        if number > groups {
                            return invalid(format!("No group {number}"));
                        }
                        number
                    }
                };
                if let Some(m) = caps.get(group) {
                    out.push_str(m.as_str());
                }
            }
            _ => out.push(c),
        }
    }
    Ok(())
}

/// Java's `Matcher.find` loop: each search starts where the last match ended, or one char
/// later after an empty match (the `regex` crate's own iterator skips differently).
fn java_find_iter<'a>(regex: &'a Regex, text: &'a str) -> impl Iterator<Item = Captures<'a>> + 'a {
    let mut next = Some(0);
    std::iter::from_fn(move || {
        let from = next?;
        let caps = regex.captures_at(text, from)?;
        let whole = caps.get(0)?;
        next = if whole.is_empty() {
            text[whole.end()..]
                .chars()
                .next()
                .map(|c| whole.end() + c.len_utf8())
        } else {
            Some(whole.end())
        };
        Some(caps)
    })
}

/// Compiles one of this module's fixed patterns.
fn internal_regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("the mapper's own patterns are valid")
}
