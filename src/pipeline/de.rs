//! A serde `Deserializer` over the spanned RON tree, substituting params.
//!
//! Every task kind is a plain `#[derive(Deserialize)]` struct; this module
//! feeds it values from the pipeline file and turns serde's errors into
//! errors that carry the span of the offending value. Strings are
//! substituted here: `${param}` becomes the param's text, a string that is
//! exactly `"${param}"` takes the param's typed value, `${out}`,
//! `${needs.S}` and `$$` are checked and left for run time.

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};

pub use super::de_error::DeError;
pub use super::subst::{node_text, Param, Scope};
use super::subst::{substitute, Subst};
use super::syntax::{Kind, Node};

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

/// Sets `p` in `params`: replaces the param of its name, or adds it.
pub(super) fn overlay(params: &mut Vec<Param>, p: Param) {
    match params.iter_mut().find(|q| q.name == p.name) {
        Some(q) => *q = p,
        None => params.push(p),
    }
}
