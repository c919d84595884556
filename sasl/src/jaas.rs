//! Kafka's `sasl.jaas.config` syntax (`org.apache.kafka.common.security.JaasConfig`):
//!
//! ```text
//! <loginModuleClass> <controlFlag> (<optionName>=<optionValue>)*; ...
//! ```
//!
//! Kafka tokenizes with Java's `StreamTokenizer`, and its rules carry over here:
//! - whitespace is any character up to ' '; `//` and a lone `/` start a comment to the end
//!   of the line, `/* ... */` a block comment;
//! - a word starts with a letter, '_', '$' or a character from U+00A0 up, and goes on with
//!   those, digits, '.' and '-' (so `org.apache...PlainLoginModule` is one word);
//! - a token starting with a digit, '.' or '-' is a number, which has no text: an unquoted
//!   value such as `retries=3` is refused ("Value not specified"), quote it;
//! - `"..."` and `'...'` are strings, with `\n`, `\t`, `\r`, `\b`, `\f`, `\a`, `\v`, octal
//!   `\ooo` and `\<any>` for that character;
//! - the control flag is case-insensitive (stored here in lower case);
//! - a repeated option keeps its last value (Kafka's HashMap), in its first position.
//!
//! One deviation: a quoted string that reaches the end of a line or of the text is an error
//! here, where `StreamTokenizer` silently ends it there.

/// One login module entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JaasEntry {
    pub login_module: String,
    /// "required", "requisite", "sufficient" or "optional".
    pub flag: String,
    /// Options in the order first written.
    pub options: Vec<(String, String)>,
}

impl JaasEntry {
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Kafka's messages where Kafka has one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JaasError {
    #[error("Login module not specified in JAAS config")]
    NoLoginModule,
    #[error("Invalid login module name in JAAS config")]
    InvalidLoginModule,
    #[error("Login module control flag not specified in JAAS config")]
    MissingControlFlag,
    #[error("Login module control flag is not available in the JAAS config")]
    ControlFlagNotAvailable,
    #[error("Invalid login module control flag '{0}' in JAAS config")]
    InvalidControlFlag(String),
    #[error("Invalid option name in JAAS config")]
    InvalidOptionName,
    #[error("Value not specified for key '{0}' in JAAS config")]
    MissingValue(String),
    #[error("JAAS config entry not terminated by semi-colon")]
    MissingSemicolon,
    #[error("Unterminated quoted string in JAAS config")]
    UnterminatedQuote,
}

/// Parses a `sasl.jaas.config` value into its entries (at least one).
pub fn parse(text: &str) -> Result<Vec<JaasEntry>, JaasError> {
    let mut tokens = Tokenizer {
        chars: text.chars().peekable(),
    };
    let mut entries = Vec::new();
    loop {
        match tokens.next()? {
            Token::Eof => break,
            first => entries.push(parse_entry(first, &mut tokens)?),
        }
    }
    if entries.is_empty() {
        return Err(JaasError::NoLoginModule);
    }
    Ok(entries)
}

fn parse_entry(first: Token, tokens: &mut Tokenizer<'_>) -> Result<JaasEntry, JaasError> {
    let login_module = match first.text() {
        Some(name) if !name.is_empty() => name,
        _ => return Err(JaasError::InvalidLoginModule),
    };
    let flag = match tokens.next()? {
        Token::Eof => return Err(JaasError::MissingControlFlag),
        token => token.text().ok_or(JaasError::ControlFlagNotAvailable)?,
    };
    let flag = match flag.to_uppercase().as_str() {
        "REQUIRED" | "REQUISITE" | "SUFFICIENT" | "OPTIONAL" => flag.to_lowercase(),
        _ => return Err(JaasError::InvalidControlFlag(flag)),
    };
    let mut options: Vec<(String, String)> = Vec::new();
    loop {
        let key = match tokens.next()? {
            Token::Eof => return Err(JaasError::MissingSemicolon),
            Token::Char(';') => break,
            token => token.text().ok_or(JaasError::InvalidOptionName)?,
        };
        if tokens.next()? != Token::Char('=') {
            return Err(JaasError::MissingValue(key));
        }
        let Some(value) = tokens.next()?.text() else {
            return Err(JaasError::MissingValue(key));
        };
        match options.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => options.push((key, value)),
        }
    }
    Ok(JaasEntry {
        login_module,
        flag,
        options,
    })
}

