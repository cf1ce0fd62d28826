//! A serde `Deserializer` over the spanned RON tree, substituting params.
//!
//! Every task kind is a plain `#[derive(Deserialize)]` struct; this module
//! feeds it values from the pipeline file and turns serde's errors into
//! errors that carry the span of the offending value. Strings are
//! substituted here: `${param}` becomes the param's text, a string that is
//! exactly `"${param}"` takes the param's typed value, `${out}`,
//! `${needs.S}` and `$$` are checked and left for run time.

use std::fmt;

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

use super::syntax::{Kind, Node, Span};

/// Where a param's value came from: its spanned value in a pipeline file or a `-p` argument.
#[derive(Debug, Clone)]
pub struct Param {
    pub name: String,
    pub node: Node,
}

/// What `${…}` may refer to inside one stage's task.
pub struct Scope<'a> {
    pub params: &'a [Param],
    /// Stages named by `for_each` or `needs`, usable as `${needs.S}`.
    pub needs: &'a [String],
}

#[derive(Debug, Clone, PartialEq)]
pub struct DeError {
    pub message: String,
    pub span: Option<Span>,
    pub help: Option<String>,
    /// When the bad value came from a param: its name and where it was set.
    pub origin: Option<(String, Span)>,
}

impl DeError {
    fn at(mut self, span: Span) -> DeError {
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
        let (expected, help) = expected_words(&exp.to_string());
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

/// Deserializes `T` from `node`, substituting params visible in `scope`.
pub fn from_node<'s, T: de::DeserializeOwned>(
    node: &Node,
    scope: &Scope<'s>,
) -> Result<T, DeError> {
    T::deserialize(De {
        node,
        scope,
        literal: false,
    })
}

/// The result of substituting one string.
pub enum Subst<'a> {
    /// The string was exactly `${p}`: it takes the param's (typed) value.
    Whole(&'a Param),
    Text(String),
}

/// Substitutes params in `text` (the value of a string literal at `span`).
pub fn substitute<'a>(text: &str, node: &Node, scope: &Scope<'a>) -> Result<Subst<'a>, DeError> {
    let (raw_offset, escaped) = match &node.kind {
        Kind::Str {
            raw_offset,
            escaped,
            ..
        } => (*raw_offset as usize, *escaped),
        _ => (0, true),
    };
    // The span of a piece of the string, when it can be located exactly.
    let piece = |start: usize, len: usize| {
        if escaped {
            node.span
        } else {
            node.span.sub(raw_offset + start, len)
        }
    };
    if let Some(name) = text.strip_prefix("${").and_then(|r| r.strip_suffix('}')) {
        if let Some(p) = scope.params.iter().find(|p| p.name == name) {
            return Ok(Subst::Whole(p));
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut offset = 0;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(r) = after.strip_prefix('$') {
            out.push_str("$$");
            rest = r;
            offset += i + 2;
            continue;
        }
        if !after.starts_with('{') {
            out.push('$');
            rest = after;
            offset += i + 1;
            continue;
        }
        let Some(close) = after.find('}') else {
            return Err(DeError::new(
                "unclosed `${`",
                piece(offset + i, rest.len() - i),
                Some("close it with `}`, or write `$$` for a literal `$`".into()),
            ));
        };
        let name = &after[1..close];
        let whole = &rest[i..i + 2 + close];
        let here = piece(offset + i, whole.len());
        if name == "out" {
            out.push_str(whole);
        } else if let Some(stage) = name.strip_prefix("needs.") {
            if !scope.needs.iter().any(|s| s == stage) {
                let help = if scope.needs.is_empty() {
                    format!("this stage reads no other stage: add `needs: [\"{stage}\"]` or `for_each: \"{stage}\"`")
                } else {
                    format!(
                        "this stage reads {}; add `{stage}` to `needs` to read it",
                        scope
                            .needs
                            .iter()
                            .map(|s| format!("`${{needs.{s}}}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                return Err(DeError::new(
                    format!("`{whole}` names a stage this stage does not depend on"),
                    here,
                    Some(help),
                ));
            }
            out.push_str(whole);
        } else if let Some(p) = scope.params.iter().find(|p| p.name == name) {
            out.push_str(&node_text(&p.node).replace('$', "$$"));
        } else {
            let candidates = scope
                .params
                .iter()
                .map(|p| p.name.clone())
                .chain(std::iter::once("out".to_string()))
                .chain(scope.needs.iter().map(|s| format!("needs.{s}")))
                .collect::<Vec<_>>();
            let help = match super::did_you_mean(name, candidates.iter().map(String::as_str)) {
                Some(s) => format!("did you mean `${{{s}}}`? (write `$$` for a literal `$`)"),
                None if candidates.is_empty() => {
                    "no params are defined here; define it under `params` or in a `matrix`".into()
                }
                None => format!(
                    "known here: {}; write `$$` for a literal `$`",
                    candidates
                        .iter()
                        .map(|c| format!("`${{{c}}}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            };
            return Err(DeError::new(format!("unknown `{whole}`"), here, Some(help)));
        }
        rest = &after[close + 1..];
        offset += i + 2 + close;
    }
    out.push_str(rest);
    Ok(Subst::Text(out))
}

/// How a param's value reads when substituted into a string.
pub fn node_text(node: &Node) -> String {
    match super::value_of(node) {
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

struct De<'a, 's> {
    node: &'a Node,
    scope: &'a Scope<'s>,
    /// Inside a param's value: no further substitution.
    literal: bool,
}

impl<'a, 's> De<'a, 's> {
    fn child(&self, node: &'a Node) -> De<'a, 's> {
        De {
            node,
            scope: self.scope,
            literal: self.literal,
        }
    }

    /// Runs `f`, giving errors without a span the span of this node.
    fn spanned<T>(&self, f: impl FnOnce() -> Result<T, DeError>) -> Result<T, DeError> {
        f().map_err(|e| e.at(self.node.span))
    }

    /// If this node is a string that is exactly `${param}`, the param's value.
    fn param_value(&self) -> Result<Option<&'s Param>, DeError> {
        if self.literal {
            return Ok(None);
        }
        if let Kind::Str { value, .. } = &self.node.kind {
            if let Subst::Whole(p) = substitute(value, self.node, self.scope)? {
                return Ok(Some(p));
            }
        }
        Ok(None)
    }

    fn via_param<T>(
        &self,
        p: &'s Param,
        f: impl FnOnce(De<'_, 's>) -> Result<T, DeError>,
    ) -> Result<T, DeError> {
        f(De {
            node: &p.node,
            scope: self.scope,
            literal: true,
        })
        .map_err(|mut e| {
            e.span = Some(self.node.span);
            if e.origin.is_none() {
                e.origin = Some((p.name.clone(), p.node.span));
            }
            e
        })
    }
}

macro_rules! forward_to_any {
    ($($method:ident)*) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
            self.deserialize_any(visitor)
        })*
    };
}

impl<'de, 'a, 's> de::Deserializer<'de> for De<'a, 's> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if let Some(p) = self.param_value()? {
            return self.via_param(p, |d| d.deserialize_any(visitor));
        }
        self.spanned(|| match &self.node.kind {
            Kind::Bool(b) => visitor.visit_bool(*b),
            Kind::Int(i) => visitor.visit_i64(*i),
            Kind::Float(x) => visitor.visit_f64(*x),
            Kind::Str { value, .. } => {
                if self.literal {
                    return visitor.visit_str(value);
                }
                match substitute(value, self.node, self.scope)? {
                    Subst::Text(t) => visitor.visit_string(t),
                    Subst::Whole(_) => unreachable!("handled by param_value"),
                }
            }
            Kind::List(items) | Kind::Tuple { items, .. } => visitor.visit_seq(Seq {
                items: items.iter(),
                de: &self,
            }),
            Kind::Map(entries) => visitor.visit_map(MapEntries {
                entries: entries.iter(),
                value: None,
                de: &self,
            }),
            Kind::Struct { fields, .. } => visitor.visit_map(Fields {
                fields: fields.iter(),
                value: None,
                de: &self,
            }),
            Kind::Unit(ident) => visitor.visit_str(&ident.name),
        })
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        if let Some(p) = self.param_value()? {
            return self.via_param(p, |d| d.deserialize_option(visitor));
        }
        let span = self.node.span;
        match &self.node.kind {
            Kind::Unit(i) if i.name == "None" => {
                visitor.visit_none().map_err(|e: DeError| e.at(span))
            }
            Kind::Tuple {
                name: Some(n),
                items,
            } if n.name == "Some" => match items.as_slice() {
                [inner] => visitor
                    .visit_some(self.child(inner))
                    .map_err(|e: DeError| e.at(span)),
                _ => Err(DeError::new(
                    "`Some` takes exactly one value",
                    span,
                    Some("write `Some(value)`".into()),
                )),
            },
            _ => visitor.visit_some(self).map_err(|e: DeError| e.at(span)),
        }
    }

    fn deserialize_unit<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        self.spanned(|| match &self.node.kind {
            Kind::Tuple { items, .. } if items.is_empty() => visitor.visit_unit(),
            other => Err(de::Error::custom(format_args!(
                "expected `()`, found {}",
                other.describe()
            ))),
        })
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        if let Some(p) = self.param_value()? {
            return self.via_param(p, |d| d.deserialize_enum(_name, _variants, visitor));
        }
        self.spanned(|| visitor.visit_enum(Enum { de: &self }))
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DeError> {
        visitor.visit_unit()
    }

    forward_to_any! {
        deserialize_bool deserialize_i8 deserialize_i16 deserialize_i32 deserialize_i64 deserialize_i128
        deserialize_u8 deserialize_u16 deserialize_u32 deserialize_u64 deserialize_u128
        deserialize_f32 deserialize_f64 deserialize_char deserialize_str deserialize_string
        deserialize_bytes deserialize_byte_buf deserialize_seq deserialize_map deserialize_identifier
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_unit(visitor)
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _n: &'static str,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.deserialize_any(visitor)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        if let Some(p) = self.param_value()? {
            return self.via_param(p, |d| d.deserialize_struct(_name, _fields, visitor));
        }
        self.spanned(|| match &self.node.kind {
            Kind::Struct { fields, .. } => visitor.visit_map(Fields {
                fields: fields.iter(),
                value: None,
                de: &self,
            }),
            Kind::Map(entries) => visitor.visit_map(MapEntries {
                entries: entries.iter(),
                value: None,
                de: &self,
            }),
            Kind::Tuple { items, .. } if items.is_empty() => visitor.visit_map(Fields {
                fields: [].iter(),
                value: None,
                de: &self,
            }),
            other => Err(de::Error::custom(format_args!(
                "expected a struct `(field: value, …)`, found {}",
                other.describe()
            ))),
        })
    }
}

struct Seq<'a, 'b, 's> {
    items: std::slice::Iter<'a, Node>,
    de: &'b De<'a, 's>,
}

