//! Hydra's override syntax for `-p` values, beside the RON form: a sweep
//! written `1,2,4,8`, `range(1,9)` (stop exclusive, as in Hydra and
//! Python), `choice(a,b)` or `sort(…)`, and quoted values (`'a,b'` is one
//! string). Elements are typed as Hydra types them: integers, floats,
//! `true`/`false` in any case, anything else a string.

/// One element of a sweep.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Element {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
}

/// The most values a `range(…)` may expand to.
const MAX_RANGE: usize = 100_000;

/// The values a Hydra sweep stands for; None when `text` is not one (then
/// it is read as RON, or as a bare string). A single quoted value is one
/// string, quotes removed.
pub(crate) fn sweep(text: &str) -> Option<Result<Vec<Element>, String>> {
    let t = text.trim();
    if let Some((name, args)) = call(t) {
        return Some(function(name, args, t));
    }
    if t.starts_with(['[', '(', '{']) {
        return None;
    }
    let parts = split_top(t);
    if parts.len() > 1 {
        return Some(parts.iter().map(|p| element(p)).collect());
    }
    if is_quoted(t, '\'') {
        return Some(Ok(vec![Element::Str(t[1..t.len() - 1].to_owned())]));
    }
    None
}

/// `name(args)` when `t` is a call of one of Hydra's sweep functions.
fn call(t: &str) -> Option<(&str, &str)> {
    let open = t.find('(')?;
    let name = &t[..open];
    let known = [
        "range", "choice", "sort", "shuffle", "interval", "glob", "tag",
    ];
    (known.contains(&name) && t.ends_with(')')).then(|| (name, &t[open + 1..t.len() - 1]))
}

fn function(name: &str, args: &str, whole: &str) -> Result<Vec<Element>, String> {
    let parts = split_top(args);
    let parts: Vec<&str> = parts
        .iter()
        .map(|p| p.trim())
        .filter(|p| !p.is_empty())
        .collect();
    match name {
        "choice" if parts.is_empty() => Err(format!("`{whole}` chooses among no values")),
        "choice" => parts.iter().map(|p| element(p)).collect(),
        "range" => range(&parts, whole),
        "sort" => sort(&parts, whole),
        "interval" => Err(format!(
            "`{whole}` is a continuous interval, which only Hydra's optimizing sweepers sample; vitgraph builds every configuration: list the values, or use `range(start, stop, step)`"
        )),
        "shuffle" => Err(format!(
            "`{whole}`: a sweep's order does not change which nodes vitgraph builds; write the values as a list"
        )),
        _ => Err(format!(
            "`{whole}`: Hydra's `{name}(…)` picks config groups or tags sweeps, which vitgraph params do not have; write the values as a list"
        )),
    }
}

/// `range(stop)`, `range(start, stop)`, `range(start, stop, step)`, with
/// `start=`, `stop=`, `step=` also by name: integers when every bound is
/// one, floats otherwise; the stop is never reached.
fn range(parts: &[&str], whole: &str) -> Result<Vec<Element>, String> {
    let bounds = range_bounds(parts, whole)?;
    let number = |e: &Option<Element>, default: f64| -> Result<(f64, bool), String> {
        match e {
            None => Ok((default, true)),
            Some(Element::Int(i)) => Ok((*i as f64, true)),
            Some(Element::Float(x)) => Ok((*x, false)),
            Some(other) => Err(format!(
                "`{whole}`: `range` takes numbers, not `{}`",
                show(other)
            )),
        }
    };
    if bounds[1].is_none() {
        return Err(format!(
            "`{whole}` has no stop: write `range(start, stop)` (the stop is exclusive)"
        ));
    }
    let (start, a) = number(&bounds[0], 0.0)?;
    let (stop, b) = number(&bounds[1], 0.0)?;
    let (step, c) = number(&bounds[2], 1.0)?;
    if step == 0.0 || !step.is_finite() || !start.is_finite() || !stop.is_finite() {
        return Err(format!(
            "`{whole}`: the step must be a finite number other than 0"
        ));
    }
    let ints = a && b && c;
    let mut out = Vec::new();
    let mut i = 0.0;
    loop {
        let v = start + step * i;
        if (step > 0.0 && v >= stop) || (step < 0.0 && v <= stop) {
            break;
        }
        if out.len() == MAX_RANGE {
            return Err(format!("`{whole}` has more than {MAX_RANGE} values"));
        }
        out.push(if ints {
            Element::Int(v as i64)
        } else {
            Element::Float(v)
        });
        i += 1.0;
    }
    if out.is_empty() {
        return Err(format!(
            "`{whole}` has no values: its stop is exclusive, as in Hydra and Python (`range(1,9)` is 1 to 8)"
        ));
    }
    Ok(out)
}