#[derive(Debug, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    /// A number: `StreamTokenizer` gives it no text.
    Number,
    /// Any other character.
    Char(char),
    Eof,
}

impl Token {
    /// `StreamTokenizer.sval`: the text of a word or quoted string.
    fn text(self) -> Option<String> {
        match self {
            Token::Word(text) | Token::Quoted(text) => Some(text),
            Token::Number | Token::Char(_) | Token::Eof => None,
        }
    }
}

struct Tokenizer<'a> {
    chars: std::iter::Peekable<std::str::Chars<'a>>,
}

fn is_word_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == '$' || c >= '\u{a0}'
}

fn is_number_char(c: char) -> bool {
    c.is_ascii_digit() || c == '.' || c == '-'
}

impl Tokenizer<'_> {
    fn next(&mut self) -> Result<Token, JaasError> {
        loop {
            let Some(c) = self.chars.next() else {
                return Ok(Token::Eof);
            };
            if c <= ' ' {
                continue;
            }
            if c == '/' {
                if self.chars.peek() == Some(&'*') {
                    self.chars.next();
                    if !self.skip_block_comment() {
                        return Ok(Token::Eof);
                    }
                } else {
                    // `//` and, since '/' is StreamTokenizer's default comment character,
                    // a lone '/' both comment out the rest of the line.
                    self.skip_line();
                }
                continue;
            }
            if is_number_char(c) {
                return Ok(self.number(c));
            }
            if is_word_start(c) {
                let mut word = String::from(c);
                while let Some(&next) = self.chars.peek() {
                    if !(is_word_start(next) || is_number_char(next)) {
                        break;
                    }
                    word.push(next);
                    self.chars.next();
                }
                return Ok(Token::Word(word));
            }
            if c == '"' || c == '\'' {
                return self.quoted(c).map(Token::Quoted);
            }
            return Ok(Token::Char(c));
        }
    }

    /// `StreamTokenizer`'s number: an optional '-', then digits with at most one '.'. A '-'
    /// followed by neither is the character '-'.
    fn number(&mut self, first: char) -> Token {
        if first == '-' && !matches!(self.chars.peek(), Some(c) if c.is_ascii_digit() || *c == '.')
        {
            return Token::Char('-');
        }
        let mut seen_dot = first == '.';
        while let Some(&c) = self.chars.peek() {
            match c {
                '0'..='9' => {}
                '.' if !seen_dot => seen_dot = true,
                _ => break,
            }
            self.chars.next();
        }
        Token::Number
    }

    fn quoted(&mut self, quote: char) -> Result<String, JaasError> {
        let mut text = String::new();
        loop {
            let c = match self.chars.next() {
                None | Some('\n' | '\r') => return Err(JaasError::UnterminatedQuote),
                Some(c) if c == quote => return Ok(text),
                Some('\\') => self.escape()?,
                Some(c) => c,
            };
            text.push(c);
        }
    }

    fn escape(&mut self) -> Result<char, JaasError> {
        let c = self.chars.next().ok_or(JaasError::UnterminatedQuote)?;
        let escaped = match c {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '0'..='7' => {
                // Up to three octal digits, the third only when the first is 0-3 (\377 max).
                let mut value = c as u32 - '0' as u32;
                let digits = if c <= '3' { 2 } else { 1 };
                for _ in 0..digits {
                    match self.chars.peek() {
                        Some(&d @ '0'..='7') => {
                            value = value * 8 + (d as u32 - '0' as u32);
                            self.chars.next();
                        }
                        _ => break,
                    }
                }
                char::from_u32(value).unwrap_or(char::REPLACEMENT_CHARACTER)
            }
            other => other,
        };
        Ok(escaped)
    }

    fn skip_line(&mut self) {
        for c in self.chars.by_ref() {
            if c == '\n' || c == '\r' {
                return;
            }
        }
    }

    /// Skips to just after `*/`; false when the text ends first.
    fn skip_block_comment(&mut self) -> bool {
        while let Some(c) = self.chars.next() {
            if c == '*' && self.chars.peek() == Some(&'/') {
                self.chars.next();
                return true;
            }
        }
        false
    }
}