impl<'de, 'a, 'b, 's> de::SeqAccess<'de> for Seq<'a, 'b, 's> {
    type Error = DeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        match self.items.next() {
            Some(node) => seed
                .deserialize(self.de.child(node))
                .map(Some)
                .map_err(|e| e.at(node.span)),
            None => Ok(None),
        }
    }
}

struct MapEntries<'a, 'b, 's> {
    entries: std::slice::Iter<'a, (Node, Node)>,
    value: Option<&'a Node>,
    de: &'b De<'a, 's>,
}

impl<'de, 'a, 'b, 's> de::MapAccess<'de> for MapEntries<'a, 'b, 's> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        match self.entries.next() {
            Some((k, v)) => {
                self.value = Some(v);
                seed.deserialize(self.de.child(k))
                    .map(Some)
                    .map_err(|e| e.at(k.span))
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let node = self.value.take().expect("value after key");
        seed.deserialize(self.de.child(node))
            .map_err(|e| e.at(node.span))
    }
}

struct Fields<'a, 'b, 's> {
    fields: std::slice::Iter<'a, (super::syntax::Ident, Node)>,
    value: Option<&'a Node>,
    de: &'b De<'a, 's>,
}

impl<'de, 'a, 'b, 's> de::MapAccess<'de> for Fields<'a, 'b, 's> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        match self.fields.next() {
            Some((ident, v)) => {
                self.value = Some(v);
                let key: de::value::StrDeserializer<'_, DeError> =
                    ident.name.as_str().into_deserializer();
                seed.deserialize(key)
                    .map(Some)
                    .map_err(|e| e.at(ident.span))
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let node = self.value.take().expect("value after key");
        seed.deserialize(self.de.child(node))
            .map_err(|e| e.at(node.span))
    }
}

