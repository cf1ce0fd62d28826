//! "Did you mean …?": the closest name to a misspelled one, for the help of
//! every error that names an unknown field, stage, target or param.

/// The closest candidate to `name` by edit distance, if it is close enough to be a typo.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::damerau_levenshtein(name, c), c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 3) && *d < name.len().max(1))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_its_name_and_a_stranger_finds_none() {
        let known = ["for_each", "needs", "matrix"];
        assert_eq!(did_you_mean("for_eahc", known), Some("for_each"));
        assert_eq!(did_you_mean("neds", known), Some("needs"));
        assert_eq!(did_you_mean("zzzzzz", known), None);
    }
}
