//! What goes wrong deserializing a pipeline value, with its place: serde's
//! errors in the words of a pipeline file.

use std::fmt;

use serde::de;

use super::syntax::Span;

#[derive(Debug, Clone, PartialEq)]
pub struct DeError {
    pub message: String,
    pub span: Option<Span>,
    pub help: Option<String>,
    /// When the bad value came from a param: its name and where it was set.
    pub origin: Option<(String, Span)>,
}

impl DeError {
    pub(super) fn at(mut self, span: Span) -> DeError {
        if self.span.is_none() {
            self.span = Some(span);
        }
        self
    }

    pub fn new(message: impl Into<String>, span: Span, help: Option<String>) -> DeError {
        DeError {
            message: message.into(),
            span: Some(span),
            help,
            origin: None,
        }
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        DeError {
            message: msg.to_string(),
            span: None,
            help: None,
            origin: None,
        }
    }

    fn invalid_type(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        let (expected, help) = expected_words(&exp.to_string());
        DeError {
            message: format!("expected {expected}, found {}", found_words(unexp)),
            span: None,
            help,
            origin: None,
        }
    }

    fn invalid_value(unexp: de::Unexpected<'_>, exp: &dyn de::Expected) -> Self {
        let exp = exp.to_string();
        let largest = match exp.as_str() {
            "u8" => Some(u64::from(u8::MAX)),
            "u16" => Some(u64::from(u16::MAX)),
            "u32" => Some(u64::from(u32::MAX)),
            _ => None,
        };
        let positive = match unexp {
            de::Unexpected::Unsigned(i) => Some(i),
            de::Unexpected::Signed(i) => u64::try_from(i).ok(),
            _ => None,
        };
        if let (Some(i), Some(max)) = (positive, largest) {
            return DeError {
                message: format!("the integer `{i}` is too large: the largest here is {max}"),
                span: None,
                help: Some(format!("write a whole number up to {max}")),
                origin: None,
            };
        }
        let (expected, help) = expected_words(&exp);
        DeError {
            message: format!("invalid value {}: expected {expected}", found_words(unexp)),
            span: None,
            help,
            origin: None,
        }
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let help = match super::did_you_mean(field, expected.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("the fields here are: {}", list(expected)),
        };
        DeError {
            message: format!("unknown field `{field}`"),
            span: None,
            help: Some(help),
            origin: None,
        }
    }

    fn unknown_variant(variant: &str, expected: &'static [&'static str]) -> Self {
        let help = match super::did_you_mean(variant, expected.iter().copied()) {
            Some(s) => format!("did you mean `{s}`?"),
            None => format!("expected one of: {}", list(expected)),
        };
        DeError {
            message: format!("unknown variant `{variant}`"),
            span: None,
            help: Some(help),
            origin: None,
        }
    }

    fn missing_field(field: &'static str) -> Self {
        DeError {
            message: format!("missing field `{field}`"),
            span: None,
            help: Some(format!("add `{field}: …` here")),
            origin: None,
        }
    }
}

/// serde's name for an expected type, in the words of a pipeline file, with a hint.
fn expected_words(exp: &str) -> (String, Option<String>) {
    let (words, help) = match exp {
        "u8" | "u16" | "u32" | "u64" | "usize" => (
            "a non-negative integer",
            "write a whole number such as `1`, without quotes",
        ),
        "i8" | "i16" | "i32" | "i64" | "isize" => (
            "an integer",
            "write a whole number such as `-1` or `2`, without quotes",
        ),
        "f32" | "f64" => ("a number", "write a number such as `0.5`, without quotes"),
        "a boolean" => ("a bool", "write `true` or `false`, without quotes"),
        "a sequence" => ("a list", "write a list in brackets: `[\"a\", \"b\"]`"),
        other => return (other.to_string(), None),
    };
    (words.to_string(), Some(help.to_string()))
}

/// serde's description of an unexpected value, in the words of a pipeline file.
fn found_words(unexp: de::Unexpected<'_>) -> String {
    use de::Unexpected as U;
    match unexp {
        U::Bool(b) => format!("the bool `{b}`"),
        U::Unsigned(i) => format!("the integer `{i}`"),
        U::Signed(i) => format!("the integer `{i}`"),
        U::Float(x) => format!("the number `{x}`"),
        U::Str(s) => format!("the string \"{s}\""),
        U::Seq => "a list".to_string(),
        U::Map => "a map".to_string(),
        U::Unit => "`()`".to_string(),
        other => other.to_string(),
    }
}

fn list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}