struct Enum<'a, 'b, 's> {
    de: &'b De<'a, 's>,
}

impl<'de, 'a, 'b, 's> de::EnumAccess<'de> for Enum<'a, 'b, 's> {
    type Error = DeError;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), DeError> {
        let node = self.de.node;
        let (name, span) = match &node.kind {
            Kind::Unit(i) => (i.name.as_str(), i.span),
            Kind::Struct { name: Some(i), .. } | Kind::Tuple { name: Some(i), .. } => {
                (i.name.as_str(), i.span)
            }
            Kind::Str { value, .. } => (value.as_str(), node.span),
            other => {
                return Err(DeError::new(
                    format!(
                        "expected a variant name such as `Name` or `Name(…)`, found {}",
                        other.describe()
                    ),
                    node.span,
                    None,
                ))
            }
        };
        let key: de::value::StrDeserializer<'_, DeError> = name.into_deserializer();
        let v = seed.deserialize(key).map_err(|e: DeError| e.at(span))?;
        Ok((v, self))
    }
}

impl<'de, 'a, 'b, 's> de::VariantAccess<'de> for Enum<'a, 'b, 's> {
    type Error = DeError;

    fn unit_variant(self) -> Result<(), DeError> {
        match &self.de.node.kind {
            Kind::Unit(_) | Kind::Str { .. } => Ok(()),
            Kind::Tuple { items, .. } if items.is_empty() => Ok(()),
            _ => Err(DeError::new(
                "this variant takes no fields",
                self.de.node.span,
                Some("remove the parentheses".into()),
            )),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, DeError> {
        let node = self.de.node;
        match &node.kind {
            // `Command(run: …)`: the variant wraps a struct written inline.
            Kind::Struct { .. } => seed.deserialize(self.de.child(node)),
            Kind::Tuple { items, .. } if items.len() == 1 => {
                seed.deserialize(self.de.child(&items[0]))
            }
            Kind::Tuple { items, .. } if items.is_empty() => seed.deserialize(self.de.child(node)),
            _ => Err(DeError::new(
                "this variant needs a value in parentheses",
                node.span,
                Some("write it as `Name(…)`".into()),
            )),
        }
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, visitor: V) -> Result<V::Value, DeError> {
        match &self.de.node.kind {
            Kind::Tuple { items, .. } => visitor.visit_seq(Seq {
                items: items.iter(),
                de: self.de,
            }),
            _ => Err(DeError::new(
                "expected `Name(a, b, …)`",
                self.de.node.span,
                None,
            )),
        }
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        match &self.de.node.kind {
            Kind::Struct { fields, .. } => visitor.visit_map(Fields {
                fields: fields.iter(),
                value: None,
                de: self.de,
            }),
            Kind::Unit(_) | Kind::Str { .. } => visitor.visit_map(Fields {
                fields: [].iter(),
                value: None,
                de: self.de,
            }),
            Kind::Tuple { items, .. } if items.is_empty() => visitor.visit_map(Fields {
                fields: [].iter(),
                value: None,
                de: self.de,
            }),
            _ => Err(DeError::new(
                "expected `Name(field: value, …)`",
                self.de.node.span,
                None,
            )),
        }
    }
}
