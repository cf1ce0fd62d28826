//! The regression gate: `--fail-if "throughput_images_per_s < -5%"`.
//!
//! A condition names a metric, a direction and a relative change. A pair
//! trips it when its ratio's 95 % interval excludes 1 (the change is
//! significant) and the change B / A − 1 is beyond the given one in the
//! given direction. A pair without an interval never trips it.

use super::pair::Row;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    Below,
    Above,
}

/// One `--fail-if` condition.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Condition {
    pub metric: String,
    pub direction: Direction,
    /// As a fraction: −0.05 for `-5%`.
    pub change: f64,
    pub text: String,
}

impl Condition {
    /// `METRIC < -5%`, `METRIC > +5%` (`%` optional: `-0.05` is the same).
    pub(crate) fn parse(text: &str) -> Result<Condition, String> {
        let bad = |why: &str| {
            format!(
                "`--fail-if {text}`: {why}; write it as `METRIC < -5%` or `METRIC > +5%` \
                 (METRIC a dotted path into results.json, such as `latency_ms.p99`)"
            )
        };
        let (metric, direction, rest) = match (text.split_once('<'), text.split_once('>')) {
            (Some((m, r)), None) => (m, Direction::Below, r),
            (None, Some((m, r))) => (m, Direction::Above, r),
            _ => return Err(bad("it needs exactly one `<` or `>`")),
        };
        let metric = metric.trim();
        if metric.is_empty() || metric.split('.').any(str::is_empty) {
            return Err(bad("the metric is missing or not a dotted path"));
        }
        let rest = rest.trim();
        let (number, scale) = match rest.strip_suffix('%') {
            Some(n) => (n.trim(), 0.01),
            None => (rest, 1.0),
        };
        let change = number
            .parse::<f64>()
            .ok()
            .filter(|c| c.is_finite())
            .ok_or_else(|| bad(&format!("`{rest}` is not a number")))?
            * scale;
        if scale == 1.0 && change.abs() >= 1.0 {
            return Err(bad(&format!(
                "`{rest}` without `%` reads as a fraction ({:+} %), which is seldom meant: write `{rest}%`, or `{:+}` for that fraction",
                change * 100.0,
                change / 100.0
            )));
        }
        if direction == Direction::Below && change <= -1.0 {
            return Err(bad(&format!(
                "`< {rest}` can never trip: B / A is above 0, so a change is above −100 %"
            )));
        }
        Ok(Condition {
            metric: metric.to_owned(),
            direction,
            change,
            text: text.trim().to_owned(),
        })
    }

    /// Whether `row` trips this condition.
    pub(crate) fn trips(&self, row: &Row) -> bool {
        if *row.metric != *self.metric {
            return false;
        }
        let (Some(ratio), Some(low), Some(high)) = (row.ratio, row.ratio_low, row.ratio_high)
        else {
            return false;
        };
        let significant = !(low <= 1.0 && 1.0 <= high);
        let change = ratio - 1.0;
        significant
            && match self.direction {
                Direction::Below => change < self.change,
                Direction::Above => change > self.change,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse_or_say_how_to_write_them() {
        let c = Condition::parse("throughput_images_per_s < -5%").unwrap();
        assert_eq!(
            (c.metric.as_str(), c.direction, c.change),
            ("throughput_images_per_s", Direction::Below, -0.05)
        );
        let c = Condition::parse("latency_ms.p99>+0.05").unwrap();
        assert_eq!((c.direction, c.change), (Direction::Above, 0.05));
        // A threshold that can never trip, or a bare number read as a
        // fraction a hundred times the change meant, is refused.
        let e = Condition::parse("t < -150%").unwrap_err();
        assert!(e.contains("can never trip"), "{e}");
        let e = Condition::parse("t < -5").unwrap_err();
        assert!(
            e.contains("reads as a fraction (-500 %)") && e.contains("`-5%`"),
            "{e}"
        );
        assert!(
            Condition::parse("t > +150%").is_ok(),
            "a 2.5× rise can happen"
        );
        for bad in ["latency_ms.p99", "x < y%", "< 5%", "a < 1 > 2", "a..b > 5%"] {
            let e = Condition::parse(bad).unwrap_err();
            assert!(e.contains("METRIC < -5%"), "{bad}: {e}");
        }
    }
}
