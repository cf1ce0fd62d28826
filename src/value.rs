//! Parameter values: what a `params` entry, a matrix cell or a `-p` override holds.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, SeqAccess, Visitor};
use serde::{Serialize, Serializer};

/// A parameter value. Numbers keep their kind (an integer stays an integer), so
/// `matrix: {"res": [224, 512]}` can drive an integer field through `"${res}"`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
}

impl Value {
    /// How the value reads inside a node id and inside a substituted string:
    /// strings bare, numbers as written, lists as `[a,b]`.
    pub fn display(&self) -> String {
        self.to_string()
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Bool(_) => "a bool",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Str(_) => "a string",
            Value::List(_) => "a list",
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => {
                if x.fract() == 0.0 && x.abs() < 1e15 {
                    write!(f, "{x:.1}")
                } else {
                    write!(f, "{x}")
                }
            }
            Value::Str(s) => f.write_str(s),
            Value::List(items) => {
                f.write_str("[")?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl Serialize for Value {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::Float(x) => s.serialize_f64(*x),
            Value::Str(v) => s.serialize_str(v),
            Value::List(items) => items.serialize(s),
        }
    }
}

impl From<&Value> for serde_json::Value {
    fn from(v: &Value) -> serde_json::Value {
        serde_json::to_value(v).unwrap_or(serde_json::Value::Null)
    }
}

/// Reads a value back from JSON (or any self-describing format): bool, integer,
/// float, string or list. An unsigned integer above `i64::MAX` becomes a float.
impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a bool, a number, a string or a list of those")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Int(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(i64::try_from(v).map_or(Value::Float(v as f64), Value::Int))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        Ok(Value::Float(v))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::Str(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::Str(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::List(items))
    }
}

#[cfg(test)]
mod tests {
    use super::Value;

    #[test]
    fn json_round_trip_keeps_each_kind() {
        let v = Value::List(vec![
            Value::Bool(true),
            Value::Int(-3),
            Value::Float(0.5),
            Value::Str("sdpa".into()),
        ]);
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(text, r#"[true,-3,0.5,"sdpa"]"#);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), v);
    }

    #[test]
    fn huge_unsigned_becomes_float_and_objects_are_refused() {
        let v: Value = serde_json::from_str("18446744073709551615").unwrap();
        assert!(matches!(v, Value::Float(_)));
        assert!(serde_json::from_str::<Value>(r#"{"a": 1}"#).is_err());
    }
}
