//! One cell of the report table, its ordering and how it reads in markdown.

use std::cmp::Ordering;

use serde_json::Value as Json;

use crate::value::Value;

/// A table cell: a param value or a value found in an upstream file.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cell {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

/// Text as markdown shows it and nothing more: `&`, `<` and `>` as HTML
/// entities (a renderer would otherwise pass `<img onerror=…>` through as
/// HTML), and `|` escaped, since it would end a table cell.
pub(super) fn markdown_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
}

impl Cell {
    /// Numbers keep their kind; lists and objects become compact JSON text.
    pub(super) fn from_json(json: &Json) -> Cell {
        match json {
            Json::Null => Cell::Null,
            Json::Bool(b) => Cell::Bool(*b),
            Json::Number(n) => n
                .as_i64()
                .map(Cell::Int)
                .unwrap_or_else(|| Cell::Float(n.as_f64().unwrap_or(f64::NAN))),
            Json::String(s) => Cell::Str(s.clone()),
            other => Cell::Str(other.to_string()),
        }
    }

    pub(super) fn from_value(value: &Value) -> Cell {
        match value {
            Value::Bool(b) => Cell::Bool(*b),
            Value::Int(i) => Cell::Int(*i),
            Value::Float(x) => Cell::Float(*x),
            Value::Str(s) => Cell::Str(s.clone()),
            list @ Value::List(_) => Cell::Str(list.display()),
        }
    }

    pub(super) fn as_f64(&self) -> Option<f64> {
        match self {
            Cell::Int(i) => Some(*i as f64),
            Cell::Float(x) => Some(*x),
            _ => None,
        }
    }

    pub(super) fn is_null(&self) -> bool {
        matches!(self, Cell::Null)
    }

    /// The cell as text: what a CSV of mixed kinds and the markdown table show.
    pub(super) fn text(&self) -> String {
        match self {
            Cell::Null => String::new(),
            Cell::Bool(b) => b.to_string(),
            Cell::Int(i) => i.to_string(),
            Cell::Float(x) => x.to_string(),
            Cell::Str(s) => s.clone(),
        }
    }

    /// The cell in a markdown table: floats to four significant digits.
    pub(super) fn markdown(&self) -> String {
        match self {
            Cell::Float(x) => format_sig(*x),
            Cell::Str(s) => markdown_text(s),
            other => other.text(),
        }
    }

    /// A total order for sorting rows: nulls last, numbers by value, then
    /// bools, then text.
    pub(super) fn order(&self, other: &Cell) -> Ordering {
        fn rank(c: &Cell) -> u8 {
            match c {
                Cell::Int(_) | Cell::Float(_) => 0,
                Cell::Bool(_) => 1,
                Cell::Str(_) => 2,
                Cell::Null => 3,
            }
        }
        match (self, other) {
            (Cell::Bool(a), Cell::Bool(b)) => a.cmp(b),
            (Cell::Str(a), Cell::Str(b)) => a.cmp(b),
            (a, b) => match (a.as_f64(), b.as_f64()) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                _ => rank(a).cmp(&rank(b)),
            },
        }
    }
}

/// Four significant digits, no exponent for everyday magnitudes.
pub(super) fn format_sig(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return "0".to_owned();
    }
    let magnitude = x.abs().log10().floor() as i32;
    if !(-4..=12).contains(&magnitude) {
        return format!("{x:.3e}");
    }
    let decimals = (3 - magnitude).clamp(0, 8) as usize;
    format!("{x:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_numbers_keep_their_kind() {
        assert_eq!(Cell::from_json(&json!(3)), Cell::Int(3));
        assert_eq!(Cell::from_json(&json!(0.25)), Cell::Float(0.25));
        assert_eq!(Cell::from_json(&json!([1, 2])), Cell::Str("[1,2]".into()));
    }

    #[test]
    fn order_sorts_numbers_by_value_and_nulls_last() {
        let mut cells = vec![
            Cell::Null,
            Cell::Float(10.5),
            Cell::Int(2),
            Cell::Str("a".into()),
        ];
        cells.sort_by(Cell::order);
        assert_eq!(
            cells,
            [
                Cell::Int(2),
                Cell::Float(10.5),
                Cell::Str("a".into()),
                Cell::Null
            ]
        );
    }

    #[test]
    fn markdown_text_shows_html_as_text() {
        assert_eq!(
            Cell::Str("<img src=x onerror=alert(1)> a|b & c".into()).markdown(),
            "&lt;img src=x onerror=alert(1)&gt; a\\|b &amp; c"
        );
    }

    #[test]
    fn markdown_floats_have_four_significant_digits() {
        assert_eq!(format_sig(1234.567), "1235");
        assert_eq!(format_sig(0.0123456), "0.01235");
        assert_eq!(format_sig(3.0), "3.000");
        assert_eq!(format_sig(1.5e-7), "1.500e-7");
    }
}