/// `range`'s start, stop and step as written, by position or by name.
fn range_bounds(parts: &[&str], whole: &str) -> Result<Vec<Option<Element>>, String> {
    let mut positional = Vec::new();
    let mut named: [Option<Element>; 3] = [None, None, None];
    for p in parts {
        match p.split_once('=') {
            Some((k, v)) => {
                let at = ["start", "stop", "step"]
                    .iter()
                    .position(|n| *n == k.trim())
                    .ok_or_else(|| {
                        format!(
                            "`{whole}`: `range` takes `start`, `stop` and `step`, not `{}`",
                            k.trim()
                        )
                    })?;
                named[at] = Some(element(v)?);
            }
            None => positional.push(element(p)?),
        }
    }
    let mut bounds: Vec<Option<Element>> = match positional.len() {
        0 => vec![None, None, None],
        1 => vec![None, Some(positional[0].clone()), None],
        2 | 3 => {
            let mut b: Vec<Option<Element>> = positional.iter().cloned().map(Some).collect();
            b.resize(3, None);
            b
        }
        _ => {
            return Err(format!(
                "`{whole}`: `range` takes at most a start, a stop and a step"
            ))
        }
    };
    for (i, n) in named.into_iter().enumerate() {
        if n.is_some() {
            bounds[i] = n;
        }
    }
    Ok(bounds)
}

/// `sort(a,b,c)`, `sort(range(…))`, `sort(…, reverse=true)`.
fn sort(parts: &[&str], whole: &str) -> Result<Vec<Element>, String> {
    let mut reverse = false;
    let mut values = Vec::new();
    for p in parts {
        match p.split_once('=').filter(|(k, _)| k.trim() == "reverse") {
            Some((_, v)) => reverse = element(v)? == Element::Bool(true),
            None => match call(p) {
                Some((name, args)) => values.extend(function(name, args, p)?),
                None => values.push(element(p)?),
            },
        }
    }
    let key = |e: &Element| match e {
        Element::Int(i) => (0, *i as f64, String::new()),
        Element::Float(x) => (0, *x, String::new()),
        Element::Bool(b) => (1, f64::from(u8::from(*b)), String::new()),
        Element::Str(s) => (2, 0.0, s.clone()),
    };
    if values
        .iter()
        .map(|v| key(v).0)
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        > 1
    {
        return Err(format!(
            "`{whole}`: cannot sort numbers, booleans and strings together"
        ));
    }
    values.sort_by(|x, y| {
        let (a, b) = (key(x), key(y));
        a.1.total_cmp(&b.1).then_with(|| a.2.cmp(&b.2))
    });
    if reverse {
        values.reverse();
    }
    Ok(values)
}

/// One element, typed as Hydra types it.
pub(crate) fn element(text: &str) -> Result<Element, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("an empty value in a sweep: remove the extra comma".to_owned());
    }
    if is_quoted(t, '\'') || is_quoted(t, '"') {
        return Ok(Element::Str(t[1..t.len() - 1].to_owned()));
    }
    if t.eq_ignore_ascii_case("null") {
        return Err("`null`: vitgraph params have no null value; leave the param out to keep the pipeline's".to_owned());
    }
    if t.starts_with(['[', '{', '(']) || t.contains(['(', '[', '{']) {
        return Err(format!("`{t}`: a sweep's values are numbers, booleans or strings; quote a string holding brackets"));
    }
    let plain = t.replace('_', "");
    if let Ok(i) = plain.parse::<i64>() {
        return Ok(Element::Int(i));
    }
    if t.chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || c == '.' || c == '-' || c == '+')
    {
        if let Ok(x) = plain.parse::<f64>() {
            return Ok(Element::Float(x));
        }
    }
    if t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false") {
        return Ok(Element::Bool(t.eq_ignore_ascii_case("true")));
    }
    Ok(Element::Str(t.to_owned()))
}

fn show(e: &Element) -> String {
    match e {
        Element::Int(i) => i.to_string(),
        Element::Float(x) => x.to_string(),
        Element::Bool(b) => b.to_string(),
        Element::Str(s) => s.clone(),
    }
}

fn is_quoted(t: &str, q: char) -> bool {
    t.len() >= 2 && t.starts_with(q) && t.ends_with(q)
}

/// `t` split at the commas outside quotes and brackets.
fn split_top(t: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut quote, mut from) = (0i32, None::<char>, 0);
    for (i, c) in t.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => {
                parts.push(&t[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&t[from..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::Element::{Bool, Float, Int, Str};
    use super::*;

    fn values(text: &str) -> Vec<Element> {
        sweep(text)
            .unwrap_or_else(|| panic!("{text} is no sweep"))
            .unwrap()
    }

    #[test]
    fn hydra_sweeps_expand_as_hydra_expands_them() {
        assert_eq!(values("1,2,4,8"), [Int(1), Int(2), Int(4), Int(8)]);
        assert_eq!(values("range(1,9)"), (1..9).map(Int).collect::<Vec<_>>());
        assert_eq!(values("range(4)"), [Int(0), Int(1), Int(2), Int(3)]);
        assert_eq!(values("range(0,10,step=4)"), [Int(0), Int(4), Int(8)]);
        assert_eq!(values("range(5,0,-2)"), [Int(5), Int(3), Int(1)]);
        assert_eq!(
            values("range(0,1,0.25)"),
            [Float(0.0), Float(0.25), Float(0.5), Float(0.75)]
        );
        assert_eq!(
            values("choice(vit16x6x384, 'a,b', true)"),
            [Str("vit16x6x384".into()), Str("a,b".into()), Bool(true)]
        );
        assert_eq!(values("sort(8,1,4,reverse=true)"), [Int(8), Int(4), Int(1)]);
        assert_eq!(values("sort(range(3))"), [Int(0), Int(1), Int(2)]);
        assert_eq!(values("'one, string'"), [Str("one, string".into())]);
        assert_eq!(
            values("\"x\",y,2.5,False"),
            [Str("x".into()), Str("y".into()), Float(2.5), Bool(false)]
        );
        assert_eq!(values("1_000,2"), [Int(1000), Int(2)]);
    }

    #[test]
    fn ron_and_plain_values_are_left_to_the_ron_reader() {
        for text in [
            "[1,2]",
            "8",
            "cuda",
            "(a: 1, b: 2)",
            "\"quoted\"",
            "vit16x6x384",
        ] {
            assert!(sweep(text).is_none(), "{text}");
        }
    }

    #[test]
    fn sweeps_vitgraph_cannot_enumerate_say_why() {
        for (text, says) in [
            ("range(9,1)", "stop is exclusive"),
            ("range(1,9,0)", "other than 0"),
            ("range(0,1000000)", "more than 100000"),
            ("interval(0,1)", "continuous interval"),
            ("shuffle(1,2)", "order"),
            ("glob(*)", "config groups"),
            ("1,null", "no null"),
            ("1,,2", "extra comma"),
            ("choice()", "no values"),
            ("range(a,3)", "numbers"),
        ] {
            let err = sweep(text).unwrap().unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }
}
